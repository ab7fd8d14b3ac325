package scheduler

import (
	"time"

	"github.com/gpuq/gpuq/scheduler/state"
)

// stampQueued notes, on each job of c that enters the queue (it was not queued, or
// was not in the store), when it does (now): the metrics' queue wait is measured from
// it, whichever daemon starts the job. c's jobs are the caller's copies.
func (e *Engine) stampQueued(c *state.Change, now time.Time) {
	view, read := state.View{}, false
	for _, j := range c.Jobs {
		if j.State != state.JobQueued {
			continue
		}
		if !read {
			view, read = e.store.Latest(), true
		}
		if was := view.Job(j.ID); was == nil || was.State != state.JobQueued {
			j.Queued = now
		}
	}
}
