package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/state"
)

type waitOptions struct {
	io     ioStreams
	client func() (daemonClient, error)
	sweep  string
	json   bool
	poll   time.Duration
}

func newWaitCmd(io ioStreams, st *settings) *cobra.Command {
	opts := &waitOptions{io: io, client: st.client, poll: 500 * time.Millisecond}
	cmd := &cobra.Command{
		Use:   "wait [ID...|--sweep SWEEP]",
		Short: "Wait until jobs have ended; exit 0 if every one succeeded",
		Long: `Block until the named jobs, a sweep's jobs, or (with neither) every job the daemon
has now, have ended: succeeded, failed, been cancelled or stopped early. For scripts:

  gpuq submit sweep.yaml && gpuq wait --sweep gla-e1 && python3 collect.py

Exit status: 0 every job succeeded (or was stopped early, its point losing), 1 some
failed or were cancelled (they are named), 2 an unknown job or sweep.`,
		Example: `  gpuq wait --sweep gla-e1
  gpuq wait gla-e1.3 gla-e1.4`,
		ValidArgsFunction: completeJobs(st),
		RunE:              func(_ *cobra.Command, ids []string) error { return runWait(opts, ids) },
	}
	cmd.Flags().StringVar(&opts.sweep, "sweep", "", "every job of this sweep")
	cmd.Flags().BoolVar(&opts.json, "json", false, `print {"jobs":[...]} once they have ended`)
	return cmd
}

func runWait(opts *waitOptions, ids []string) error {
	if len(ids) > 0 && opts.sweep != "" {
		return badInput("name jobs or give --sweep, not both; see gpuq wait --help")
	}
	c, err := opts.client()
	if err != nil {
		return err
	}
	if len(ids) == 0 {
		jobs, err := c.Jobs(opts.sweep, nil)
		if err != nil {
			return err
		}
		for _, j := range jobs {
			ids = append(ids, j.ID)
		}
	}
	held := map[string]bool{}
	for {
		jobs, err := waitedJobs(c, ids)
		if err != nil {
			return err
		}
		done := true
		for _, j := range jobs {
			if j.State == string(state.JobHeld) && !held[j.ID] {
				held[j.ID] = true
				fmt.Fprintf(opts.io.Err, "gpuq: %s is held: it waits until gpuq release %s\n", j.ID, j.ID)
			}
			done = done && ended(j.State)
		}
		if done {
			return waitEnded(opts, jobs)
		}
		time.Sleep(opts.poll)
	}
}

// waitedJobs fetches the jobs waited for, from one listing of the daemon's.
func waitedJobs(c daemonClient, ids []string) ([]api.Job, error) {
	all, err := c.Jobs("", nil)
	if err != nil {
		return nil, fmt.Errorf("while waiting: %w", err)
	}
	out := make([]api.Job, 0, len(ids))
	for _, id := range ids {
		i := slices.IndexFunc(all, func(j api.Job) bool { return j.ID == id })
		if i < 0 {
			known := make([]string, len(all))
			for k, j := range all {
				known[k] = j.ID
			}
			return nil, scheduler.NoJob(id, known)
		}
		out = append(out, all[i])
	}
	return out, nil
}

func ended(st string) bool {
	switch state.JobState(st) {
	case state.JobSucceeded, state.JobFailed, state.JobCancelled, state.JobStopped:
		return true
	}
	return false
}

// waitEnded reports jobs that have all ended.
func waitEnded(opts *waitOptions, jobs []api.Job) error {
	if opts.json {
		if err := writeJSON(opts.io.Out, api.JobsResponse{Jobs: jobs}); err != nil {
			return err
		}
	}
	var bad []string
	stopped := 0
	for _, j := range jobs {
		switch j.State {
		case string(state.JobSucceeded):
		case string(state.JobStopped):
			stopped++
		default:
			bad = append(bad, j.ID+" "+j.State)
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w: %s", errNotAllSucceeded, strings.Join(bad, ", "))
	}
	if !opts.json {
		fmt.Fprintf(opts.io.Out, "%s succeeded", plans.Count(len(jobs)-stopped, "job"))
		if stopped > 0 {
			fmt.Fprintf(opts.io.Out, ", %d stopped early (their points were losing)", stopped)
		}
		fmt.Fprintln(opts.io.Out)
	}
	return nil
}

// errNotAllSucceeded is returned when jobs waited for ended otherwise than succeeded.
var errNotAllSucceeded = errors.New("not every job succeeded")
