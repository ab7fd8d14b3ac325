package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
)

type cleanOptions struct {
	io        ioStreams
	settings  *settings
	sweep     string
	olderThan string
	all       bool
	logs      bool
	json      bool
}

func newCleanCmd(io ioStreams, st *settings) *cobra.Command {
	opts := &cleanOptions{io: io, settings: st}
	cmd := &cobra.Command{
		Use:   "clean --sweep SWEEP | --older-than AGE | --all",
		Short: "Forget sweeps whose jobs have all ended, so their names can be used again",
		Long: `Forget the daemon's sweeps whose jobs have all ended (succeeded, failed, cancelled
or stopped early): the one --sweep names, those whose last job ended longer ago than
--older-than (such as 7d or 12h), or with --all every one. Without any of them it
forgets nothing, and says how to name what to forget. A forgotten sweep's name can be
submitted again, and gpuq status no longer lists its jobs.

Their logs are kept, moved to cleaned/<time>/ in the state directory, unless --logs
is given: then they are removed. A verb that names a job or sweep forgotten so says
where its logs went.

What each gpuq run that has ended left of its sweep (the jobs as they ended, which
gpuq results and report read by the sweep's name) is forgotten alike: the sweep
--sweep names, those whose run ended longer ago than --older-than, or every sweep.
This needs no daemon. A run's logs stay where it kept them (its --log-dir). With no
daemon, --sweep names a sweep to clean only where a gpuq run of it left its jobs, or
the state the last daemon left holds it (a daemon must run to forget that).

With no daemon, the sweeps the last daemon left (which gpuq status still lists) are
not forgotten: where its state holds what was asked, clean forgets the runs' records
all the same, says that those sweeps are not forgotten, and exits 1, whether or not
there was a record to forget. Start a daemon (gpuq daemon) and clean again.`,
		Example: `  gpuq clean --sweep gla-e1
  gpuq clean --older-than 7d --logs
  gpuq clean --all`,
		Args: noArgs,
		RunE: func(*cobra.Command, []string) error { return runClean(opts) },
	}
	cmd.Flags().StringVar(&opts.sweep, "sweep", "", "only this sweep (it must have ended)")
	cmd.Flags().StringVar(&opts.olderThan, "older-than", "", "only sweeps whose last job ended longer ago: 7d, 12h, 30m")
	cmd.Flags().BoolVar(&opts.all, "all", false, "every sweep whose jobs have all ended")
	cmd.Flags().BoolVar(&opts.logs, "logs", false, "remove their logs too")
	cmd.Flags().BoolVar(&opts.json, "json", false, `print {"sweeps","jobs","logs","runs"}`)
	return cmd
}

