package alloc

import (
	"strings"
	"testing"
	"time"

	"github.com/gpuq/gpuq/scheduler/schedtest"
	"github.com/gpuq/gpuq/scheduler/state"
)

func TestScript(t *testing.T) {
	q := &state.AllocQueue{ID: 3, GPUsPerNode: 4, Time: 8*time.Hour + 30*time.Minute, MaxAllocs: 2, IdleTimeout: 10 * time.Minute,
		Args: []string{"--partition", "gpu", "--exclusive", "--comment=it's mine", "-A", "proj x"}}
	s := Script{Queue: q, Log: "/home/u/.local/state/gpuq/allocs/slurm-%j.log",
		Worker: []string{"/home/u/bin/gpuq", "worker", "--server", "login1:7070", "--idle-timeout", "10m"}}
	schedtest.Golden(t, "script.sh", s.String())
}

func TestSlurmDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		time.Minute:                           "0:01:00",
		8 * time.Hour:                         "8:00:00",
		90*time.Minute + 500*time.Millisecond: "1:30:01",
		49*time.Hour + 5*time.Second:          "2-01:00:05",
	} {
		if got := slurmDuration(d); got != want {
			t.Errorf("slurmDuration(%s) = %s, want %s", d, got, want)
		}
	}
}

// TestAnOptionKeepsToItsLine: a line break in an sbatch option would end its #SBATCH
// line, and what follows would run as a command of the batch script: such an option is
// refused. Whatever else it holds is quoted, and taken.
func TestAnOptionKeepsToItsLine(t *testing.T) {
	for _, tt := range []struct {
		arg string
		ok  bool
	}{
		{"--comment=x\ntouch ~/pwned #", false},
		{"--comment=x\rtouch ~/pwned", false},
		{"--comment=x\x00y", false},
		{"--comment=it's $(touch ~/pwned) `id` ; # \\ \"", true},
	} {
		q := &state.AllocQueue{GPUsPerNode: 1, Time: time.Hour, MaxAllocs: 1, IdleTimeout: time.Minute, Args: []string{tt.arg}}
		err := Check(q)
		if tt.ok != (err == nil) || err != nil && !strings.Contains(err.Error(), "one option a line") {
			t.Errorf("%q: %v", tt.arg, err)
		}
		if err == nil {
			if s := (Script{Queue: q, Log: "/l"}).String(); strings.Count(s, "\n") != 10 {
				t.Errorf("%q takes more than its line:\n%s", tt.arg, s)
			}
		}
	}
}
