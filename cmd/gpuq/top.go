package main

import (
	"context"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuq/gpuq/cmd/gpuq/top"
)

func newTopCmd(io ioStreams, st *settings) *cobra.Command {
	var every time.Duration
	cmd := &cobra.Command{
		Use:   "top",
		Short: "Watch the daemon's cards and jobs live, full-screen",
		Long: `A live view of the daemon: each card's memory as a bar split by job (what a job holds,
█, and what gpuq reserves for it beyond that, ▒, in the job's colour; other processes ▓;
free ░; the headroom kept free ·), its plan's slots used, utilisation and temperature;
below, the running jobs (card, tier, elapsed, declared / learned / current memory, the
last line of their output or their progress bar), the queue with each job's reason,
and the last events.

Keys: ↑/↓ (or k/j) select a job; l shows its log (esc goes back); a attaches to its
terminal (Ctrl-] comes back); c cancels it (after y); h holds a queued job or releases a
held one; r retries a failed or cancelled job (select it among the events); d drains a
card, or takes a drained one back (type its index); / filters the lists; q quits.

It fits an 80×24 terminal (ssh's default) and follows the terminal's size. When its
output is not a terminal (a pipe, a file, a cron job), it prints the view once as plain
text and exits.`,
		Example: `  gpuq top
  gpuq top --every 5s
  gpuq top | less -S`,
		Args: noArgs,
		RunE: func(*cobra.Command, []string) error { return runTop(io, st, every) },
	}
	cmd.Flags().DurationVar(&every, "every", time.Second, "how often the view is read again")
	return cmd
}

func runTop(ios ioStreams, st *settings, every time.Duration) error {
	if every <= 0 {
		return badInput("--every %s: give a positive duration, e.g. 2s", every)
	}
	c, err := st.dial()
	if err != nil {
		return err
	}
	title := "the daemon on " + tildeHome(c.Dir())
	if !isTerminal(ios.Out) {
		ov, err := c.Overview()
		if err != nil {
			return err
		}
		return top.Print(ios.Out, ov, title, plainWidth)
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	attach := func(job string) *exec.Cmd { return exec.Command(self, "--state-dir", c.Dir(), "attach", job) }
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	return top.Run(ctx, top.Options{Source: c, Title: title, Every: every, Attach: attach}, ios.In, ios.Out)
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