func runClean(opts *cleanOptions) error {
	// Forgetting every ended sweep (their logs too, with --logs) is asked for by name,
	// as cancel asks for its jobs: a clean typed bare, to see what it does, or a
	// script's --sweep "$S" left empty, would forget the history of every sweep.
	switch {
	case opts.all && opts.sweep != "":
		return badInput("--all and --sweep: give one")
	case opts.all && opts.olderThan != "":
		return badInput("--all and --older-than: give one")
	case !opts.all && opts.sweep == "" && opts.olderThan == "":
		return badInput("%s", api.CleanNamesNone)
	}
	req := api.CleanRequest{Sweep: opts.sweep, All: opts.all, Logs: opts.logs}
	if opts.olderThan != "" {
		age, err := parseAge(opts.olderThan)
		if err != nil {
			return badInput("--older-than %q: %v", opts.olderThan, err)
		}
		req.OlderThan = age
	}
	var out cleaned
	c, err := opts.settings.dial()
	var none api.NoDaemonError
	var unknown scheduler.UnknownSweep
	if err == nil {
		out.CleanResponse, err = c.Clean(req)
	}
	// Where no daemon runs, or it has no such sweep, a gpuq run's record may be all
	// there is of it: that error stands only where no record is forgotten either.
	daemonErr := err
	if err != nil && !errors.As(err, &none) && !(req.Sweep != "" && errors.As(err, &unknown)) {
		return err
	}
	if !opts.settings.remote() {
		if out.Runs, err = opts.settings.forgetRuns(req); err != nil {
			return err
		}
	}
	// With no daemon on this machine's state directory, the runs' records are forgotten
	// above, but the sweeps the last daemon left are a daemon's to forget (see
	// daemonLeft): where the state it left holds what was asked, that part of the
	// clean was not done, and clean says so and fails alike whether or not a run's
	// record was forgotten beside it. A clean that forgot a record and then exited 0
	// while the daemon's sweeps stayed, when the same clean with no record to forget
	// failed, read as done to a script and to a person alike.
	var skipped error
	switch {
	case daemonErr == nil:
	case !errors.As(daemonErr, &none) || opts.settings.remote():
		if len(out.Runs) == 0 {
			return daemonErr // the daemon has no such sweep (or is not reached), nor had a run
		}
	case req.Sweep != "" && len(out.Runs) == 0:
		return opts.settings.noSweepToClean(req.Sweep, none)
	default:
		// No daemon runs: where the last daemon left no sweep that was asked for,
		// there is nothing of its to forget (a nightly clean of someone who only uses
		// gpuq run), not a daemon to start.
		skipped = opts.settings.daemonLeft(req, none)
	}
	if skipped != nil && len(out.Runs) == 0 {
		return skipped
	}
	for _, w := range out.Warnings {
		fmt.Fprintln(opts.io.Err, "gpuq: warning:", w)
	}
	if opts.json {
		if err := writeJSON(opts.io.Out, out); err != nil {
			return err
		}
		return skipped
	}
	switch {
	case len(out.Sweeps) == 0 && len(out.Runs) == 0 && req.OlderThan > 0:
		fmt.Fprintf(opts.io.Out, "no sweep to forget: none ended more than %s ago (gpuq status lists them)\n", opts.olderThan)
	case len(out.Sweeps) == 0 && len(out.Runs) == 0:
		fmt.Fprintln(opts.io.Out, "no sweep to forget: none has ended (gpuq status lists them)")
	case len(out.Sweeps) == 0: // gpuq runs' alone, said below
	case out.Logs != "":
		fmt.Fprintf(opts.io.Out, "forgot %s (%s); their logs are in %s\n", strings.Join(out.Sweeps, " "), plans.Count(out.Jobs, "job"), out.Logs)
	default:
		fmt.Fprintf(opts.io.Out, "forgot %s (%s)\n", strings.Join(out.Sweeps, " "), plans.Count(out.Jobs, "job"))
	}
	if len(out.Runs) > 0 {
		fmt.Fprintf(opts.io.Out, "forgot the jobs of the gpuq runs that had ended, as they left them: %s\n", api.RunsText(out.Runs))
	}
	return skipped
}

// cleaned is what gpuq clean forgot: the daemon's sweeps, and the records of the gpuq
// runs that had ended (see api.Run.Record).
type cleaned struct {
	api.CleanResponse
	Runs []api.Run `json:"runs,omitempty"`
}

// forgetRuns forgets the records of the gpuq runs that had ended that req names, in
// this machine's state directory.
func (s *settings) forgetRuns(req api.CleanRequest) ([]api.Run, error) {
	dir, err := s.stateDir()
	if err != nil {
		return nil, err
	}
	var before time.Time
	if req.OlderThan > 0 {
		before = time.Now().Add(-req.OlderThan)
	}
	runs, err := api.ForgetEnded(dir, req.Sweep, before)
	if err != nil {
		return runs, fmt.Errorf("forgetting the gpuq runs that had ended: %w", err)
	}
	return runs, nil
}

