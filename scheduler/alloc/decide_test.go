package alloc

import (
	"slices"
	"testing"
	"time"

	"github.com/gpuq/gpuq/scheduler"
	"github.com/gpuq/gpuq/scheduler/state"
)

func TestDecide(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	queue := func(change func(q *state.AllocQueue)) *state.AllocQueue {
		q := &state.AllocQueue{ID: 1, GPUsPerNode: 4, Time: 8 * time.Hour, MaxAllocs: 3, IdleTimeout: 10 * time.Minute}
		if change != nil {
			change(q)
		}
		return q
	}
	queued := &state.Allocation{ID: "7", State: state.AllocQueued}
	starting := &state.Allocation{ID: "8", State: state.AllocRunning, Started: now.Add(-time.Minute)}
	late := &state.Allocation{ID: "9", State: state.AllocRunning, Started: now.Add(-StartGrace)}
	ended := &state.Allocation{ID: "6", State: state.AllocEnded}
	cards := func(n ...int) []scheduler.Need {
		out := make([]scheduler.Need, len(n))
		for i, c := range n {
			out[i] = scheduler.Need{Cards: c}
		}
		return out
	}
	ones := func(n int) []scheduler.Need { return cards(slices.Repeat([]int{1}, n)...) }
	workerless := func(id string) *state.Allocation {
		return &state.Allocation{ID: id, State: state.AllocEnded, Started: now.Add(-time.Hour)}
	}
	withdrawn := &state.Allocation{ID: "5", State: state.AllocEnded}
	served := &state.Allocation{ID: "4", State: state.AllocEnded, Started: now.Add(-time.Hour), Workers: 1}
	for _, tc := range []struct {
		name    string
		q       *state.AllocQueue
		allocs  []*state.Allocation
		waiting []scheduler.Need
		workers map[string]int
		idle    time.Time
		since   time.Time
		want    Decision
	}{
		{name: "nothing waits", q: queue(nil)},
		{name: "one job: one node", q: queue(nil), waiting: ones(1), want: Decision{Submit: 1}},
		{name: "a card for each job, four a node", q: queue(nil), waiting: ones(6), want: Decision{Submit: 2}},
		{name: "at most max-allocs", q: queue(nil), waiting: ones(40), want: Decision{Submit: 3}},
		{name: "ended allocations do not count", q: queue(nil), allocs: []*state.Allocation{ended}, waiting: ones(40), want: Decision{Submit: 3}},
		{name: "a queued allocation is coming", q: queue(nil), allocs: []*state.Allocation{queued}, waiting: ones(6), want: Decision{Submit: 1}},
		{name: "a started one whose workers have not connected yet is coming", q: queue(nil),
			allocs: []*state.Allocation{starting}, waiting: ones(4)},
		{name: "a started one with its workers is not", q: queue(nil), allocs: []*state.Allocation{starting},
			waiting: ones(4), workers: map[string]int{"8": 1}, want: Decision{Submit: 1}},
		{name: "nor one whose workers never came", q: queue(nil), allocs: []*state.Allocation{late},
			waiting: ones(4), want: Decision{Submit: 1}},
		{name: "but one whose workers may not have linked to a restarted daemon yet is", q: queue(nil),
			allocs: []*state.Allocation{late}, since: now.Add(-time.Minute), waiting: ones(4)},
		{name: "running ones count against max-allocs", q: queue(nil),
			allocs: []*state.Allocation{late, queued, starting}, waiting: ones(40)},
		{name: "jobs larger than a node wait for other queues", q: queue(nil), waiting: cards(8, 8, 2), want: Decision{Submit: 1}},
		{name: "gpus_per_job counts cards", q: queue(nil), waiting: cards(4, 4, 4), want: Decision{Submit: 3}},
		{name: "a job expected to end within the time limit", q: queue(nil), want: Decision{Submit: 1},
			waiting: []scheduler.Need{{Cards: 1, Duration: 8*time.Hour - DrainAhead}}},
		{name: "one expected to run longer is no work for it: its workers would not take it", q: queue(nil),
			waiting: []scheduler.Need{{Cards: 1, Duration: 8 * time.Hour}, {Cards: 1, Duration: 9 * time.Hour}}},
		{name: "a removed queue asks nothing", q: queue(func(q *state.AllocQueue) { q.Removed = true }), waiting: ones(4)},
		{name: "after a failure it pauses", waiting: ones(4),
			q: queue(func(q *state.AllocQueue) { q.Error, q.ErrorAt = "sbatch: error: x", now.Add(-RetryAfter/2) })},
		{name: "and tries again after RetryAfter", waiting: ones(4), want: Decision{Submit: 1},
			q: queue(func(q *state.AllocQueue) { q.Error, q.ErrorAt = "sbatch: error: x", now.Add(-RetryAfter) })},
		{name: "two allocations in a row without a worker", q: queue(nil), waiting: ones(1), want: Decision{Submit: 1},
			allocs: []*state.Allocation{served, workerless("1"), withdrawn, workerless("2")}},
		{name: "three: it stops asking", q: queue(nil), waiting: ones(1),
			allocs: []*state.Allocation{served, workerless("1"), workerless("2"), withdrawn, workerless("3")}},
		{name: "a worker since: it asks again", q: queue(nil), waiting: ones(1), want: Decision{Submit: 1},
			allocs: []*state.Allocation{workerless("1"), workerless("2"), workerless("3"), served}},
		{name: "a queued allocation stays while the queue is idle for less than the timeout", q: queue(nil),
			allocs: []*state.Allocation{queued, starting}, idle: now.Add(-9 * time.Minute)},
		{name: "and is withdrawn after", q: queue(nil), allocs: []*state.Allocation{queued, starting},
			idle: now.Add(-10 * time.Minute), want: Decision{Cancel: []string{"7"}}},
		{name: "work it cannot run is no work for it", q: queue(nil), allocs: []*state.Allocation{queued},
			waiting: cards(8), idle: now.Add(-time.Hour), want: Decision{Cancel: []string{"7"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Decide(Round{Queue: tc.q, Allocations: tc.allocs, Waiting: tc.waiting, Workers: tc.workers, Idle: tc.idle, Since: tc.since, Now: now})
			if got.Submit != tc.want.Submit || !slices.Equal(got.Cancel, tc.want.Cancel) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}
