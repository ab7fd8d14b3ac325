package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuq/gpuq/cmd/gpuq/top"
	"github.com/gpuq/gpuq/scheduler"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
)

func newTopCmd(io ioStreams, st *settings) *cobra.Command {
	var every time.Duration
	var sweep string
	cmd := &cobra.Command{
		Use:   "top",
		Short: "Watch the daemon's cards and jobs live, full-screen",
		Long: `A live view of the daemon: each card's memory as a bar split by job (what a job holds,
█, and what gpuq reserves for it beyond that, ▒, in the job's colour; other processes ▓;
free ░; the headroom kept free ·), its plan's slots used, utilisation and temperature;
below, the running jobs (card, tier, elapsed, declared / learned / current memory, the
last line of their output or their progress bar), the queue with each job's reason
(after how its latest attempt ended, where it has run: requeued after gpu-oom at tier
0, or after gpu-oom at t0 where the line would be cut), and the last events.

Keys: ↑/↓ (or k/j) select a job; l shows its log (esc goes back); a attaches to its
terminal (Ctrl-] comes back); c cancels it (after y); h holds a queued job or releases a
held one; r retries a failed, cancelled or stopped job (select it among the events); d
drains a card, or takes a drained one back (type its index); / filters the lists; q
quits.

It fits an 80×24 terminal (ssh's default) and follows the terminal's size. When its
output is not a terminal (a pipe, a file, a cron job), it prints the view once as plain
text and exits.

A gpuq run in the foreground is watched the same way: with no daemon, the one gpuq run
of the state directory; --sweep S, the gpuq run of sweep S (waited for while it starts),
or where none runs, the daemon's jobs of sweep S alone. When the run ends, top shows how
each of its jobs ended (what gpuq results reads), and the clock when it ended; a daemon
that stops is asked again until one answers.`,
		Example: `  gpuq top
  gpuq top --every 5s
  gpuq top --sweep quickstart
  gpuq top | less -S`,
		Args: noArgs,
		RunE: func(*cobra.Command, []string) error { return runTop(io, st, every, sweep) },
	}
	cmd.Flags().DurationVar(&every, "every", time.Second, "how often the view is read again")
	cmd.Flags().StringVar(&sweep, "sweep", "", "watch the gpuq run of this sweep (in the foreground), or else the daemon's jobs of it")
	return cmd
}

