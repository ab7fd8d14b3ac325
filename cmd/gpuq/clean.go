package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
)

type cleanOptions struct {
	io        ioStreams
	settings  *settings
	sweep     string
	olderThan string
	logs      bool
	json      bool
}

func newCleanCmd(io ioStreams, st *settings) *cobra.Command {
	opts := &cleanOptions{io: io, settings: st}
	cmd := &cobra.Command{
		Use:   "clean [--sweep SWEEP] [--older-than AGE]",
		Short: "Forget sweeps whose jobs have all ended, so their names can be used again",
		Long: `Forget the daemon's sweeps whose jobs have all ended (succeeded, failed, cancelled
or stopped early): every one, the one --sweep names, or those whose last job ended
longer ago than --older-than (such as 7d or 12h). A forgotten sweep's name can be
submitted again, and gpuq status no longer lists its jobs.

Their logs are kept, moved to cleaned/<time>/ in the state directory, unless --logs
is given: then they are removed.`,
		Example: `  gpuq clean
  gpuq clean --sweep gla-e1
  gpuq clean --older-than 7d --logs`,
		Args: noArgs,
		RunE: func(*cobra.Command, []string) error { return runClean(opts) },
	}
	cmd.Flags().StringVar(&opts.sweep, "sweep", "", "only this sweep (it must have ended)")
	cmd.Flags().StringVar(&opts.olderThan, "older-than", "", "only sweeps whose last job ended longer ago: 7d, 12h, 30m")
	cmd.Flags().BoolVar(&opts.logs, "logs", false, "remove their logs too")
	cmd.Flags().BoolVar(&opts.json, "json", false, `print {"sweeps","jobs","logs"}`)
	return cmd
}

func runClean(opts *cleanOptions) error {
	req := api.CleanRequest{Sweep: opts.sweep, Logs: opts.logs}
	if opts.olderThan != "" {
		age, err := parseAge(opts.olderThan)
		if err != nil {
			return badInput("--older-than %q: %v", opts.olderThan, err)
		}
		req.OlderThan = age
	}
	c, err := opts.settings.dial()
	if err != nil {
		return err
	}
	out, err := c.Clean(req)
	if err != nil {
		return err
	}
	for _, w := range out.Warnings {
		fmt.Fprintln(opts.io.Err, "gpuq: warning:", w)
	}
	if opts.json {
		return writeJSON(opts.io.Out, out)
	}
	switch {
	case len(out.Sweeps) == 0:
		fmt.Fprintln(opts.io.Out, "no sweep to forget: none has ended (gpuq status lists them)")
	case out.Logs != "":
		fmt.Fprintf(opts.io.Out, "forgot %s (%s); their logs are in %s\n", strings.Join(out.Sweeps, " "), plans.Count(out.Jobs, "job"), out.Logs)
	default:
		fmt.Fprintf(opts.io.Out, "forgot %s (%s)\n", strings.Join(out.Sweeps, " "), plans.Count(out.Jobs, "job"))
	}
	return nil
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
