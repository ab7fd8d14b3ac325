package alloc

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestRunGivesSlurmsOwnWords(t *testing.T) {
	f := newFakeSlurm(t)
	want := "sbatch: error: invalid partition specified: nope\nsbatch: error: Batch job submission failed: Invalid partition name specified"
	f.refuse(want)
	if _, err := (Slurm{Exec: Run}).Submit(context.Background(), "#!/bin/bash\n"); err == nil || err.Error() != want {
		t.Errorf("sbatch's failure: %v, want Slurm's text:\n%s", err, want)
	}
	f.refuse("")
	id, err := Slurm{Exec: Run}.Submit(context.Background(), "#!/bin/bash\n")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("SLURM_TIME_FORMAT", "standard") // the user's own: squeue is given gpuq's
	if jobs, err := (Slurm{Exec: Run}).Jobs(context.Background(), []string{id}); err != nil || jobs[id].State != "PENDING" {
		t.Errorf("squeue: %+v %v", jobs, err)
	}
	t.Setenv("PATH", t.TempDir())
	if err := (Slurm{Exec: Run}).Cancel(context.Background(), "42"); err == nil || !strings.Contains(err.Error(), "scancel is not on the PATH") {
		t.Errorf("scancel missing: %v", err)
	}
}

func TestSubmitReadsParsable(t *testing.T) {
	for out, want := range map[string]string{"123\n": "123", "124;cluster2\n": "124", "Submitted batch job 5\n": ""} {
		s := Slurm{Exec: func(context.Context, Command) (string, error) { return out, nil }}
		id, err := s.Submit(context.Background(), "#!/bin/bash\n")
		if id != want || (want == "") != (err != nil) {
			t.Errorf("sbatch printed %q: id %q, %v; want %q", out, id, err, want)
		}
	}
}

func TestJobs(t *testing.T) {
	f := newFakeSlurm(t)
	s := Slurm{Exec: Run}
	ctx := context.Background()
	a, _ := s.Submit(ctx, "#!/bin/bash\n")
	b, _ := s.Submit(ctx, "#!/bin/bash\n")
	start := time.Unix(1700000000, 0)
	f.set(b, "RUNNING", "gpu07", start, start.Add(8*time.Hour))
	jobs, err := s.Jobs(ctx, []string{a, b, "999"})
	if err != nil {
		t.Fatal(err)
	}
	if j := jobs[a]; j.State != "PENDING" || j.Reason != "Priority" || !j.Start.IsZero() || !j.End.IsZero() {
		t.Errorf("pending job: %+v", j)
	}
	if j := jobs[b]; j.State != "RUNNING" || j.Reason != "" || j.Nodes != "gpu07" || !j.End.Equal(start.Add(8*time.Hour)) {
		t.Errorf("running job: %+v", j)
	}
	if _, ok := jobs["999"]; ok || len(jobs) != 2 {
		t.Errorf("a job Slurm does not know is listed: %+v", jobs)
	}
	if end, err := s.EndOf(ctx, b); err != nil || !end.Equal(start.Add(8*time.Hour)) {
		t.Errorf("EndOf: %v %v", end, err)
	}
	// squeue fails when it knows none of the jobs: they are all gone, not an error.
	f.forget(a)
	f.forget(b)
	if jobs, err := s.Jobs(ctx, []string{a, b}); err != nil || len(jobs) != 0 {
		t.Errorf("forgotten jobs: %+v %v", jobs, err)
	}
	if _, err := s.EndOf(ctx, b); err == nil {
		t.Error("EndOf a job squeue does not know: no error")
	}
	broken := Slurm{Exec: func(context.Context, Command) (string, error) {
		return "", fmt.Errorf("squeue: error: Socket timed out on send/recv operation")
	}}
	if _, err := broken.Jobs(ctx, []string{"1"}); err == nil || !strings.Contains(err.Error(), "Socket timed out") {
		t.Errorf("squeue's own failure: %v", err)
	}
	if !Ended("TIMEOUT") || !Ended("NODE_FAIL") || Ended("COMPLETING") || Ended("PENDING") {
		t.Error("Ended misreads Slurm's states")
	}
}
