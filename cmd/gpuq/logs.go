package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuq/gpuq/launcher"
	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/state"
)

type logsOptions struct {
	io     ioStreams
	client func() (daemonClient, error)
	// remote reports whether the daemon's files are elsewhere (--server), its attempts'
	// logs among them.
	remote func() bool
	// poll is how often -f asks the daemon whether the next attempt has started;
	// gone how long it waits for a daemon that stops answering (see throughRestart).
	poll, gone time.Duration
	follow     bool
	attempt    int
	tail       int
	// sweep and where find the job by its point instead of its id.
	sweep, where string
	// bind makes the context of runLogs the one that its waits for a daemon that starts
	// or stops end with (see settings.bind); nil in tests of their own.
	bind func(context.Context) func()
}

func newLogsCmd(io ioStreams, st *settings) *cobra.Command {
	opts := &logsOptions{io: io, client: st.readClient, remote: st.remote, poll: 200 * time.Millisecond, gone: daemonGone, bind: st.bind}
	cmd := &cobra.Command{
		Use:   "logs ID|--where KEY=VALUE,...",
		Short: "Print a job's log: its latest attempt, or another with --attempt",
		Long: `Print the log of a job's attempt: by default its latest. A log begins with the command
and environment to rerun the attempt by hand. The logs are files under the state
directory; gpuq status ID names them.

-f follows the job until it ends: its running attempt, then each attempt that starts
after it (the next rung after an OOM, a retry), waiting for one that has not started
yet; what happens between attempts is said on stderr, and a daemon that restarts
meanwhile is waited for (one reached with --server, up to two minutes). With
--attempt N, -f follows that attempt alone. Where no daemon runs, the logs are read
all the same (-f follows the latest attempt to its end: no next one starts without a
daemon).

--where finds the job by its parameters instead of its id (of one sweep, with
--sweep): it must select one job.`,
		Example: `  gpuq logs gla-e1.3
  gpuq logs gla-e1.3 -f
  gpuq logs gla-e1.3 --attempt 1 --tail 50
  gpuq logs --sweep gla-e1 --where task=glue-sst2,seed=87`,
		Args:              maxArgs(1),
		ValidArgsFunction: completeJobs(st),
		RunE: func(_ *cobra.Command, args []string) error {
			id, err := logsJob(opts, args)
			if err != nil {
				return err
			}
			return runLogs(opts, id)
		},
	}
	cmd.Flags().StringVar(&opts.sweep, "sweep", "", "with --where, a job of this sweep")
	cmd.Flags().StringVar(&opts.where, "where", "", "the job whose parameters have these values: "+whereSyntax)
	cmd.Flags().BoolVarP(&opts.follow, "follow", "f", false, "follow the job until it ends: its running attempt, then each one after it (with --attempt, that one alone)")
	cmd.Flags().IntVar(&opts.attempt, "attempt", 0, "which attempt (1 is the first; default the latest)")
	cmd.Flags().IntVar(&opts.tail, "tail", 0, "print only the last N lines (0: all)")
	return cmd
}

func runLogs(opts *logsOptions, id string) error {
	if opts.attempt < 0 || opts.tail < 0 {
		return badInput("--attempt and --tail take positive numbers")
	}
	defer catchBrokenPipe()()
	// Ctrl-C ends gpuq logs (-f above all) as it ends tail -f, but with the terminal
	// given back as the trainer's output may have left it (see printLog), which a gpuq
	// killed by the signal does not do. A second Ctrl-C, where the first has not ended
	// it yet (a terminal that takes no output: Ctrl-S), kills it as before.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	context.AfterFunc(ctx, stop)
	ctx, readerGone := context.WithCancelCause(ctx)
	defer readerGone(nil)
	defer whenReaderGone(opts.io.Out, func() { readerGone(errOutputGone) })()
	if opts.bind != nil {
		// A daemon that stops, or starts, as the job is asked of it is waited for: the
		// first Ctrl-C ends that wait too.
		defer opts.bind(ctx)()
	}
	err := logs(ctx, opts, id)
	switch {
	case errors.Is(context.Cause(ctx), errOutputGone), errors.Is(err, errOutputGone):
		return errOutputGone
	case ctx.Err() != nil:
		return errStoppedWatching
	}
	return err
}

