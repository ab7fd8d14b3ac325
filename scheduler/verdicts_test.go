package scheduler

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/gpu"
	"github.com/gpuq/gpuq/scheduler/state"
)

// Verdicts a person can act on: why a job ended, in its attempt and its reason.

// loadOOM is an out-of-memory end while the trainer put its model on the card.
func loadOOM(used, tried int64) Exit {
	x := oom(used, tried)
	x.OOM.Loading = true
	return x
}

// TestMaxAttemptsFailsWhereItRan: a job out of attempts fails at the tier it ran at,
// and no event says it was requeued at a tier it will never run at.
func TestMaxAttemptsFailsWhereItRan(t *testing.T) {
	doc := strings.Replace(ladderSweep, "max_attempts: 8", "max_attempts: 2", 1)
	st, _, events := runEngine(t, doc, 1, 1, func(l Launch) Exit { return oom(4*gib, 30*gib) })
	j := st.View().Job("e.1")
	if j.State != state.JobFailed || j.Pos.Tier != 1 || !strings.Contains(j.Reason, "each of 2 attempts (oom.max_attempts), the last at tier 1") {
		t.Errorf("%s at tier %d: %s", j.State, j.Pos.Tier, j.Reason)
	}
	for _, ev := range events {
		if strings.Contains(ev.Message, "requeued at tier 2") {
			t.Errorf("event %s #%d %s: %s", ev.Job, ev.Attempt, ev.Kind, ev.Message)
		}
	}
	if n := len(events); n < 2 || events[n-2].Kind != string(plans.GPUOOM) || events[n-1].Kind != "failed" {
		t.Errorf("the last events: %v", kinds(events))
	}
	// Out of attempts on the last rung: the end of the ladder is the reason.
	doc = strings.Replace(ladderSweep, "max_attempts: 8", "max_attempts: 6", 1)
	st, _, _ = runEngine(t, doc, 1, 1, func(l Launch) Exit { return oom(4*gib, 30*gib) })
	if j := st.View().Job("e.1"); j.State != state.JobFailed || j.Attempts != 6 || !strings.Contains(j.Reason, "the last rung of its ladder") {
		t.Errorf("%s after %d attempts: %s", j.State, j.Attempts, j.Reason)
	}
}

// TestWeightsLargerThanEveryCardFailAtOnce: a job that ran out of memory putting its
// model on the card, needing more than any card holds, fails after that one attempt
// with the reason and what would help, as its shape's other jobs do without an attempt
// of their own: no rung of a ladder that changes the batch lowers the weights.
func TestWeightsLargerThanEveryCardFailAtOnce(t *testing.T) {
	doc := strings.Replace(ladderSweep, "jobs: [{}]", "matrix: {seed: [1, 2]}", 1)
	st, fr, events := runEngine(t, doc, 1, 1, func(l Launch) Exit { return loadOOM(22*gib, 8*gib) })
	if len(fr.starts) != 1 {
		t.Errorf("%d attempts, want 1", len(fr.starts))
	}
	for _, id := range []string{"e.1", "e.2"} {
		j := st.View().Job(id)
		if j.State != state.JobFailed || j.Pos.Tier != 0 || !strings.Contains(j.Reason, "before any batch: it needs at least 30.00 GiB there") ||
			!strings.Contains(j.Reason, "no rung of its ladder lowers that") {
			t.Errorf("%s: %s at tier %d: %s", id, j.State, j.Pos.Tier, j.Reason)
		}
	}
	for _, ev := range events {
		if ev.Kind == "requeued" || strings.Contains(ev.Message, "requeued") {
			t.Errorf("event %s %s: %s", ev.Job, ev.Kind, ev.Message)
		}
	}
}

// TestWeightsVerdictNeedsProof: without each part of the proof the job walks its
// ladder as before: an OOM whose traceback does not show the model being loaded, one
// that asks for no more than a card holds, a ladder with a rung that may lower the
// weights.
func TestWeightsVerdictNeedsProof(t *testing.T) {
	precision := strings.Replace(ladderSweep, "oom: {max_attempts: 8}",
		"oom: {max_attempts: 8, ladder: [{set: {gradient_checkpointing: true}}, {set: {precision: bf16}}]}", 1)
	precision = strings.Replace(precision, "num_data_workers: 8}", "num_data_workers: 8, precision: fp32}", 1)
	for _, tt := range []struct {
		name, doc string
		end       Exit
	}{
		{"not loading", ladderSweep, oom(22*gib, 8*gib)},
		{"fits a card", ladderSweep, loadOOM(12*gib, 4*gib)},
		{"a rung sets the precision", precision, loadOOM(22*gib, 8*gib)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st, fr, _ := runEngine(t, tt.doc, 1, 1, func(l Launch) Exit {
				if l.Attempt.N == 1 {
					return tt.end
				}
				return Exit{Outcome: plans.Success}
			})
			if j := st.View().Job("e.1"); j.State != state.JobSucceeded || len(fr.starts) != 2 {
				t.Errorf("%s after %d attempts: %s", j.State, len(fr.starts), j.Reason)
			}
		})
	}
}

