package main

import (
	"errors"
	"fmt"
	"io"
	"maps"
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
	// read reads the jobs where no daemon runs, from the state its last one left (see
	// readClient): jobs that had all ended then need none to wait for.
	read  func() (daemonClient, error)
	sweep string
	json  bool
	poll  time.Duration
	// gone is how long a daemon that stops answering is waited for (see pollAgain), and
	// a gpuq run that is starting (see askFirst).
	gone time.Duration
	// starting reports whether a gpuq run of a sweep is starting (see askFirst).
	starting func(sweep string) bool
	// stopped reports the daemon that stopped last, and when (see api.Stopped): one
	// that stopped less than gone ago is waited for as one restarting (see afterStop).
	stopped func() (pid int, at time.Time, ok bool)
}

// daemonGone is how long gpuq wait waits for a daemon that stopped answering to answer
// again: one restarting (systemd's restart, an upgrade, a kill -9 and a new start)
// takes seconds, and loses nothing.
const daemonGone = 2 * time.Minute

func newWaitCmd(io ioStreams, st *settings) *cobra.Command {
	opts := &waitOptions{io: io, client: st.client, read: st.readClient, poll: 500 * time.Millisecond, gone: daemonGone, starting: st.runStarting,
		stopped: st.lastStopped}
	cmd := &cobra.Command{
		Use:   "wait [ID...|--sweep SWEEP]",
		Short: "Wait until jobs have ended; exit 0 if every one succeeded",
		Long: `Block until the named jobs, a sweep's jobs, or (with neither) every job the daemon
has now, have ended: succeeded, failed, been cancelled or stopped early. For scripts:

  gpuq submit sweep.yaml && gpuq wait --sweep gla-e1 && python3 collect.py

A daemon that stops answering meanwhile (restarting) is waited for, up to two minutes,
and so is a new one where the last stopped as the wait began or less than two minutes
before, by a signal (systemd's restart, an upgrade's), not by gpuq daemon --stop; jobs
that had all ended as it stopped are as they ended. Where no daemon runs, jobs that had all ended in the state its last one
left are as they ended there; a sweep's jobs whose gpuq run has ended (that neither a
daemon nor a run has now) are as that run left them.

Exit status: 0 every job succeeded (or was stopped early, its point losing), 1 some
failed or were cancelled (they are named), or no daemon runs for jobs that had not
ended, or none answered for two minutes, 2 an unknown job or sweep.`,
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
	ids = once(ids)
	req := api.StatesRequest{IDs: ids, Sweep: opts.sweep}
	// The jobs waited for, as they are now; then, every poll, those not ended yet
	// alone: the daemon is asked for the jobs waited for, never for all it has.
	c, waited, err := askFirst(opts, req)
	if err != nil {
		var none api.NoDaemonError
		var notRun noRunOf
		if (errors.As(err, &none) || errors.As(err, &notRun)) && opts.read != nil {
			r, w, allEnded, refused := endedInState(opts.read, req)
			switch {
			case refused != nil:
				err = refused // of a gpuq run that has ended, perhaps: read below
			case allEnded:
				return waitEnded(opts, historyOf(r, ids, opts.sweep, w), ids, w)
			}
		}
		if w, jobs, ok, refused := leftByRun(c, req, err, opts.io.Err); refused != nil {
			return refused
		} else if ok && !opts.runStarting(sweepWaited(req)) {
			return waitEnded(opts, func() ([]api.Job, error) { return jobs, nil }, ids, w)
		}
		if c, waited, err = afterStop(opts, req, err); err != nil {
			return err
		}
	}
	at := make(map[string]int, len(waited))
	for i, j := range waited {
		at[j.ID] = i
	}
	held := map[string]bool{}
	for left := waited; ; {
		var next, newlyHeld []string
		for _, j := range left {
			waited[at[j.ID]] = j
			if j.State == string(state.JobHeld) && !held[j.ID] {
				held[j.ID] = true
				newlyHeld = append(newlyHeld, j.ID)
			}
			if !ended(j.State) {
				next = append(next, j.ID)
			}
		}
		sayHeld(opts.io.Err, newlyHeld, opts.sweep)
		if len(next) == 0 {
			return waitEnded(opts, historyOf(c, ids, opts.sweep, waited), ids, waited)
		}
		time.Sleep(opts.poll)
		if c, left, err = pollAgain(opts, c, next); err != nil {
			return fmt.Errorf("while waiting: %w", err)
		}
	}
}

// endedInState reads the jobs waited for where no daemon runs, from the state its last
// one left (and the gpuq runs): ok where every job waited for had ended in it. A job or
// sweep that it does not have, nor anything else there, is refused (refused), as the
// daemon would refuse it: no daemon started would have it.
//
// It says that the jobs are read from the state (see readState) only where they are
// answered from it: of jobs that had not all ended there, the wait goes on or fails,
// and a word that they are as the last daemon left them would contradict it.
func endedInState(read func() (daemonClient, error), req api.StatesRequest) (r daemonClient, w []api.JobState, ok bool, refused error) {
	r, err := read()
	if err != nil {
		return nil, nil, false, nil
	}
	sr, quiet := stateFor(r, "")
	var note func()
	answered := false // by the state, not by a gpuq run alone
	if quiet {
		note, sr.read = sr.read, func() { answered = true }
	}
	w, err = r.States(req)
	if quiet {
		sr.read = note
	}
	var refusal scheduler.Refused
	switch {
	case errors.As(err, &refusal):
		return nil, nil, false, err
	case err != nil || len(w) == 0 || slices.ContainsFunc(w, func(j api.JobState) bool { return !ended(j.State) }):
		return nil, nil, false, nil
	}
	if answered && note != nil {
		note()
	}
	return r, w, true, nil
}

// afterStop waits for a daemon to answer for the jobs waited for (req) where none
// answered (err) because the last one stopped as the wait began, or less than gone
// before, and left them not all ended: it is waited for as one that restarts while
// the wait goes on would be (see throughRestart), for up to gone; a script's gpuq wait
// begun as systemd restarts the daemon, or an upgrade's script, must not fail at
// once. Where no daemon stopped so (none ran, one was killed, or a person stopped it
// with gpuq daemon --stop: see lastStopped), err is returned as it is, as the exit
// status says: no daemon runs for jobs that have not ended.
func afterStop(opts *waitOptions, req api.StatesRequest, err error) (daemonClient, []api.JobState, error) {
	var none api.NoDaemonError
	if !errors.As(err, &none) || opts.stopped == nil {
		return nil, nil, err
	}
	if _, at, ok := opts.stopped(); !ok || time.Since(at) > opts.gone {
		return nil, nil, err
	}
	var c daemonClient
	var waited []api.JobState
	err = throughRestart(opts.io.Err, opts.poll, opts.gone, func(bool) error {
		again, err := opts.client()
		if err == nil {
			c = again
			waited, err = c.States(req)
		}
		return err
	})
	return c, waited, err
}

// pollAgain asks for the states of the jobs not ended yet (next), riding through a
// daemon's restart (see throughRestart). It returns the client that answered.
//
// Once no daemon runs (the one asked has stopped and ended), the jobs are read from
// the state it left, once: where they had all ended there (they succeeded as it
// stopped; gpuq daemon --stop-trainers cancelled them), they are as they ended, and
// no daemon is waited for. Read at every poll, a large state would be read over and
// over for as long as none comes back.
func pollAgain(opts *waitOptions, c daemonClient, next []string) (daemonClient, []api.JobState, error) {
	var left []api.JobState
	looked := false // at the state the last daemon left
	err := throughRestart(opts.io.Err, opts.poll, opts.gone, func(anew bool) (err error) {
		if anew {
			again, err := opts.client()
			var none api.NoDaemonError
			if errors.As(err, &none) && !looked && opts.read != nil {
				looked = true
				if r, w, ok, _ := endedInState(opts.read, api.StatesRequest{IDs: next}); ok {
					c, left = r, w
					return errEndedInState // no daemon answers again
				}
			}
			if err != nil {
				return err
			}
			c = again
		}
		left, err = c.States(api.StatesRequest{IDs: next})
		return err
	})
	if errors.Is(err, errEndedInState) {
		err = nil
	}
	return c, left, err
}

// errEndedInState ends pollAgain's wait for a daemon where the jobs had all ended in
// the state the last one left: an answer, but none of a daemon's.
var errEndedInState = errors.New("the jobs had all ended in the state the last daemon left")

// throughRestart asks the daemon (ask) and, where it does not answer (it restarts),
// asks it again, anew, every poll, for up to gone, saying so on w: a wait in a script
// (gpuq wait && next-step) or a gpuq logs -f must not take a restart for a failure.
// What is not an unanswered call (a refusal) is returned at once.
func throughRestart(w io.Writer, poll, gone time.Duration, ask func(anew bool) error) error {
	err := ask(false)
	if err == nil || !api.Unanswered(err) {
		return err
	}
	// Said in words, as top says it: the error names the socket by the descriptor it
	// was dialled through and an HTTP URL, which say nothing to the user; it is given
	// whole if the daemon does not come back.
	fmt.Fprintf(w, "gpuq: the daemon does not answer (stopped, or restarting); waiting up to %s for it to come back\n", gone)
	for lost := time.Now(); time.Since(lost) < gone; {
		time.Sleep(poll)
		if err = ask(true); err == nil || !api.Unanswered(err) {
			if err == nil {
				fmt.Fprintln(w, "gpuq: the daemon answers again")
			}
			return err
		}
	}
	return fmt.Errorf("no daemon answered for %s: %w", gone, err)
}

// sayHeld says once of jobs waited for that they are held, and how they go on.
func sayHeld(w io.Writer, ids []string, sweep string) {
	switch {
	case len(ids) == 1:
		fmt.Fprintf(w, "gpuq: %s is held: it waits until gpuq release %s\n", ids[0], ids[0])
	case len(ids) > 1:
		release := "gpuq release ID..."
		if sweep != "" {
			release = "gpuq release --sweep " + sweep
		}
		fmt.Fprintf(w, "gpuq: %d jobs are held (%s): they wait until %s\n", len(ids), firstOf(ids, ", "), release)
	}
}

// once is ids, each once, in the order first named.
func once(ids []string) []string {
	seen := make(map[string]bool, len(ids))
	return slices.DeleteFunc(slices.Clone(ids), func(id string) bool {
		if seen[id] {
			return true
		}
		seen[id] = true
		return false
	})
}

func ended(st string) bool {
	switch state.JobState(st) {
	case state.JobSucceeded, state.JobFailed, state.JobCancelled, state.JobStopped:
		return true
	}
	return false
}

// runStarting reports whether a gpuq run of sweep is starting (see askFirst).
func (opts *waitOptions) runStarting(sweep string) bool {
	return opts.starting != nil && opts.starting(sweep)
}

// askFirst asks whoever runs the jobs waited for (req) for their states. While a gpuq
// run of their sweep is starting (it holds the sweep's name, and serves it not yet:
// see api.RunStarting) it asks again every poll, for up to gone: a script's gpuq run
// S.yaml & ...; gpuq wait --sweep S waits for that run, not for one of S that ended
// before. It returns the client that answered.
func askFirst(opts *waitOptions, req api.StatesRequest) (daemonClient, []api.JobState, error) {
	for began := time.Now(); ; time.Sleep(opts.poll) {
		c, err := opts.client()
		var waited []api.JobState
		if err == nil {
			waited, err = c.States(req)
		}
		if err == nil || time.Since(began) > opts.gone || !opts.runStarting(sweepWaited(req)) {
			return c, waited, err
		}
	}
}

// sweepWaited is the one sweep of the jobs waited for: req's sweep, or that of every
// job it names; "" where they are of several sweeps, or of every sweep.
func sweepWaited(req api.StatesRequest) string {
	sweep := req.Sweep
	for _, id := range req.IDs {
		if s := sweepOfJob(id); sweep == "" || s == sweep {
			sweep = s
		} else {
			return ""
		}
	}
	return sweep
}

// leftByRun is the jobs waited for (req) as the gpuq run of their sweep left them as
// it ended (see jobOrLeft), where err, the answer to req, says that the run has ended,
// or that a daemon that runs has no sweep of that name: the jobs' states (w), and the
// jobs themselves. So a script's gpuq run S.yaml & ...; gpuq wait --sweep S learns how
// they ended whether the run ended before the wait began or after. The jobs named must
// all be of that sweep (ok false otherwise); one that the run did not have is refused
// (exit 2).
func leftByRun(c daemonClient, req api.StatesRequest, err error, notices io.Writer) (w []api.JobState, jobs []api.Job, ok bool, refused error) {
	sweep := sweepWaited(req)
	if sweep == "" {
		return nil, nil, false, nil
	}
	var ended endedRunOf
	if !errors.As(err, &ended) || ended.sweep != sweep {
		if ended, ok = sweepOnlyLeft(c, sweep, err); !ok {
			return nil, nil, false, nil
		}
	}
	_, rec, at, ok := api.LastEnded(ended.dir, sweep, func(string, error) {})
	if !ok {
		return nil, nil, false, nil
	}
	jobs = rec.Jobs
	if len(req.IDs) > 0 {
		jobs = make([]api.Job, len(req.IDs))
		for i, id := range req.IDs {
			if jobs[i], err = api.EndedJob(rec.Jobs, id); err != nil {
				return nil, nil, false, err
			}
		}
	}
	w = make([]api.JobState, len(jobs))
	for i, j := range jobs {
		w[i] = api.JobState{ID: j.ID, State: j.State}
	}
	fmt.Fprintf(notices, "gpuq: the gpuq run of sweep %s ended at %s; its jobs are as it left them\n", sweep, at.Local().Format(time.DateTime))
	return w, jobs, true, nil
}

// historyOf fetches the jobs waited for with their histories from c, once they have
// ended (see waitedJobs).
func historyOf(c daemonClient, ids []string, sweep string, waited []api.JobState) func() ([]api.Job, error) {
	return func() ([]api.Job, error) { return waitedJobs(c, ids, sweep, waited) }
}

// waitEnded reports jobs that have all ended (waited; ids: those named, if any): with
// --json, each with its history, as history fetches them.
func waitEnded(opts *waitOptions, history func() ([]api.Job, error), ids []string, waited []api.JobState) error {
	if opts.json {
		jobs, err := history()
		if err != nil {
			return err
		}
		if err := writeJSON(opts.io.Out, api.JobsResponse{Jobs: jobs}); err != nil {
			return err
		}
	}
	var bad []api.JobState
	stopped := 0
	for _, j := range waited {
		switch j.State {
		case string(state.JobSucceeded):
		case string(state.JobStopped):
			stopped++
		default:
			bad = append(bad, j)
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w: %s", errNotAllSucceeded, notSucceeded(bad, opts.sweep, len(ids) > 0))
	}
	if !opts.json {
		fmt.Fprintf(opts.io.Out, "%s succeeded", plans.Count(len(waited)-stopped, "job"))
		if stopped > 0 {
			fmt.Fprintf(opts.io.Out, ", %d stopped early (their points were losing)", stopped)
		}
		fmt.Fprintln(opts.io.Out)
	}
	return nil
}

// notSucceeded names the jobs that ended otherwise than succeeded, "a.2 failed, a.3
// cancelled"; past namedAtMost of them, it counts them by state and says how to list
// them (a sweep of 100,000 failed jobs printed 2 MB of ids): those of a sweep, or of
// every job, or, where they were named, those named.
func notSucceeded(bad []api.JobState, sweep string, named bool) string {
	lines := make([]string, len(bad))
	counts := map[string]int{}
	for i, j := range bad {
		lines[i] = j.ID + " " + j.State
		counts[j.State]++
	}
	text := firstOf(lines, ", ")
	if len(bad) <= namedAtMost {
		return text
	}
	var states []string
	for _, st := range slices.Sorted(maps.Keys(counts)) {
		states = append(states, fmt.Sprintf("%d %s", counts[st], st))
	}
	list := "gpuq status --state " + strings.Join(slices.Sorted(maps.Keys(counts)), ",")
	switch {
	case sweep != "":
		list += " --sweep " + sweep
	case named:
		list = "gpuq wait --json with these ids" // gpuq status would list other jobs too
	}
	return fmt.Sprintf("%s (%s; %s lists them)", text, strings.Join(states, ", "), list)
}

// waitedJobs fetches the jobs waited for with their histories: those named one by
// one, a sweep's or every job's in one listing (less those submitted since the wait
// began).
func waitedJobs(c daemonClient, ids []string, sweep string, waited []api.JobState) ([]api.Job, error) {
	out := make([]api.Job, 0, len(waited))
	if len(ids) > 0 {
		for _, j := range waited {
			job, err := c.Job(j.ID)
			if err != nil {
				return nil, err
			}
			out = append(out, job)
		}
		return out, nil
	}
	all, err := c.Jobs(sweep, nil)
	if err != nil {
		return nil, err
	}
	was := make(map[string]bool, len(waited))
	for _, j := range waited {
		was[j.ID] = true
	}
	for _, j := range all {
		if was[j.ID] {
			out = append(out, j)
		}
	}
	return out, nil
}

// errNotAllSucceeded is returned when jobs waited for ended otherwise than succeeded.
var errNotAllSucceeded = errors.New("not every job succeeded")
