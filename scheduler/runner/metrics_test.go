package runner

import (
	"os"
	"testing"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler"
	"github.com/gpuq/gpuq/scheduler/schedtest"
)

// TestRunnersReadMetrics: what a trainer writes to GPUQ_METRICS_FILE reaches the engine
// through the runner, and an ended attempt's last readings once more.
func TestRunnersReadMetrics(t *testing.T) {
	r := NewDirect(Options{Dir: t.TempDir()})
	var _ scheduler.MetricReader = r
	l := launch(t, `echo '{{"step": 10, "loss": 2.5}}' >> "$GPUQ_METRICS_FILE"; read _; echo '{{"step": 20, "loss": 2}}' >> "$GPUQ_METRICS_FILE"`,
		[]string{"PATH=" + os.Getenv("PATH")})
	st, err := r.Start(l)
	if err != nil {
		t.Fatal(err)
	}
	var got []plans.Reading
	schedtest.WaitFor(t, "the trainer's first record", func() bool {
		got = r.Metrics(l.Attempt, false)
		return len(got) > 0
	})
	if len(got) != 1 || got[0] != (plans.Reading{Step: 10, Name: "loss", Value: 2.5}) {
		t.Errorf("while running: %+v", got)
	}
	r.mu.Lock()
	p := r.procs[l.Attempt.ID]
	r.mu.Unlock()
	p.Input().Write([]byte("\n"))
	exitOf(t, r)
	if got := r.Metrics(l.Attempt, true); len(got) != 1 || got[0].Step != 20 {
		t.Errorf("at its end: %+v (log %s)", got, st.Log)
	}
	if len(r.tails.m) != 0 {
		t.Errorf("an ended attempt's tail is kept: %v", r.tails.m)
	}
}
