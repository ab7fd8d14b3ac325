package main

import (
	"fmt"
	"time"

	"github.com/gpuq/gpuq/scheduler/daemon/api"
)

// sweepRead is a sweep by name as gpuq results and report read it, and where from.
type sweepRead struct {
	sum api.SweepSummary
	// from names, for people, what it was read from: "the daemon on ~/.local/state/gpuq".
	from string
	// live: read from what runs it now, whose running attempts go on to now.
	live bool
}

// readSweep reads a sweep by name for gpuq results and report (verb): from the gpuq
// run that runs it, or the daemon (where none runs, the state its last one left), and
// where neither has it, from what the gpuq run of it that ended last left as it ended
// (see api.Run.Record), saying so on stderr. A researcher who ran gpuq run in a
// terminal asks for what it found in another, as it runs and after.
func (s *settings) readSweep(verb, sweep string) (sweepRead, error) {
	c, err := s.readClient()
	var jobs []api.Job
	if err == nil {
		jobs, err = c.Jobs(sweep, nil)
	}
	if err == nil {
		return s.answered(c, sweep, jobs), nil
	}
	if !s.remote() {
		if dir, derr := s.stateDir(); derr == nil {
			damaged := func(path string, err error) {
				fmt.Fprintf(s.notices, "gpuq: warning: %s cannot be read (%v): passed over for an earlier run's, if any\n", tildeHome(path), err)
			}
			if run, rec, ended, ok := api.LastEnded(dir, sweep, damaged); ok {
				from := fmt.Sprintf("the gpuq run of %s (pid %d) that ended %s", sweep, run.PID, ended.Format(time.DateTime))
				fmt.Fprintf(s.notices, "gpuq: %s is read from what %s left in %s\n", sweep, from, tildeHome(api.RunsDir(dir)))
				sum := summaryOf(sweep, rec.Jobs)
				sum.GPUs = rec.GPUs // none in an older gpuq's record: each card is sized by what was reserved on it
				return sweepRead{sum: sum, from: from}, nil
			}
		}
	}
	return sweepRead{}, sweepNowhere(verb, sweep, err)
}

// answered is a sweep's jobs as c answered them, with the cards of whoever runs it: a
// gpuq run's, or the daemon's and its workers' linked now, or those the last daemon
// read as it started (where it recorded none, or they cannot be asked, the report
// sizes each card's chart by what was reserved on it).
func (s *settings) answered(c daemonClient, sweep string, jobs []api.Job) sweepRead {
	if r, ok := c.(*routed); ok {
		if to, err := r.to(sweep); err == nil {
			c = to
		}
	}
	read := sweepRead{sum: summaryOf(sweep, jobs), live: true}
	switch c := c.(type) {
	case *stateReader:
		read.sum.GPUs = api.LastCards(c.none.Dir)
		read.from, read.live = "the state on "+tildeHome(c.none.Dir)+" (no daemon runs)", false
	case *api.Client:
		if info, err := c.Info(); err == nil {
			read.sum.GPUs = info.GPUs
		}
		if run := c.Run(); run != nil {
			read.from = fmt.Sprintf("the gpuq run of %s (pid %d)", run.Sweep, run.PID)
		} else {
			read.from = "the daemon on " + tildeHome(c.Dir())
			// And its workers' cards, that jobs ran on too.
			if ws, err := c.Workers(); err == nil {
				for _, w := range ws {
					read.sum.GPUs = append(read.sum.GPUs, w.GPUs...)
				}
			}
		}
	}
	return read
}

// summaryOf is a sweep's jobs as a summary.
func summaryOf(sweep string, jobs []api.Job) api.SweepSummary {
	sum := api.SweepSummary{Sweep: sweep}
	for _, j := range jobs {
		sum.Jobs = append(sum.Jobs, j.JobSummary)
	}
	return sum
}
