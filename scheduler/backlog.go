package scheduler

import (
	"time"

	"github.com/gpuq/gpuq/scheduler/pack"
)

// Backlog is the queued work that no card there is can start now: the jobs the packer
// leaves waiting, with why. Held jobs, and jobs waiting for their shape's probe, are not
// in it: more cards would not start them. An allocator of machines (gpuq alloc) asks for
// workers while it is not empty.
type Backlog struct {
	Jobs    int
	Reasons map[pack.Reason]int
	// GPUsPerJob is the most cards one of the jobs needs, all on one machine.
	GPUsPerJob int
	// Needs are what each of the jobs needs of a machine, in queue order.
	Needs []Need
}

// Need is what a job of the backlog needs of a machine that would start it.
type Need struct {
	Cards int // on one machine
	// Duration is how long the job is expected to run (Request.Duration): a machine
	// with less time left would not take it. 0: unknown.
	Duration time.Duration
}

// backlog says what the queue holds that no card can start now.
func (e *Engine) backlog() (Backlog, error) {
	view := e.store.View()
	v, err := e.packView(view, e.runningNow(), nil)
	if err != nil {
		return Backlog{}, err
	}
	queue := e.queue(v, nil)
	need := make(map[string]Need, len(queue))
	for _, r := range queue {
		need[r.Job] = Need{Cards: max(r.GPUsPerJob, 1), Duration: r.Duration}
	}
	b := Backlog{Reasons: map[pack.Reason]int{}}
	for w := range pack.Pack(queue, v.cards, v.hosts).Waiting.All() {
		b.Jobs++
		b.Reasons[w.Reason]++
		b.GPUsPerJob = max(b.GPUsPerJob, need[w.Job].Cards)
		b.Needs = append(b.Needs, need[w.Job])
	}
	return b, nil
}