// logs prints a job's log as runLogs is asked to, until ctx ends.
func logs(ctx context.Context, opts *logsOptions, id string) error {
	c, err := opts.client()
	if err != nil {
		return err
	}
	j, left, err := jobOrLeft(c, id, opts.io.Err)
	if err != nil {
		return err
	}
	if opts.follow && opts.attempt == 0 && !left && !offline(c, j.Sweep) {
		return followJob(ctx, opts, j, servingRun(c, j.Sweep))
	}
	if len(j.Attempts) == 0 {
		return notStarted(j)
	}
	n := opts.attempt
	if n == 0 {
		n = len(j.Attempts)
	}
	if n > len(j.Attempts) {
		return badInput("%s has %s; --attempt %d does not exist", id, plans.Count(len(j.Attempts), "attempt"), n)
	}
	return printLog(ctx, opts, j, n)
}

// logsJob is the job gpuq logs prints: the one named, or the one --where selects.
func logsJob(opts *logsOptions, args []string) (string, error) {
	switch {
	case len(args) == 1 && opts.where == "" && opts.sweep == "":
		return args[0], nil
	case len(args) == 1:
		return "", badInput("name a job or give --where, not both; see gpuq logs --help")
	case opts.where == "":
		return "", badInput("name a job (gpuq logs ID), or find it by its parameters (--where task=sst2,seed=87)")
	}
	c, err := opts.client()
	if err != nil {
		return "", err
	}
	jobs, err := c.Jobs(opts.sweep, nil)
	if err != nil {
		return "", err
	}
	if jobs, err = where(jobs, opts.where); err != nil {
		return "", err
	}
	switch len(jobs) {
	case 1:
		return jobs[0].ID, nil
	case 0:
		return "", badInput("no job %s; gpuq status lists them", selectionText(opts.sweep, opts.where))
	}
	named := make([]string, len(jobs))
	var sweeps []string
	for i, j := range jobs {
		named[i] = j.ID + " (" + j.Name + ")"
		if !slices.Contains(sweeps, j.Sweep) {
			sweeps = append(sweeps, j.Sweep)
		}
	}
	more := "give --where more keys"
	if len(sweeps) > 1 {
		more = fmt.Sprintf("give --sweep (they are of %s) or --where more keys", strings.Join(sweeps, ", "))
	}
	return "", badInput("%d jobs %s: %s; name one, or %s", len(jobs), selectionText(opts.sweep, opts.where), strings.Join(named, ", "), more)
}

// followJob follows a job's attempts, each to its end, until the job ends: the latest,
// or, when the job waits to run again, the next. run is the gpuq run whose job it is
// (nil: the daemon's), which once ended says how it left the job (see waitForAttempt).
func followJob(ctx context.Context, opts *logsOptions, j api.Job, run *api.Run) error {
	n := len(j.Attempts)
	if over := n > 0 && j.Attempts[n-1].Outcome != ""; n == 0 || over && !ended(j.State) {
		if over {
			fmt.Fprintf(opts.io.Err, "gpuq: attempt %d of %s ended %s (gpuq logs %s --attempt %d prints it)\n", n, j.ID, j.Attempts[n-1].Outcome, j.ID, n)
		}
		n++
		fmt.Fprintf(opts.io.Err, "gpuq: %s %s; waiting for attempt %d to start (gpuq why %s says why it waits)\n", j.ID, state.JobState(j.State).Told(), n, j.ID)
	}
	for {
		var err error
		if j, err = waitForAttempt(ctx, opts, j.ID, n, run); err != nil {
			return err
		}
		if len(j.Attempts) < n {
			return fmt.Errorf("%s %s without starting attempt %d", j.ID, state.JobState(j.State).Told(), n)
		}
		if err := printLog(ctx, opts, j, n); err != nil {
			return err
		}
		if j, err = waitForAttempt(ctx, opts, j.ID, n+1, run); err != nil || len(j.Attempts) <= n {
			return err // the job has ended
		}
		fmt.Fprintf(opts.io.Err, "gpuq: attempt %d of %s ended %s; following attempt %d\n", n, j.ID, j.Attempts[n-1].Outcome, n+1)
		n++
	}
}