// TestWeightsTooLargeOnAClusterWait: on a cluster, where a worker with a larger card
// may come, such a job waits at its tier.
func TestWeightsTooLargeOnAClusterWait(t *testing.T) {
	cards := []gpu.Card{{Worker: "n1", Index: 0, Total: 24 * gib}}
	e, st, fr := clusterEngine(t, "name: w\ncommand: [train]\nparams: {batch_size: 8}\nmemory: 10GiB\njobs: [{}]\n", &fakeCluster{cards: &cards}, nil)
	round(t, e)
	e.apply(Exit{Attempt: fr.starts[0].Attempt.ID, Outcome: plans.GPUOOM,
		OOM: &plans.OOMFacts{ProcessBytes: 22 * gib, TriedBytes: 8 * gib, TotalBytes: 24 * gib, Loading: true}})
	round(t, e)
	if j := st.View().Job("w.1"); j.State != state.JobQueued || j.Pos.Tier != 0 || len(fr.starts) != 1 {
		t.Errorf("%s at tier %d after %d attempts", j.State, j.Pos.Tier, len(fr.starts))
	}
	cards = append(cards, gpu.Card{Worker: "n2", Index: 0, Total: 80 * gib})
	round(t, e)
	if len(fr.starts) != 2 || fr.starts[1].Attempt.Worker != "n2" {
		t.Errorf("a worker with an 80 GiB card came: %d attempts", len(fr.starts))
	}
}

// TestAttemptKeepsHowItEnded: an attempt keeps its trainer's exit and command, and a
// job that failed says its error line.
func TestAttemptKeepsHowItEnded(t *testing.T) {
	argv := []string{"python3", "train.py", "--seed", "87"}
	st, _, events := runEngine(t, ladderSweep, 1, 1, func(l Launch) Exit {
		return Exit{Outcome: plans.Failed, Detail: "exited with status 1", Command: argv,
			Process: &plans.ProcessExit{Code: 1, Error: "ValueError: loss is NaN"}}
	})
	snap := st.View()
	a, j := snap.Attempt("e.1/1"), snap.Job("e.1")
	if a.Exit == nil || a.Exit.Code != 1 || a.Exit.Error != "ValueError: loss is NaN" || !slices.Equal(a.Command, argv) {
		t.Errorf("the attempt kept exit %+v, command %q", a.Exit, a.Command)
	}
	if want := "attempt 1 failed: exited with status 1: ValueError: loss is NaN"; j.Reason != want || events[len(events)-1].Message != want {
		t.Errorf("reason %q, last event %q; want %q", j.Reason, events[len(events)-1].Message, want)
	}
}

// TestJobKeepsWhenItEnded: a job that ends keeps when it did; one put back in the
// queue has not ended.
func TestJobKeepsWhenItEnded(t *testing.T) {
	cards := []gpu.Card{{Index: 0, Total: 24 * gib}}
	e, st, fr, _ := cardsEngine(t, threeJobs, &cards, nil, Config{})
	clock := e.clock.(*fakeClock)
	round(t, e)
	clock.mu.Lock()
	clock.now = clock.now.Add(time.Minute)
	clock.mu.Unlock()
	e.apply(Exit{Attempt: fr.starts[0].Attempt.ID, Outcome: plans.Failed, Detail: "exited with status 2"})
	if j := st.View().Job(fr.starts[0].Job.ID); !j.Ended.Equal(clock.Now()) {
		t.Errorf("a failed job ended at %v, want %v", j.Ended, clock.Now())
	}
	_, err := e.cancel(Selection{IDs: []string{"c.3"}})
	must(t, err)
	if j := st.View().Job("c.3"); j.State != state.JobCancelled || !j.Ended.Equal(clock.Now()) {
		t.Errorf("a job cancelled while queued: %s, ended %v", j.State, j.Ended)
	}
	_, err = e.retry(Selection{IDs: []string{"c.3"}})
	must(t, err)
	if j := st.View().Job("c.3"); j.State != state.JobQueued || !j.Ended.IsZero() {
		t.Errorf("a retried job: %s, ended %v", j.State, j.Ended)
	}
}