// noSweepToClean is clean --sweep's error where no daemon runs on the state directory
// and no gpuq run that ended left the sweep there: that none runs stands only where the
// state the last daemon left holds the sweep, which only a daemon forgets (see
// daemonLeft). Otherwise there is no such sweep to clean, as a daemon would refuse it,
// and it says where it looked; a gpuq run that still runs the sweep says so.
func (s *settings) noSweepToClean(sweep string, none api.NoDaemonError) error {
	for _, r := range api.Runs(none.Dir) {
		if r.Sweep == sweep {
			return scheduler.Refused(fmt.Sprintf("sweep %s is run by gpuq run (pid %d), which has not ended: gpuq clean forgets it once that run has", sweep, r.PID))
		}
	}
	sr, err := s.readState(none.Dir)
	if err != nil {
		return err
	}
	known := api.EndedSweeps(none.Dir)
	left := "nor left its state there"
	if sr != nil {
		if sr.view.Submission(sweep) != nil {
			return sweepNotForgotten(sweep, none)
		}
		for _, sub := range sr.view.Submissions() {
			known = append(known, sub.Sweep.Name)
		}
		left = "the state the last one left there has no sweep so named"
	}
	return scheduler.Refused(fmt.Sprintf("no sweep %q to clean%s: no gpuq daemon runs on %s, %s, and no gpuq run of it left its jobs there as it ended",
		sweep, plans.Suggest(sweep, known), none.Dir, left))
}

// daemonLeft is clean's error where no daemon runs on the state directory and the
// state the last daemon left there holds what the clean asked for: the sweep --sweep
// names, or with --all or --older-than any sweep at all. Those are not forgotten, and
// it says which, and that a daemon is to be started to forget them (none, with the
// need gpuq clean gives it, says how); nil where that state holds none of them, or
// where there is none. The daemon alone forgets them, though the state is not in use
// while none runs: it decides which sweeps have ended on the jobs as it takes them up
// again (a trainer that ended while no daemon ran still reads as running here), and
// it moves their logs and unlinks their names under its lock; a clean that did it
// here would race a daemon that gpuq submit starts meanwhile.
func (s *settings) daemonLeft(req api.CleanRequest, none api.NoDaemonError) error {
	sr, err := s.readState(none.Dir)
	if err != nil || sr == nil {
		return err
	}
	if req.Sweep != "" {
		if sr.view.Submission(req.Sweep) == nil {
			return nil
		}
		return sweepNotForgotten(req.Sweep, none)
	}
	// With --older-than, a sweep submitted within it cannot have ended before it: a
	// daemon would not forget it either.
	var names []string
	for _, sub := range sr.view.Submissions() {
		if req.OlderThan > 0 && time.Since(sub.Submitted) < req.OlderThan {
			continue
		}
		names = append(names, sub.Sweep.Name)
	}
	if len(names) == 0 {
		return nil
	}
	if len(names) > 5 {
		names = append(names[:5:5], fmt.Sprintf("and %d more", len(names)-5))
	}
	return fmt.Errorf("the sweeps the last gpuq daemon left are not forgotten (%s; gpuq status lists them): %w", strings.Join(names, ", "), none)
}

// sweepNotForgotten is clean --sweep's error where the state the last daemon left
// holds the sweep and no daemon runs to forget it, whether or not a gpuq run's record
// of it was forgotten.
func sweepNotForgotten(sweep string, none api.NoDaemonError) error {
	return fmt.Errorf("sweep %s, which the last gpuq daemon left, is not forgotten: %w", sweep, none)
}

// parseAge reads an age as Go writes durations (12h, 30m), or in days (7d).
func parseAge(s string) (time.Duration, error) {
	var d time.Duration
	var err error
	if days, ok := strings.CutSuffix(s, "d"); ok {
		var n float64
		if n, err = strconv.ParseFloat(days, 64); err == nil {
			d = time.Duration(n * float64(24*time.Hour))
		}
	} else {
		d, err = time.ParseDuration(s)
	}
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("write a positive age such as 7d, 12h or 30m")
	}
	return d, nil
}
