package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
)

type submitOptions struct {
	io       ioStreams
	settings *settings
	name     string
	json     bool
}

func newSubmitCmd(io ioStreams, st *settings) *cobra.Command {
	opts := &submitOptions{io: io, settings: st}
	cmd := &cobra.Command{
		Use:   "submit SWEEP...",
		Short: "Send sweeps to the daemon, starting one in the background if none runs",
		Long: `Check each sweep file and send it to the daemon of the state directory, which runs
its jobs beside every other sweep's. When no daemon runs there, one is started in the
background first, on the machine the first sweep names (its gpus and headroom); its log
is daemon.log in the state directory, and it keeps running after you log out. A sweep
whose gpus name another machine than the running daemon's is refused, with the command
that restarts the daemon on it.

The sweep is read now: later edits to the file do not change it. Its trainers get the
environment gpuq submit was run in (PATH, a conda env, CUDA settings), not the daemon's.
--gpus and --gpu-plan, given here, replace the sweep's own: they limit the sweep's jobs
to those cards and counts, within the daemon's machine.

Exit status: 0 submitted, 1 the daemon could not be reached or started, 2 bad input.`,
		Example: `  gpuq submit examples/sweeps/quickstart.yaml
  gpuq submit examples/sweeps/quickstart.yaml --name quickstart-2
  gpuq submit sweep-a.yaml sweep-b.yaml --gpus 0,1
  gpuq status --sweep quickstart`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return badInput("name a sweep file; see gpuq submit --help")
			}
			return nil
		},
		RunE: func(_ *cobra.Command, args []string) error { return runSubmit(opts, args) },
	}
	cmd.Flags().StringVar(&opts.name, "name", "", "submit the sweep under this name instead of its own (a sweep name is used once, until gpuq clean forgets it)")
	cmd.Flags().BoolVar(&opts.json, "json", false, `print {"sweeps":[{"sweep","jobs"}]} on stdout`)
	return cmd
}

func runSubmit(opts *submitOptions, paths []string) error {
	ov := opts.settings.sweepOverrides()
	if opts.name != "" {
		if len(paths) > 1 {
			return badInput("--name names one sweep; give it one sweep file")
		}
		ov.Name = plans.Override{Value: opts.name, Source: "--name"}
	}
	var reqs []api.SubmitRequest
	var machine []string
	for _, p := range paths {
		abs, err := filepath.Abs(p)
		if err != nil {
			return err
		}
		sw, err := plans.LoadSweep(abs, ov)
		if err != nil {
			return err
		}
		for _, w := range sw.Warnings() {
			fmt.Fprintln(opts.io.Err, "gpuq: warning:", w)
		}
		reqs = append(reqs, api.SubmitRequest{File: abs, Source: string(sw.Source), Overrides: ov, Environ: os.Environ(), Files: sw.Files})
		if machine == nil {
			machine = machineOf(sw)
		}
	}
	c, started, err := ensureDaemon(opts.settings, opts.io, machine)
	if err != nil {
		return err
	}
	var out struct {
		Sweeps []api.SubmitResponse `json:"sweeps"`
	}
	for _, req := range reqs {
		resp, err := c.Submit(req)
		if err != nil {
			if started && len(out.Sweeps) == 0 {
				// Nothing for the daemon it started to do: do not leave it running.
				if serr := c.Stop(false); serr == nil {
					fmt.Fprintln(opts.io.Err, "gpuq: stopped the daemon it had started")
				}
			}
			return err
		}
		out.Sweeps = append(out.Sweeps, resp)
		for _, w := range resp.Warnings {
			fmt.Fprintln(opts.io.Err, "gpuq: warning:", w)
		}
		if !opts.json {
			fmt.Fprintf(opts.io.Out, "submitted %s: %s; gpuq status --sweep %s follows them\n", resp.Sweep, plans.Count(resp.Jobs, "job"), resp.Sweep)
		}
	}
	if opts.json {
		return writeJSON(opts.io.Out, out)
	}
	return nil
}

// sweepOverrides are the --gpus, --gpu-plan and --headroom given on this command line:
// for a submission they speak for the sweep. GPUQ_* and the config file speak for the
// daemon's machine, not for each sweep.
func (s *settings) sweepOverrides() plans.Overrides {
	var ov plans.Overrides
	for _, f := range []struct {
		flag string
		to   *plans.Override
	}{{"gpus", &ov.GPUs}, {"gpu-plan", &ov.Plan}, {"headroom", &ov.Headroom}} {
		if s.flags.Changed(f.flag) {
			v, _ := s.flags.GetString(f.flag)
			*f.to = plans.Override{Value: v, Source: "--" + f.flag}
		}
	}
	return ov
}

// machineOf is the daemon flags for the machine a sweep names (its gpus and headroom,
// from its file or this command line); nil when it names none.
func machineOf(sw *plans.Sweep) []string {
	var args []string
	if sw.GPUs.IsSimulated() || sw.GPUs.Indices != nil {
		args = append(args, "--gpus", sw.GPUs.String())
	}
	if sw.Headroom != plans.DefaultHeadroom {
		args = append(args, "--headroom", sw.Headroom.String())
	}
	return args
}

// ensureDaemon connects to the state directory's daemon, starting one in the background
// if none runs (started), on the machine the flags in machine name (the first sweep's),
// so that the sweep runs on the machine it was written for.
func ensureDaemon(st *settings, io ioStreams, machine []string) (c *api.Client, started bool, err error) {
	c, err = st.dial()
	var none api.NoDaemonError
	if !errors.As(err, &none) {
		return c, false, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, false, err
	}
	argv := []string{self, "daemon", "--state-dir", none.Dir}
	if cfg, _ := st.flags.GetString("config"); cfg != "" {
		argv = append(argv, "--config", cfg)
	}
	argv = append(argv, machine...)
	c, pid, err := api.Start(none.Dir, argv)
	if err != nil {
		return nil, false, err
	}
	if pid == 0 { // another gpuq started one at the same moment
		return c, false, nil
	}
	fmt.Fprintf(io.Err, "gpuq: started a daemon (pid %d) on %s; its log is %s\n", pid, none.Dir, api.LogPath(none.Dir))
	return c, true, nil
}
