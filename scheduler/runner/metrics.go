package runner

import (
	"sync"

	"github.com/gpuq/gpuq/launcher"
	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/state"
)

// tails are the running attempts' metrics as read so far, by attempt: a runner's
// attempts all live in its directory, whether it started them or took them up.
type tails struct {
	mu sync.Mutex
	m  map[string]*launcher.MetricsTail
}

// Metrics returns what the attempt's trainer has reported since the last call (see
// scheduler.MetricReader): its metrics file and what its output said, read from the
// attempt's directory; a daemon started again reads them from their start. An ended
// attempt's are read once more, and then forgotten.
func (b *base) Metrics(a *state.Attempt, ended bool) []plans.Reading {
	dir, err := b.attemptDir(a)
	if err != nil {
		return nil
	}
	b.tails.mu.Lock()
	t := b.tails.m[a.ID]
	switch {
	case t == nil && ended:
		// Read whole, as one that ended before a round read it.
		t = launcher.NewMetricsTail(dir)
	case t == nil:
		t = launcher.NewMetricsTail(dir)
		b.tails.m[a.ID] = t
	case ended:
		delete(b.tails.m, a.ID)
	}
	b.tails.mu.Unlock()
	return t.Read()
}
