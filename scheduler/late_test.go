package scheduler

import (
	"strconv"
	"strings"
	"testing"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/gpu"
)

// TestALateSuccessWins: a worker given up for lost past its grace, its attempt's job
// queued again, comes back holding that attempt's success: the job has succeeded. A job
// still queued ends at once; one running again has that attempt stopped and ends
// succeeded once it has, whatever it ended as; the success is the job's only one.
// A late end that is not a success, or one for a job that has ended since, changes
// nothing.
func TestALateSuccessWins(t *testing.T) {
	for _, tt := range []struct {
		name string
		// again: the job started again before the success came; then: how that
		// attempt ends once stopped.
		again bool
		then  plans.Outcome
		late  plans.Outcome
		want  string
		stops int
	}{
		{name: "queued again", late: plans.Success, want: "succeeded 1:lost→success"},
		{name: "running again", again: true, then: plans.Cancelled, late: plans.Success, want: "succeeded 1:lost→success 2:cancelled", stops: 1},
		{name: "running again, out of memory as it is stopped", again: true, then: plans.GPUOOM, late: plans.Success,
			want: "succeeded 1:lost→success 2:gpu-oom", stops: 1},
		{name: "a late failure", late: plans.Failed, want: "queued 1:lost"},
		{name: "ended since", again: true, then: plans.Failed, late: plans.Success, want: "failed 1:lost 2:failed"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cards := []gpu.Card{{Worker: "n1", Index: 0, Total: 24 * gib}}
			e, st, fr := clusterEngine(t, "name: l\ncommand: [train]\njobs: [{}]\nmemory: 10GiB\noom: {max_attempts: 1}\n", &fakeCluster{cards: &cards}, nil)
			round(t, e)
			e.Apply(Exit{Attempt: "l.1/1", Outcome: plans.Lost, Requeue: true, Detail: "worker n1 has not been heard from"})
			if tt.again {
				cards = []gpu.Card{{Worker: "n2", Index: 0, Total: 24 * gib}}
				round(t, e)
				if len(fr.starts) != 2 {
					t.Fatalf("%d starts, want the job started again", len(fr.starts))
				}
			}
			stops := 0
			fr.onStop = func(string) Exit { stops++; return Exit{Outcome: tt.then} }
			if tt.name == "ended since" {
				e.Apply(Exit{Attempt: "l.1/2", Outcome: plans.Failed})
			}
			e.Apply(Exit{Attempt: "l.1/1", Outcome: tt.late})
			if stops > 0 {
				if j := st.Snapshot().Job("l.1"); j.State != JobRunning {
					t.Errorf("the job is %s while the attempt that runs it again stops, want running: its card is not free yet", j.State)
				}
				applyStop(e)
			}
			if got := lateHistory(st, "l.1"); got != tt.want || stops != tt.stops {
				t.Errorf("got %q after %d stops, want %q after %d", got, stops, tt.want, tt.stops)
			}
		})
	}
}

// lateHistory is a job's state and its attempts' outcomes, the first's marked where it
// was recorded lost and is a success now.
func lateHistory(st *Store, job string) string {
	snap := st.Snapshot()
	parts := []string{string(snap.Job(job).State)}
	for _, a := range snap.Attempts(job) {
		out := string(a.Outcome)
		if a.N == 1 && a.Outcome == plans.Success {
			out = "lost→success"
		}
		parts = append(parts, strconv.Itoa(a.N)+":"+out)
	}
	return strings.Join(parts, " ")
}