func runTop(ios ioStreams, st *settings, every time.Duration, sweep string) error {
	if every <= 0 {
		return badInput("--every %s: give a positive duration, e.g. 2s", every)
	}
	c, err := topSource(st, sweep)
	if err != nil {
		return err
	}
	opts := top.Options{Source: c, Title: "the daemon on " + tildeHome(c.Dir()), Every: every, StateDir: c.Dir()}
	if st.remote() {
		opts.Title, opts.StateDir = "the daemon at "+st.v.GetString(keyServer), ""
	}
	if r := c.Run(); r != nil {
		opts.Title = fmt.Sprintf("gpuq run of %s (pid %d)", r.Sweep, r.PID)
		opts.Run = r
	} else if sweep != "" {
		// The daemon runs the sweep: its jobs alone are listed.
		opts.Sweep = sweep
		opts.Title += " (sweep " + sweep + ")"
	}
	if !isTerminal(ios.Out) {
		ov, err := c.Overview()
		if printed, perr := top.PrintEnded(ios.Out, err, opts, plainWidth); printed {
			// It ended since it was found: how its jobs ended.
			return perr
		}
		if err != nil {
			return err
		}
		return top.Print(ios.Out, ov, opts, plainWidth)
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	args, err := attachArgs(st)
	if err != nil {
		return err
	}
	attach := func(job string) *exec.Cmd { return exec.Command(self, append(args, "attach", job)...) }
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	opts.Attach = attach
	return top.Run(ctx, opts, ios.In, ios.Out)
}

// attachArgs are the global flags of the gpuq attach that top runs for a job: the
// state directory top watches, and the daemon's address where top reaches it over the
// network (--server), which a flag gave top alone.
func attachArgs(st *settings) ([]string, error) {
	dir, err := st.stateDir()
	if err != nil {
		return nil, err
	}
	args := []string{"--state-dir", dir}
	if st.remote() {
		args = append(args, "--server", st.v.GetString(keyServer))
	}
	return slices.Clip(args), nil
}

// tildeHome writes a path under the home directory as ~/..., as shells show it.
func tildeHome(path string) string {
	home, err := os.UserHomeDir()
	if err != nil || home == "" || home == "/" {
		return path
	}
	if rel, ok := strings.CutPrefix(path, home+"/"); ok {
		return "~/" + rel
	}
	return path
}

// plainWidth is how wide gpuq top draws its title line and bars without a terminal to
// measure: a terminal's default width.
const plainWidth = 80

// unknownSweep is, where no daemon runs, the refusal of a sweep that neither the state
// its last one left nor anything else there has, as the daemon would refuse it; nil
// where the state has it (only a daemon shows it live), or cannot be read.
func unknownSweep(st *settings, sweep string) error {
	c, err := st.readClient()
	if err != nil {
		return nil
	}
	req := api.StatesRequest{Sweep: sweep}
	if sr, ok := stateFor(c, sweep); ok {
		err = sr.need(req)
	} else {
		_, err = c.States(req)
	}
	var refused scheduler.Refused
	if errors.As(err, &refused) {
		return err
	}
	return nil
}

// runServeLimit is how long gpuq top --sweep S waits for a gpuq run that holds S's
// name to serve it: from its start, it opens its cards (and starts MPS) first.
var runServeLimit = 15 * time.Second

// runPoll is how often gpuq top --sweep S looks again for a gpuq run of S that is
// starting: each look lists the runs' directory and asks who holds S's name, and a run
// takes seconds to start, so not every awaitPoll.
const runPoll = 200 * time.Millisecond

// awaitRunOf is the gpuq runs of dir once the one that holds sweep's name (see
// api.Reserve) serves it: a gpuq run in another terminal, starting, is waited for, not
// taken for none, which would send a person to start a daemon that would not run it.
// One that does not serve it in runServeLimit is an error that says how to see the
// sweep: it may serve it later, or never (its terminal says why), and its live table
// shows it all the same. runs are the runs already read; where no run holds the name,
// they are returned as they are.
func awaitRunOf(st *settings, dir, sweep string, runs []api.Run) ([]api.Run, error) {
	served := func() bool { return slices.ContainsFunc(runs, func(r api.Run) bool { return r.Sweep == sweep }) }
	pid, held := api.RunHolder(dir, sweep)
	if served() || !held {
		return runs, nil
	}
	fmt.Fprintf(st.notices, "gpuq: the gpuq run of sweep %s (pid %d) is starting; waiting for it to answer\n", sweep, pid)
	for deadline := time.Now().Add(runServeLimit); ; {
		if err := st.pauseFor(runPoll); err != nil {
			return nil, fmt.Errorf("stopped waiting for the gpuq run of sweep %s (pid %d) to answer: %w", sweep, pid, err)
		}
		if runs = api.Runs(dir); served() {
			return runs, nil
		}
		if _, held := api.RunHolder(dir, sweep); !held {
			return runs, nil // it ended before it served: as though none had run
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the gpuq run of sweep %s (pid %d) on %s has not served the sweep in %s: it may start yet, and gpuq top --sweep %s then shows it; "+
				"or it could not, and said why in its terminal (\"top will not reach this run\"), where its live table shows the sweep all the same",
				sweep, pid, dir, runServeLimit, sweep)
		}
	}
}

// topSource is what gpuq top watches: the gpuq run of sweep, if given and one runs it;
// else the daemon (which must have the sweep given); with none, the one gpuq run of
// the state directory.
func topSource(st *settings, sweep string) (*api.Client, error) {
	dir, err := st.stateDir()
	if err != nil {
		return nil, err
	}
	var runs []api.Run
	if !st.remote() {
		runs = api.Runs(dir)
	}
	if sweep != "" && !st.remote() {
		if runs, err = awaitRunOf(st, dir, sweep, runs); err != nil {
			return nil, err
		}
		for _, r := range runs {
			if r.Sweep == sweep {
				return api.DialRun(dir, r)
			}
		}
	}
	c, err := st.dial()
	var none api.NoDaemonError
	switch {
	case err == nil && sweep != "":
		if _, err := c.States(api.StatesRequest{Sweep: sweep}); err != nil {
			return nil, fmt.Errorf("no gpuq run runs sweep %s on %s, and the daemon: %w", sweep, dir, err)
		}
		return c, nil
	case err == nil, !errors.As(err, &none):
		return c, err
	case sweep != "":
		if err := unknownSweep(st, sweep); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("no gpuq run runs sweep %s on %s, nor does a daemon: %v", sweep, dir, err)
	case len(runs) == 1:
		return api.DialRun(dir, runs[0])
	case len(runs) > 1:
		return nil, badInput("no gpuq daemon runs on %s, and %d gpuq runs do (%s): name one with --sweep", dir, len(runs), api.RunsText(runs))
	}
	return nil, err
}
