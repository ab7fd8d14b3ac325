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
the state the last daemon left holds it (a daemon must run to forget that).`,
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
	if daemonErr != nil && len(out.Runs) == 0 {
		switch {
		case !errors.As(daemonErr, &none) || opts.settings.remote():
			return daemonErr
		case req.Sweep != "":
			return opts.settings.noSweepToClean(req.Sweep, none)
		}
		// No daemon runs, and no gpuq run's record was old enough: where the last
		// daemon left no sweep either, there is nothing to forget (a nightly clean of
		// someone who only uses gpuq run), not a daemon to start.
		sr, err := opts.settings.readState(none.Dir)
		if err != nil {
			return err
		}
		if sr != nil && len(sr.view.Submissions()) > 0 {
			return daemonErr
		}
	}
	for _, w := range out.Warnings {
		fmt.Fprintln(opts.io.Err, "gpuq: warning:", w)
	}
	if opts.json {
		return writeJSON(opts.io.Out, out)
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
	return nil
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
// state the last daemon left holds the sweep, which only a daemon forgets. Otherwise
// there is no such sweep to clean, as a daemon would refuse it, and it says where it
// looked; a gpuq run that still runs the sweep says so.
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
			return none
		}
		for _, sub := range sr.view.Submissions() {
			known = append(known, sub.Sweep.Name)
		}
		left = "the state the last one left there has no sweep so named"
	}
	return scheduler.Refused(fmt.Sprintf("no sweep %q to clean%s: no gpuq daemon runs on %s, %s, and no gpuq run of it left its jobs there as it ended",
		sweep, plans.Suggest(sweep, known), none.Dir, left))
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
