package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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
	oneOff   oneOff
}

func newSubmitCmd(io ioStreams, st *settings) *cobra.Command {
	opts := &submitOptions{io: io, settings: st}
	cmd := &cobra.Command{
		Use:   "submit SWEEP... | submit [flags] -- COMMAND [ARG...]",
		Short: "Send sweeps, or one command, to the daemon, starting one in the background if none runs",
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

A command after -- is a one-off job, as pueue add -- and sbatch --wrap take one: a
sweep of one job that gpuq writes itself, run in this directory (--workdir) with the
command as written (braces and all; nothing passes through a shell). It is named after
its script (train.py: train) or --name, made unique by itself among the sweeps of the
daemon and of the gpuq runs beside it (train-2 when train was submitted before), so
that it can be submitted again as it is. --memory (default unknown: one job per card,
as for a sweep without memory), --host-memory, --gpus-per-job, --timeout, --priority
and --env KEY=VALUE are its sweep's keys; --gpus, --gpu-plan and --after apply to it as
to a sweep, and it starts the daemon as a sweep does.

Exit status: 0 submitted, 1 the daemon could not be reached or started, 2 bad input.`,
		Example: `  gpuq submit examples/sweeps/quickstart.yaml
  gpuq submit examples/sweeps/quickstart.yaml --name quickstart-2
  gpuq submit sweep-a.yaml sweep-b.yaml --gpus 0,1
  gpuq submit eval.yaml --after pretrain
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
	cmd.Flags().StringSliceVar(&opts.after, "after", nil, "start its jobs only once these sweeps or jobs have all succeeded (as Slurm's afterok); adds to the sweep's after:")
	opts.oneOff.addFlags(cmd.Flags())
	cmd.Flags().BoolVar(&opts.json, "json", false, `print {"sweeps":[{"sweep","jobs"}]} on stdout`)
	return cmd
}

// overrides are what this command line says for each sweep it submits, a one-off's
// too: the sweep's settings (see sweepOverrides) and --after.
func (opts *submitOptions) overrides() plans.Overrides {
	ov := opts.settings.sweepOverrides()
	if len(opts.after) > 0 {
		ov.After = plans.Override{Value: strings.Join(opts.after, ","), Source: "--after"}
	}
	return ov
}

func runSubmit(opts *submitOptions, paths []string) error {
	ov := opts.overrides()
	if opts.name != "" {
		if len(paths) > 1 {
			return badInput("--name names one sweep; give it one sweep file")
		}
		ov.Name = plans.Override{Value: opts.name, Source: "--name"}
	}
	var reqs []api.SubmitRequest
	var sweeps []*plans.Sweep
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
		if sw.Sharing == plans.MPS {
			return badInput("%s: sharing: mps: the daemon does not start NVIDIA MPS yet; run the sweep with gpuq run, which does, "+
				"or remove sharing: mps to share cards by time-slicing", abs)
		}
		for _, w := range sw.Warnings() {
			fmt.Fprintln(opts.io.Err, "gpuq: warning:", w)
		}
		reqs = append(reqs, api.SubmitRequest{File: abs, Source: string(sw.Source), Overrides: ov, Environ: os.Environ(), Files: sw.Files})
		sweeps = append(sweeps, sw)
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
	for _, i := range submitOrder(sweeps) {
		resp, err := c.Submit(reqs[i])
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

// submitOrder is the order to submit sweeps given together in: each after the others
// of them its jobs wait for (after: [pre] in post.yaml, given as post.yaml pre.yaml),
// as the daemon knows only what it holds; else as given, a cycle too (the daemon
// refuses it).
func submitOrder(sweeps []*plans.Sweep) []int {
	waitsFor := func(s, other *plans.Sweep) bool {
		return s != other && slices.ContainsFunc(s.Jobs, func(j plans.Job) bool {
			return slices.ContainsFunc(j.After, func(n string) bool { return n == other.Name || strings.HasPrefix(n, other.Name+".") })
		})
	}
	placed := make([]bool, len(sweeps))
	ready := func(i int) bool {
		for k, o := range sweeps {
			if !placed[k] && waitsFor(sweeps[i], o) {
				return false
			}
		}
		return true
	}
	var order []int
	for len(order) < len(sweeps) {
		next := slices.Index(placed, false) // a cycle: the rest as given
		for i := range sweeps {
			if !placed[i] && ready(i) {
				next = i
				break
			}
		}
		placed[next] = true
		order = append(order, next)
	}
	return order
}

// stopStarted stops the daemon gpuq submit started when nothing could be submitted to
// it: there is nothing for it to do.
func stopStarted(c *api.Client, io ioStreams) {
	if _, err := c.Stop(false); err == nil {
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
// unique among the sweeps of the daemon and of the gpuq runs beside it. It starts the
// daemon as a sweep does, and is placed under the same precedence.
func runSubmitOneOff(opts *submitOptions, argv []string) error {
	ov := opts.overrides()
	label := oneOffLabel("submit", argv)
	base := cmp.Or(opts.name, oneOffName(argv))
	// Checked under the name it will likely have, before a daemon is started for it:
	// its after: may name a sweep of its base name.
	taken, err := sweepNames(opts.settings)
	if err != nil {
		return err
	}
	sw, _, err := opts.oneOff.sweep(label, freeName(base, taken), argv, ov)
	if err != nil {
		return err
	}
	for _, w := range sw.Warnings() {
		fmt.Fprintln(opts.io.Err, "gpuq: warning:", w)
	}
	c, started, err := ensureDaemon(opts.settings, opts.io, machineOf(sw, opts.settings))
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
	for _, w := range resp.Warnings {
		fmt.Fprintln(opts.io.Err, "gpuq: warning:", w)
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
// sweep has (see sweepNames), and again under the next where another submission took
// that name meanwhile.
func submitUnique(c *api.Client, opts *submitOptions, label, base string, argv []string, ov plans.Overrides) (api.SubmitResponse, error) {
	for tries := 0; ; tries++ {
		taken, err := sweepNames(opts.settings)
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
		if now, lerr := sweepNames(opts.settings); tries == 2 || lerr != nil || !now[name] {
			return resp, flagProblems(err, label) // the daemon's admission, as the flags gave it
		}
	}
}

// sweepNames are the names of the sweeps of the state directory's daemon and of the
// gpuq runs that serve theirs there: a one-off named as one of them would be hidden
// by it, or hide it, from the verbs that find a sweep by its name (see routed). None
// where nothing runs.
func sweepNames(st *settings) (map[string]bool, error) {
	c, err := st.client()
	var none api.NoDaemonError
	if errors.As(err, &none) {
		return map[string]bool{}, nil
	}
	if err != nil {
		return nil, err
	}
	// Each job's id alone: every job's history is 30 MB at 100,000 jobs.
	jobs, err := c.States(api.StatesRequest{})
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, j := range jobs {
		out[sweepOfJob(j.ID)] = true
	}
	return out, nil
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
	sayStarted(io.Err, c, pid)
	return c, true, nil
}

// sayStarted says that a daemon started in the background, where its log is, and on
// which simulated cards where they are simulated: the notice its start printed went
// to that log.
func sayStarted(w io.Writer, c *api.Client, pid int) {
	on := ""
	if m, err := c.Machine(); err == nil && m.Simulated != "" {
		on = ", on SIMULATED GPUs " + m.Simulated
	}
	fmt.Fprintf(w, "gpuq: started a daemon (pid %d) on %s%s; its log is %s\n", pid, c.Dir(), on, api.LogPath(c.Dir()))
}
