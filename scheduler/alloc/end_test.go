package alloc

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestAllocationEnd(t *testing.T) {
	f := newFakeSlurm(t)
	s := Slurm{Exec: Run}
	ctx := context.Background()
	id, _ := s.Submit(ctx, "#!/bin/bash\n")
	start := time.Unix(1700000000, 0)
	f.set(id, "RUNNING", "gpu07", start, start.Add(8*time.Hour))
	for _, tc := range []struct {
		name string
		env  map[string]string
		want time.Time
		err  string
	}{
		{name: "outside Slurm", env: map[string]string{}},
		{name: "SLURM_JOB_END_TIME", env: map[string]string{"SLURM_JOB_END_TIME": "1700003600", "SLURM_JOB_ID": id},
			want: start.Add(time.Hour)},
		{name: "squeue, where Slurm does not set it", env: map[string]string{"SLURM_JOB_ID": id}, want: start.Add(8 * time.Hour)},
		{name: "squeue, where it is not a time", env: map[string]string{"SLURM_JOB_END_TIME": "N/A", "SLURM_JOB_ID": id},
			want: start.Add(8 * time.Hour)},
		{name: "a job squeue does not know", env: map[string]string{"SLURM_JOB_ID": "4"}, err: "when Slurm job 4 ends"},
		{name: "not a job id", env: map[string]string{"SLURM_JOB_ID": "x;rm"}, err: "not a job id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := AllocationEnd(ctx, func(k string) string { return tc.env[k] }, s)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || !got.Equal(tc.want) {
				t.Errorf("got %v %v, want %v", got, err, tc.want)
			}
		})
	}
}
