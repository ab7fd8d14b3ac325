package main

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"os/exec"
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
	oneOff   oneOff
}

func newSubmitCmd(io ioStreams, st *settings) *cobra.Command {
	opts := &submitOptions{io: io, settings: st}
	cmd := &cobra.Command{
		Use:   "submit SWEEP... | submit [flags] -- COMMAND [ARG...]",
		Short: "Send sweeps, or one command, to the daemon, starting one in the background if none runs",
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

A command after -- is a one-off job, as pueue add -- and sbatch --wrap take one: a
sweep of one job that gpuq writes itself, run in this directory (--workdir) with the
command as written (braces and all; nothing passes through a shell). It is named after
its script (train.py: train) or --name, made unique by itself (train-2 when train was
submitted before), so that it can be submitted again as it is. --memory (default
unknown: one job per card, as for a sweep without memory), --host-memory,
--gpus-per-job, --timeout, --priority and --env KEY=VALUE are its sweep's keys; --gpus
and --gpu-plan limit it as they limit a sweep.

Exit status: 0 submitted, 1 the daemon could not be reached or started, 2 bad input.`,
		Example: `  gpuq submit examples/sweeps/quickstart.yaml
  gpuq submit examples/sweeps/quickstart.yaml --name quickstart-2
  gpuq submit sweep-a.yaml sweep-b.yaml --gpus 0,1
  gpuq submit --memory 10GiB -- python3 train.py --lr 1e-4
  gpuq status --sweep quickstart`,
		RunE: func(cmd *cobra.Command, args []string) error {
			files, command, err := commandAfterDash(cmd, args)
			switch {
			case err != nil:
				return err
			case command != nil:
				return runSubmitOneOff(opts, command)
			case len(files) == 0:
				return badInput("name a sweep file, or give a command after --; see gpuq submit --help")
			}
			return runSubmit(opts, files)
		},
	}
	cmd.Flags().StringVar(&opts.name, "name", "", "submit the sweep under this name instead of its own (a sweep name is used once, until gpuq clean forgets it); "+
		"a one-off's name, made unique")
	opts.oneOff.addFlags(cmd.Flags())
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
		if err := notAProgram(p, "submit"); err != nil {
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
				stopStarted(c, opts.io)
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

// stopStarted stops the daemon gpuq submit started when nothing could be submitted to
// it: there is nothing for it to do.
func stopStarted(c *api.Client, io ioStreams) {
	if err := c.Stop(false); err == nil {
		fmt.Fprintln(io.Err, "gpuq: stopped the daemon it had started")
	}
}

// notAProgram refuses a sweep file that is no file here but a program on the PATH:
// a command given without the -- before it.
func notAProgram(path, verb string) error {
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	if _, err := exec.LookPath(path); err != nil {
		return nil
	}
	return badInput("%s is no sweep file but a program: to run a command, give it after --: gpuq %s -- %s ...", path, verb, path)
}

// runSubmitOneOff sends a command as a one-off job, named after it or --name, made
// unique among the daemon's sweeps.
func runSubmitOneOff(opts *submitOptions, argv []string) error {
	ov := opts.settings.sweepOverrides()
	label := oneOffLabel("submit", argv)
	base := cmp.Or(opts.name, oneOffName(argv))
	sw, _, err := opts.oneOff.sweep(label, base, argv, ov)
	if err != nil {
		return err
	}
	for _, w := range sw.Warnings() {
		fmt.Fprintln(opts.io.Err, "gpuq: warning:", w)
	}
	c, started, err := ensureDaemon(opts.settings, opts.io, machineOf(sw))
	if err != nil {
		return err
	}
	resp, err := submitUnique(c, opts, label, base, argv, ov)
	if err != nil {
		if started {
			stopStarted(c, opts.io)
		}
		return err
	}
	if opts.json {
		return writeJSON(opts.io.Out, struct {
			Sweeps []api.SubmitResponse `json:"sweeps"`
		}{[]api.SubmitResponse{resp}})
	}
	fmt.Fprintf(opts.io.Out, "submitted %s.1: %s; gpuq logs -f %s.1 follows it\n", resp.Sweep, shellQuote(argv), resp.Sweep)
	return nil
}

// submitUnique submits a one-off under base, or base-2, base-3, ... the first name no
// sweep of the daemon has, and again under the next where another submission took that
// name meanwhile.
func submitUnique(c *api.Client, opts *submitOptions, label, base string, argv []string, ov plans.Overrides) (api.SubmitResponse, error) {
	for tries := 0; ; tries++ {
		taken, err := sweepNames(c)
		if err != nil {
			return api.SubmitResponse{}, err
		}
		name := freeName(base, taken)
		sw, doc, err := opts.oneOff.sweep(label, name, argv, ov)
		if err != nil {
			return api.SubmitResponse{}, err
		}
		resp, err := c.Submit(api.SubmitRequest{File: label, Source: string(doc), Overrides: ov, Environ: os.Environ(), Files: sw.Files})
		if err == nil {
			return resp, nil
		}
		if now, lerr := sweepNames(c); tries == 2 || lerr != nil || !now[name] {
			return resp, err
		}
	}
}

// sweepNames are the names of the daemon's sweeps.
func sweepNames(c *api.Client) (map[string]bool, error) {
	jobs, err := c.Jobs("", nil)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, j := range jobs {
		out[j.Sweep] = true
	}
	return out, nil
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