// printLog prints attempt n of a job's log, and with -f follows it to its end, or until
// ctx ends. On a terminal, what the trainer left set there is undone after it (see
// tidyTerminal).
func printLog(ctx context.Context, opts *logsOptions, j api.Job, n int) error {
	defer tidyTerminal(opts.io.Out)
	out := shownOutput{ctx, opts.io.Out}
	a := j.Attempts[n-1]
	if a.Log == "" {
		return scheduler.Refused(fmt.Sprintf("attempt %d of %s has no log: it never started", n, j.ID))
	}
	if a.Worker != "" || opts.remote() {
		return streamLog(ctx, opts, out, api.StreamRequest{Attempt: api.AttemptRef{Job: j.ID, N: n}, Kind: api.StreamLog,
			Tail: opts.tail, Follow: opts.follow && a.Outcome == ""})
	}
	f, err := os.Open(a.Log)
	if err != nil {
		return err
	}
	defer f.Close()
	if opts.tail > 0 {
		if err := launcher.SeekLastLines(f, opts.tail); err != nil {
			return err
		}
	}
	if _, err := io.Copy(out, f); err != nil {
		return err
	}
	if !opts.follow || a.Outcome != "" {
		return nil
	}
	return launcher.FollowLog(ctx, f, filepath.Dir(a.Log), out)
}

// streamLog prints an attempt's log that is not here to read (on a worker, or on the
// daemon's machine for a remote client) through the daemon, on out, until ctx ends.
func streamLog(ctx context.Context, opts *logsOptions, out io.Writer, req api.StreamRequest) error {
	c, err := opts.client()
	if err != nil {
		return err
	}
	s, err := c.Attempt(req)
	if err != nil {
		return err
	}
	defer s.Close()
	defer context.AfterFunc(ctx, func() { s.Close() })()
	_, err = io.Copy(out, s)
	return err
}

// servingRun is the gpuq run that c reaches for a sweep; nil where the daemon runs it.
func servingRun(c daemonClient, sweep string) *api.Run {
	switch c := c.(type) {
	case *routed:
		for _, rs := range c.runs {
			if rs.run.Sweep == sweep {
				return &rs.run
			}
		}
	case *api.Client:
		return c.Run()
	}
	return nil
}

// endedRun is the jobs a gpuq run left as it ended; false while it runs, or where
// there is no run (nil) or it left none.
func endedRun(run *api.Run) ([]api.Job, bool) {
	if run == nil {
		return nil, false
	}
	return run.Ended()
}

// notStarted refuses the log or terminal of a job with no attempt; a waiting one says
// how to wait for it.
func notStarted(j api.Job) error {
	st := state.JobState(j.State)
	if st == state.JobQueued || st == state.JobHeld || st == state.JobBlocked {
		return scheduler.Refused(fmt.Sprintf("%s has not started: it %s (gpuq why %s says why); gpuq logs -f %s waits for it to start", j.ID, st.Told(), j.ID, j.ID))
	}
	return scheduler.Refused(fmt.Sprintf("%s never started: it %s", j.ID, st.Told()))
}

// waitForAttempt polls the daemon until a job's attempt n has started, or the job has
// ended (with fewer attempts, when n never started), or ctx has. A job of a gpuq run
// (run) that has ended since is as the run left it; a daemon that restarts is waited
// for (a run that ended comes back as no daemon does).
func waitForAttempt(ctx context.Context, opts *logsOptions, id string, n int, run *api.Run) (api.Job, error) {
	for {
		var j api.Job
		ask := func(bool) (err error) {
			if ctx.Err() != nil {
				return ctx.Err() // no answer, which throughRestart would wait out
			}
			if j, err = fetchJob(opts.client, id); err != nil { // the run's record is read only once it no longer answers
				if jobs, ended := endedRun(run); ended {
					j, err = api.EndedJob(jobs, id)
				}
			}
			return err
		}
		var err error
		if run != nil {
			err = ask(false)
		} else {
			err = throughRestart(opts.io.Err, opts.poll, opts.gone, ask)
		}
		switch {
		case err != nil:
			return j, err
		case len(j.Attempts) >= n && j.Attempts[n-1].Log != "":
			return j, nil
		case ended(j.State):
			return j, nil
		}
		select {
		case <-ctx.Done():
			return j, ctx.Err()
		case <-time.After(opts.poll):
		}
	}
}
