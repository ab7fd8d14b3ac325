package scheduler

import (
	"strconv"
	"strings"
	"testing"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/gpu"
	"github.com/gpuq/gpuq/scheduler/state"
)

// TestALateSuccessWins: a worker given up for lost past its grace, its attempt's job
// queued again, comes back holding that attempt's success: the job has succeeded. A job
// still queued ends at once; one running again has that attempt stopped and ends
// succeeded once it has, whatever it ended as, stopped early included; the success is
// the job's only one, and the job's end is stamped. A late end that is not a success,
// or one for a job that has ended since (failed, stopped early), changes nothing.
func TestALateSuccessWins(t *testing.T) {
	for _, tt := range []struct {
		name string
		// again: the job started again before the success came; then: how that
		// attempt ends once stopped; early: it was being stopped early (early_stop)
		// as the success came.
		again, early bool
		then         plans.Outcome
		// since: how the job ended before the success came ("": it had not).
		since state.JobState
		late  plans.Outcome
		want  string
		stops int
	}{
		{name: "queued again", late: plans.Success, want: "succeeded 1:lost→success"},
		{name: "running again", again: true, then: plans.Cancelled, late: plans.Success, want: "succeeded 1:lost→success 2:cancelled", stops: 1},
		{name: "running again, out of memory as it is stopped", again: true, then: plans.GPUOOM, late: plans.Success,
			want: "succeeded 1:lost→success 2:gpu-oom", stops: 1},
		{name: "running again, stopped early as well", again: true, early: true, then: plans.Cancelled, late: plans.Success,
			want: "succeeded 1:lost→success 2:cancelled", stops: 1},
		{name: "a late failure", late: plans.Failed, want: "queued 1:lost"},
		{name: "failed since", again: true, since: state.JobFailed, late: plans.Success, want: "failed 1:lost 2:failed"},
		{name: "stopped early since", since: state.JobStopped, late: plans.Success, want: "stopped 1:lost"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cards := []gpu.Card{{Worker: "n1", Index: 0, Total: 24 * gib}}
			e, st, fr := clusterEngine(t, "name: l\ncommand: [train]\njobs: [{}]\nmemory: 10GiB\noom: {max_attempts: 1}\n", &fakeCluster{cards: &cards}, nil)
			round(t, e)
			e.apply(Exit{Attempt: "l.1/1", Outcome: plans.Lost, Requeue: true, Detail: "worker n1 has not been heard from"})
			if tt.again {
				cards = []gpu.Card{{Worker: "n2", Index: 0, Total: 24 * gib}}
				round(t, e)
				if len(fr.starts) != 2 {
					t.Fatalf("%d starts, want the job started again", len(fr.starts))
				}
			}
			if tt.early {
				a := *st.View().Attempt("l.1/2")
				a.StopReason = "stopped early at step 100: loss 2, worse than 2 of the 3 points that reached it"
				must(t, st.Put(state.Change{Attempts: []*state.Attempt{&a}}))
			}
			switch tt.since {
			case state.JobFailed:
				e.apply(Exit{Attempt: "l.1/2", Outcome: plans.Failed})
			case state.JobStopped:
				j := *st.View().Job("l.1")
				j.State, j.Reason = state.JobStopped, "not started: stopped early"
				must(t, e.put(state.Change{Jobs: []*state.Job{&j}}))
			}
			stops := 0
			fr.onStop = func(string) Exit { stops++; return Exit{Outcome: tt.then} }
			e.apply(Exit{Attempt: "l.1/1", Outcome: tt.late, Process: &plans.ProcessExit{Code: 0}})
			if stops > 0 {
				if j := st.View().Job("l.1"); j.State != state.JobRunning || !j.Ended.IsZero() {
					t.Errorf("the job is %s (ended %v) while the attempt that runs it again stops, want running: its card is not free yet", j.State, j.Ended)
				}
				applyStop(e)
			}
			if got := lateHistory(st, "l.1"); got != tt.want || stops != tt.stops {
				t.Errorf("got %q after %d stops, want %q after %d", got, stops, tt.want, tt.stops)
			}
			view := st.View()
			j := view.Job("l.1")
			if over := j.State != state.JobQueued && j.State != state.JobRunning; over == j.Ended.IsZero() {
				t.Errorf("the job is %s, ended %v: want its end stamped once it is over, and only then", j.State, j.Ended)
			}
			a := view.Attempt("l.1/1")
			if a.Outcome == plans.Success && (a.Exit == nil || a.Exit.Code != 0) {
				t.Errorf("the late success keeps no exit status: %+v", a.Exit)
			}
			// Counted as an end, beside the loss it was counted as before.
			var successes uint64
			for _, tl := range view.Tallies() {
				if tl.Outcome == plans.Success {
					successes += tl.N
				}
			}
			if want := map[bool]uint64{true: 1}[a.Outcome == plans.Success]; successes != want {
				t.Errorf("%d successes counted, want %d", successes, want)
			}
		})
	}
}

// lateHistory is a job's state and its attempts' outcomes, the first's marked where it
// was recorded lost and is a success now.
func lateHistory(st *state.Store, job string) string {
	view := st.View()
	parts := []string{string(view.Job(job).State)}
	for _, a := range view.Attempts(job) {
		out := string(a.Outcome)
		if a.N == 1 && a.Outcome == plans.Success {
			out = "lost→success"
		}
		parts = append(parts, strconv.Itoa(a.N)+":"+out)
	}
	return strings.Join(parts, " ")
}
