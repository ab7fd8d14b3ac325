package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
)

type submitOptions struct {
	io       ioStreams
	settings *settings
	name     string
	after    []string
	json     bool
}

func newSubmitCmd(io ioStreams, st *settings) *cobra.Command {
	opts := &submitOptions{io: io, settings: st}
	cmd := &cobra.Command{
		Use:   "submit SWEEP...",
		Short: "Send sweeps to the daemon, starting one in the background if none runs",
		Long: `Check each sweep file and send it to the daemon of the state directory, which runs
its jobs beside every other sweep's. When no daemon runs there, one is started in the
background first (as gpuq daemon -d does); its log is daemon.log in the state
directory, and it keeps running after you log out. It owns the machine's cards: every
card, or those GPUQ_GPUS and the config file name (a simulated machine the first sweep
names, if they name none), so that each sweep's gpus choose among them. A sweep for
cards the running daemon lacks is refused, with the command that restarts it with
them all; its trainers keep running.

--after SWEEP|JOB (repeated, or a,b) starts its jobs only once those have all succeeded,
as Slurm's --dependency=afterok and pueue's --after do; if one fails or is cancelled,
its jobs fail too (gpuq retry them once it has succeeded). A job stopped early
(early_stop) counts as succeeded, as for gpuq wait. While they wait they show as
blocked, and gpuq why says for what. The sweep file's after: and a job's own do the
same.

The sweep is read now: later edits to the file do not change it. Its trainers get the
environment gpuq submit was run in (PATH, a conda env, CUDA settings), not the daemon's.
--gpus and --gpu-plan, given here, replace the sweep's own: they limit the sweep's jobs
to those cards and counts, within the daemon's machine.

Exit status: 0 submitted, 1 the daemon could not be reached or started, 2 bad input.`,
		Example: `  gpuq submit examples/sweeps/quickstart.yaml
  gpuq submit examples/sweeps/quickstart.yaml --name quickstart-2
  gpuq submit sweep-a.yaml sweep-b.yaml --gpus 0,1
  gpuq submit eval.yaml --after pretrain
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
	cmd.Flags().StringSliceVar(&opts.after, "after", nil, "start its jobs only once these sweeps or jobs have all succeeded (as Slurm's afterok); adds to the sweep's after:")
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
	if len(opts.after) > 0 {
		ov.After = plans.Override{Value: strings.Join(opts.after, ","), Source: "--after"}
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
		if sw.Sharing == plans.MPS {
			return badInput("%s: sharing: mps: the daemon does not start NVIDIA MPS yet; run the sweep with gpuq run, which does, "+
				"or remove sharing: mps to share cards by time-slicing", abs)
		}
		for _, w := range sw.Warnings() {
			fmt.Fprintln(opts.io.Err, "gpuq: warning:", w)
		}
		reqs = append(reqs, api.SubmitRequest{File: abs, Source: string(sw.Source), Overrides: ov, Environ: os.Environ(), Files: sw.Files})
		if machine == nil {
			machine = machineOf(sw, opts.settings)
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

// machineOf is the daemon flags that gpuq submit starts a daemon with for a sweep. A
// daemon owns the machine's cards (every card, or those GPUQ_GPUS and the config file
// name): a sweep's gpus only choose among them, so they are not given to it, lest the
// next sweep's cards be missing. A simulated machine the sweep names is a machine,
// given to it where GPUQ_GPUS and the config file name none; so are the sweep's
// headroom and sharing target, where they set none (a card keeps one of each).
func machineOf(sw *plans.Sweep, st *settings) []string {
	var args []string
	mo := st.machineOverrides()
	if spec, err := plans.ParseGPUs(mo.GPUs.Value); err == nil && sw.GPUs.IsSimulated() && !spec.IsSimulated() && spec.Indices == nil {
		args = append(args, "--gpus", sw.GPUs.String())
	}
	if st.unflagged(keyHeadroom).Value == "" && sw.Headroom != plans.DefaultHeadroom {
		args = append(args, "--headroom", sw.Headroom.String())
	}
	if st.unflagged(keyUtilTarget).Value == "" && sw.UtilTarget != 0 {
		args = append(args, "--util-target", plans.UtilTargetText(sw.UtilTarget))
	}
	return args
}

// ensureDaemon connects to the state directory's daemon, starting one in the background
// if none runs (started), with the flags in machine (see machineOf).
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
