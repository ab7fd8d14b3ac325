package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/charmbracelet/x/ansi"
	"github.com/spf13/cobra"

	"github.com/gpuq/gpuq/cmd/gpuq/top"
	"github.com/gpuq/gpuq/launcher"
	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/runner"
	"github.com/gpuq/gpuq/scheduler/state"
)

type runOptions struct {
	io       ioStreams
	settings *settings
	reserved *os.File // holds a one-off's name while it runs (see reserve)
	sweep    string
	json     bool
	logDir   string
	poll     time.Duration
	// command is a one-off's (gpuq run -- CMD), name its --name.
	command []string
	name    string
	oneOff  oneOff
}

func newRunCmd(io ioStreams, st *settings) *cobra.Command {
	opts := &runOptions{io: io, settings: st}
	cmd := &cobra.Command{
		Use:   "run SWEEP | run [flags] -- COMMAND [ARG...]",
		Short: "Run a sweep, or one command, in the foreground until every job has succeeded or failed",
		Long: `Run every job of the sweep: pack them onto the cards, launch each trainer in a
pseudo-terminal with the right environment, and when one runs out of GPU memory requeue
it with the next rung of its OOM ladder (the effective batch kept), until every job has
succeeded, failed for good, been cancelled or been stopped early. Ctrl-C stops every trainer cleanly, as
do SIGTERM and the terminal closing (SIGHUP): SIGTERM, and SIGKILL to those left after
10s, saying so; a second Ctrl-C kills them at once. At the end it prints every attempt (its
card, tier, estimate, peak, outcome and exit status) and why each failed job failed,
with its trainer's error line; --json the same with every attempt's "exit_code",
"signal", "error" and "command".

A command after -- is a one-off job, as gpuq submit -- takes one (see its help): a sweep
of one job, named after its script or --name (made unique among the sweeps of the
daemon and of the other gpuq runs), with --memory, --host-memory, --gpus-per-job,
--timeout, --priority, --env and --workdir as its sweep's keys. Its trainer's output is
printed on stdout as it runs, attempt after attempt: what its terminal shows, its stdout
and stderr together (it runs in a pseudo-terminal of its own, so progress bars draw as
they would here). gpuq's progress and summary go to stderr. What you type does not reach
it: gpuq attach does.

Each run keeps its attempts in a directory of its own under --log-dir, named for the
sweep and the time it started (<sweep>-20260102-150405; -2 after it for a second run in
that second), so that a run never writes over another's logs: each attempt's rendered
config and log are in <run>/<job>/attempt-<n>/, and <run>/by-name/<sweep>/<name> leads to
a job's by its name. They are readable by you alone (they hold the trainers'
environment); a log begins with the command and environment to rerun the attempt by
hand. A --log-dir that other users may write to, or that is reached through another
user's link, is refused; it is used by its real path.

While it runs, gpuq status, logs, attach, why, top, cancel, hold... reach it from
another terminal as they reach the daemon: it serves them its sweep on a socket in the
state directory (runs/<sweep>.<pid>.sock), found by the job or the sweep they name.

A gpuq run killed outright (kill -9) cannot stop its trainers itself: a small process it
starts, its reaper, then stops every process of its attempts, those in sessions of their
own (setsid, nohup) too.

Exit status: 0 every job succeeded (or was stopped early by the sweep's early_stop), 1
some job failed or was cancelled, 2 bad input, 130 interrupted.`,
		Example: `  gpuq run examples/sweeps/quickstart.yaml
  gpuq run sweep.yaml --gpus 0,1,2,3 --gpu-plan 2,2,1,1 --json > summary.json
  gpuq run --memory 10GiB --gpus 1 -- python3 train.py --lr 1e-4`,
		RunE: func(cmd *cobra.Command, args []string) error {
			files, command, err := commandAfterDash(cmd, args)
			switch {
			case err != nil:
				return err
			case command == nil && len(files) != 1:
				return badInput("name one sweep file, or give a command after --; see gpuq run --help")
			case command == nil && opts.name != "":
				return badInput("--name is for a command after --; a sweep file says name: itself")
			case command == nil:
				if err := notAProgram(files[0], "run"); err != nil {
					return err
				}
				opts.sweep = files[0]
			}
			opts.command = command
			return runRun(opts)
		},
	}
	cmd.Flags().StringVar(&opts.name, "name", "", "with a command after --: its name (default its script's)")
	opts.oneOff.addFlags(cmd.Flags())
	cmd.Flags().BoolVar(&opts.json, "json", false, "print the final summary as JSON on stdout; progress goes to stderr")
	cmd.Flags().StringVar(&opts.logDir, "log-dir", "", "where runs keep their attempts' configs and logs, each run in <sweep>-<time>/ of its own (default runs/ in the state directory: $XDG_STATE_HOME/gpuq/runs, or --state-dir's)")
	cmd.Flags().DurationVar(&opts.poll, "poll", time.Second, "how often the cards are sampled between events")
	return cmd
}

// errInterrupted is returned when Ctrl-C stopped the run.
var errInterrupted = errors.New("interrupted")

// errJobsFailed is returned when the run ended with some job failed or cancelled.
var errJobsFailed = errors.New("some jobs failed or were cancelled")

func runRun(opts *runOptions) error {
	p, err := opts.prepare()
	if opts.reserved != nil {
		defer opts.reserved.Close()
	}
	if err != nil {
		return err
	}
	defer p.inv.Close()
	if out := outsideAfter(p.sweep); len(out) > 0 {
		return badInput("%s", outsideAfterText(p.sweep, out))
	}
	launcher.BecomeSubreaper()
	sw := p.sweep
	if opts.logDir == "" {
		// Beside the run's socket and the record it leaves: a state directory given
		// elsewhere (a scratch disk, away from a home quota) holds the logs too.
		dir, err := opts.settings.stateDir()
		if err != nil {
			return err
		}
		opts.logDir = filepath.Join(dir, "runs")
	}
	// From here on the directory is its real path: a link on the way to it that
	// someone points elsewhere later changes nothing.
	if opts.logDir, err = launcher.ResolveDir(opts.logDir); err != nil {
		return badInput("--log-dir: %v", err)
	}
	if err := launcher.PrivateDir(opts.logDir); err != nil {
		return badInput("--log-dir: %v", err)
	}
	if opts.logDir, err = newRunDir(opts.logDir, sw.Name, time.Now()); err != nil {
		return fmt.Errorf("--log-dir: %w", err)
	}
	if reaper, err := startReaper(opts.logDir); err != nil {
		fmt.Fprintf(opts.io.Err, "gpuq: warning: %v: what a trainer starts in a session of its own may outlive a gpuq run that is killed\n", err)
	} else {
		defer reaper.Close()
	}
	// The run stops once what reads its stdout has gone, as on Ctrl-C (see readerGone).
	stopped, stopRun := context.WithCancel(context.Background())
	defer stopRun()
	defer catchBrokenPipe()()
	// A one-off's stdout is its trainer's output, as if the command ran here: gpuq's
	// progress, a line per event, and the summary go to stderr.
	oneOff := opts.command != nil && !opts.json
	what := "gpuq's output"
	if oneOff {
		what = "the trainer's output"
	}
	stdout := stopWhenReaderGone(opts.io.Out, opts.io.Err, what, stopRun)
	var trainer *oneOffOutput
	// Each is laid out for the terminal it is written to, not stdout's.
	progress, summary := stdout, stdout
	progressWidth, summaryWidth := opts.io.width(), opts.io.width()
	if oneOff {
		trainer = newOneOffOutput(stdout, opts.io.Err)
		progress, summary = opts.io.Err, opts.io.Err
		progressWidth, summaryWidth = opts.io.errWidth(), opts.io.errWidth()
	}
	if opts.json {
		progress, progressWidth = opts.io.Err, opts.io.errWidth()
	}
	if sw.Sharing == plans.MPS {
		stop, err := startMPS(opts, p, progress)
		if err != nil {
			return err
		}
		defer stop()
	}
	ui := newRunUI(progress, isTerminal(progress) && !opts.json && trainer == nil, sw)
	ledger := ""
	if p.inv.Simulated() != "" {
		ledger = opts.settings.ledger()
	}
	r := runner.NewDirect(runner.Options{Dir: opts.logDir, Ledger: ledger})
	var hooks *runner.Hooks // made once the store is, before the first event
	var srv interface{ Event(scheduler.Event) }
	eng, store, err := p.engine(opts.settings, r, opts.poll, func(ev scheduler.Event) {
		ui.event(ev)
		if trainer != nil {
			trainer.event(ev)
		}
		hooks.Event(ev)
		if srv != nil {
			srv.Event(ev)
		}
	})
	if err != nil {
		return err
	}
	ui.store = store
	if trainer != nil {
		trainer.store = store
	}
	stateDir, _ := opts.settings.stateDir() // where the run serves its jobs, for its hooks' gpuq status
	hooks = runner.NewHooks(store, api.GPUsOf(p.cards), stateDir, func(line string) { fmt.Fprintln(opts.io.Err, "gpuq: "+line+" (the sweep goes on)") })
	// Its end notice names a command that lists the jobs once the run has exited too.
	hooks.Run = true
	// Served until the run ends: gpuq status, logs, attach and top reach it.
	if fg := serveRun(opts, p, eng, store); fg != nil {
		defer fg.Close()
		srv = fg
	}
	running := fmt.Sprintf("gpuq: running %s of %s; logs in", plans.Count(len(sw.Jobs), "job"), sw.Name)
	fmt.Fprint(progress, pathLine(running, opts.logDir, progressWidth))

	ctx, stop := context.WithCancel(stopped)
	defer stop()
	ui.start()
	signals := stopOnSignals(ctx, stop, r, ui, opts.io.Err)
	defer signals.release()
	runErr := eng.Run(ctx)
	killed := signals.end()
	ui.stop()
	if trainer != nil {
		trainer.wait()
	}
	// The cards as they are now, for their names and sizes: a card that cannot be read
	// leaves them out, and the report sizes its panel by what was reserved on it.
	cards, _ := p.inv.Read()
	sum := summarize(store, sw, cards)
	hooks.Wait()
	if opts.json {
		if err := writeJSON(opts.io.Out, sum); err != nil {
			return err
		}
	} else {
		printSummary(summary, sum, summaryWidth)
	}
	switch {
	case errors.Is(runErr, context.Canceled):
		var left []string
		for _, j := range sum.Jobs {
			if j.State != string(state.JobSucceeded) && j.State != string(state.JobStopped) {
				left = append(left, j.ID)
			}
		}
		how := "every trainer was stopped"
		if killed {
			how = "every trainer left was killed (SIGKILL)"
		}
		return fmt.Errorf("%w; %s. Not finished: %s", errInterrupted, how, firstOf(left, " "))
	case runErr != nil:
		return runErr
	case sum.Counts[string(state.JobFailed)] > 0 || sum.Counts[string(state.JobCancelled)] > 0:
		// A cancelled job did not succeed either: gpuq run s.yaml && collect.py must
		// not go on without it (gpuq wait says the same).
		return errJobsFailed
	}
	return nil
}

// stopOnSignals stops the run (stop) at the first Ctrl-C (SIGINT), SIGTERM or hangup
// of its terminal (SIGHUP: a trainer that ignores the hangup of its own terminal must
// not live on without gpuq), as the engine does on ctx's end: SIGTERM to every
// trainer, SIGKILL to those left after launcher.GroupGrace. It says so at once on errs,
// above the live table, which shows them as stopping from then on rather than as
// running: without a word, a person looks at trainers that go on "running" for ten
// seconds and presses Ctrl-C again. That second Ctrl-C (or SIGTERM) kills what is
// left at once (see runner.Direct.Kill), as make and docker compose do, and says so;
// the run then ends as soon as they have. A second SIGHUP does not: a shell that
// hangs up passes its own SIGHUP on to gpuq after the terminal's, and a trainer that
// saves a checkpoint on SIGTERM must not be cut short by that. A run stopped otherwise
// (what reads its output went: ctx ended, and readerGone said why) is killed by the
// first Ctrl-C that comes, as by a second. Signals after that, or after the engine
// has returned (end), are caught and do nothing until release, as gpuq run returns:
// the notify hooks it waits for, its summary and the record of its jobs that gpuq
// results reads are still to come, and a Ctrl-C then once killed gpuq before it wrote
// that record.
func stopOnSignals(ctx context.Context, stop context.CancelFunc, r *runner.Direct, ui *runUI, errs io.Writer) *signalStop {
	s := &signalStop{sigs: make(chan os.Signal, 4), ended: make(chan struct{})}
	signal.Notify(s.sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		select {
		case <-s.sigs:
			if n := r.Running(); n > 0 {
				grace := launcher.GroupGrace
				ui.say(errs, fmt.Sprintf("gpuq: stopping %s (SIGTERM; SIGKILL in %s if they have not ended; Ctrl-C again to kill them now)",
					plans.Count(n, "trainer"), plans.FormatDuration(grace)), time.Now().Add(grace))
			}
			stop()
		case <-ctx.Done():
		case <-s.ended:
			return
		}
		for killed := false; ; {
			select {
			case sig := <-s.sigs:
				if sig == syscall.SIGHUP || killed {
					continue
				}
				killed = true
				// None reached: every trainer had ended already, and none was killed.
				if n := r.Kill(); n > 0 {
					s.killed = true
					ui.say(errs, fmt.Sprintf("gpuq: killing %s now (SIGKILL)", plans.Count(n, "trainer")), time.Time{})
				}
			case <-s.ended:
				return
			}
		}
	}()
	return s
}

// signalStop is how a gpuq run's signals stop it (see stopOnSignals).
type signalStop struct {
	sigs   chan os.Signal
	ended  chan struct{}
	wg     sync.WaitGroup
	killed bool // a second Ctrl-C killed the trainers; read after end
}

// end stops acting on signals, once the engine has returned and before the live table
// is drawn for the last time (nothing is said above it after), and reports whether a
// second Ctrl-C killed the trainers. The signals are still caught, and do nothing,
// until release.
func (s *signalStop) end() (killed bool) {
	close(s.ended)
	s.wg.Wait()
	return s.killed
}

// release gives the signals back, as gpuq run returns.
func (s *signalStop) release() { signal.Stop(s.sigs) }

// pathLine is text followed by path, on one line where it fits width (0: any), else
// with the path on a line of its own: a line that the terminal wrapped would break the
// path where it reached the edge, and it would not be copied whole. Only a path wider
// than the terminal is wrapped, by the terminal, which most copy as one line.
func pathLine(text, path string, width int) string {
	if width <= 0 || ansi.StringWidth(text)+1+ansi.StringWidth(path) <= width {
		return text + " " + path + "\n"
	}
	return wrap(text, width, "") + "\n" + path + "\n"
}

// prepare is the run's sweep, from its file or a one-off's command, on the machine, its
// name held for the run (see holdName). A one-off is named as under gpuq submit, made
// unique among the sweeps of the daemon and of the other gpuq runs, which find its jobs
// by its name (see routed).
func (opts *runOptions) prepare() (*prepared, error) {
	if opts.command == nil {
		sw, err := plans.LoadSweep(opts.sweep, opts.settings.runOverrides())
		if err != nil {
			return nil, err
		}
		// Held from before the cards are opened (NVML takes a while): a gpuq wait
		// begun meanwhile waits for this run, not for one of the sweep that ended.
		if err := opts.holdName(sw.Name); err != nil {
			return nil, err
		}
		return prepareSweep(sw, opts.settings, opts.io)
	}
	taken, _ := sweepNames(opts.settings) // where none answers, the run goes on all the same
	name := opts.reserve(cmp.Or(opts.name, oneOffName(opts.command)), taken)
	label := oneOffLabel("run", opts.command)
	sw, _, err := opts.oneOff.sweep(label, name, opts.command, opts.settings.runOverrides())
	if err != nil {
		return nil, err
	}
	p, err := prepareSweep(sw, opts.settings, opts.io)
	if err != nil {
		return nil, flagProblems(err, label) // refused on this machine's cards, as the flags gave it
	}
	return p, nil
}

// reserve is the first name from base on (base, base-2, ...) that is not taken and that
// no other gpuq run starting meanwhile holds, held for this run until it ends. Where
// names cannot be held (no state directory), it is the first not taken.
func (opts *runOptions) reserve(base string, taken map[string]bool) string {
	dir, err := opts.settings.stateDir()
	for {
		name := freeName(base, taken)
		if err != nil {
			return name
		}
		f, ok, err := api.Reserve(dir, name)
		if err != nil || ok {
			opts.reserved = f
			return name
		}
		taken[name] = true
	}
}

// holdName holds the name of a sweep file's run (see api.Reserve) until it ends, and
// refuses one that another gpuq run on the state directory holds: it would run each
// of that sweep's jobs again, beside it, and the verbs could tell neither run apart.
// Where names cannot be held (no state directory), the run goes on.
func (opts *runOptions) holdName(sweep string) error {
	dir, err := opts.settings.stateDir()
	if err != nil {
		return nil
	}
	f, ok, err := api.Reserve(dir, sweep)
	switch {
	case err != nil:
		return nil
	case ok:
		opts.reserved = f
		return nil
	}
	who := "another gpuq run"
	for _, r := range api.Runs(dir) {
		if r.Sweep == sweep {
			who = fmt.Sprintf("a gpuq run (pid %d)", r.PID)
		}
	}
	return badInput("%s runs sweep %s on %s already: this one would run each of its jobs again beside it; gpuq wait --sweep %s waits for that one, or write another name: in the sweep file to run both",
		who, sweep, tildeHome(dir), sweep)
}

// startMPS starts NVIDIA's MPS control daemon for the sweep's jobs (sharing: mps), with
// its directories in the log directory, and gives the trainers the environment that
// reaches it; stop stops it. Simulated cards have no MPS: their jobs share by
// time-slicing, as gpuq says.
func startMPS(opts *runOptions, p *prepared, progress io.Writer) (stop func(), err error) {
	if p.inv.Simulated() != "" {
		fmt.Fprintln(progress, "gpuq: sharing: mps is for real cards; the simulated ones share by time-slicing")
		return func() {}, nil
	}
	m, err := launcher.StartMPS(opts.logDir, os.Getenv("PATH"))
	if err != nil {
		return nil, err
	}
	for _, kv := range m.Env() {
		name, value, _ := strings.Cut(kv, "=")
		p.sweep.Env = append(p.sweep.Env, plans.EnvVar{Name: name, Value: value})
	}
	fmt.Fprintf(progress, "gpuq: started NVIDIA MPS for the sweep's jobs (%s)\n", strings.Join(m.Env(), " "))
	return func() {
		if err := m.Stop(); err != nil {
			fmt.Fprintf(opts.io.Err, "gpuq: warning: %v\n", err)
		}
	}, nil
}

// startReaper starts the process that stops what the attempts under root leave
// running should this gpuq be killed (see launcher.Reaper).
func startReaper(root string) (*launcher.Reaper, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	return launcher.StartReaper([]string{self}, root)
}

// runUI shows progress: a table redrawn in place on a terminal, one line per event
// otherwise.
type runUI struct {
	w     io.Writer
	live  bool
	size  func() (cols, rows int) // the terminal's, read at each redraw: it may change
	store *state.Store
	sweep *plans.Sweep
	mu    sync.Mutex
	lines int
	log   []string
	done  chan struct{}
	wg    sync.WaitGroup
	// The run is stopping (see say): its trainers were sent SIGTERM, and SIGKILL
	// follows at stopAt, or was sent at once (killing).
	stopAt  time.Time
	killing bool
}

// eventLine is an event as the run shows it: "10:04:05 gla.3 #2 gpu-oom: ...".
func eventLine(ev scheduler.Event) string {
	return ev.Time.Format("15:04:05") + " " + ev.Text()
}

// newRunUI returns the progress of a sweep's run; its store is set before it starts.
func newRunUI(w io.Writer, live bool, sw *plans.Sweep) *runUI {
	return &runUI{w: w, live: live, sweep: sw, done: make(chan struct{}), size: func() (int, int) { return termSize(w) }}
}

func (u *runUI) event(ev scheduler.Event) {
	line := eventLine(ev)
	u.mu.Lock()
	defer u.mu.Unlock()
	if !u.live {
		fmt.Fprintln(u.w, line)
		return
	}
	u.log = append(u.log, line)
	if len(u.log) > 6 {
		u.log = u.log[len(u.log)-6:]
	}
}

func (u *runUI) start() {
	if !u.live {
		return
	}
	u.wg.Add(1)
	go func() {
		defer u.wg.Done()
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			u.redraw(time.Now())
			select {
			case <-u.done:
				u.redraw(time.Now())
				return
			case <-tick.C:
			}
		}
	}()
}

func (u *runUI) stop() {
	close(u.done)
	u.wg.Wait()
}

// redraw replaces the last table with a new one. The cursor goes up as many rows as
// the last one took on the screen, so that no line of it is left behind: every line
// fits the terminal's width, and the whole fits its height.
func (u *runUI) redraw(now time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.draw(now)
}

// say writes line on w (gpuq's stderr, which may be the table's terminal) as the run
// stops, above the live table where there is one: the table is cleared first and
// drawn again below the line at once, for a line written where the table is would be
// drawn over at its next redraw, or leave a line of it behind. From then on the table
// counts the running trainers as stopping, with the time left before their SIGKILL
// (kill), or, kill being zero, as being killed.
func (u *runUI) say(w io.Writer, line string, kill time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if kill.IsZero() {
		u.killing = true
	} else {
		u.stopAt = kill
	}
	if u.live && u.lines > 0 {
		fmt.Fprintf(u.w, "\r\x1b[%dA\x1b[J", u.lines)
		u.lines = 0
	}
	fmt.Fprintln(w, line)
	if u.live {
		u.draw(time.Now())
	}
}

// draw is redraw's, with u.mu held.
func (u *runUI) draw(now time.Time) {
	cols, rows := u.size()
	lines := u.frame(now, cols, rows-1) // the cursor's row stays free below
	if u.lines > 0 {
		// To the first column (a ^C echoed where the cursor waits moved it), up over
		// the last table, and clear it.
		fmt.Fprintf(u.w, "\r\x1b[%dA\x1b[J", u.lines)
	}
	u.lines = len(lines)
	fmt.Fprint(u.w, strings.Join(lines, "\n")+"\n")
}

// frame is the table's lines, at most height of at most width cells (0: no limit):
// the running jobs, the latest events (wrapped; the oldest left out where there is no
// room), and counts by state.
func (u *runUI) frame(now time.Time, width, height int) []string {
	view := u.store.View()
	counts := map[string]int{}
	var b strings.Builder
	// Where narrow, the attempt's number and the memory it reserves give way before
	// ids lose their start and names their keys (see top.CutName).
	tw := newFitTable(&b, width, 0, 1).cutStarts(0).cutNames(1).dropping(3, 7)
	fmt.Fprintln(tw, "JOB\tNAME\tGPU\tATTEMPT\tTIER\tDECLARED\tLEARNED\tRESERVED\tPEAK\tELAPSED")
	for _, j := range view.Jobs() {
		counts[string(j.State)]++
		if j.State != state.JobRunning {
			continue
		}
		as := view.Attempts(j.ID)
		a := as[len(as)-1]
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\n", j.ID, j.Name, plans.Cards(a.Worker, a.GPUs), a.N, a.Tier,
			top.Gig(j.Declared), top.Gig(view.Learned(j.Shape)), top.Gig(a.Reserve), top.Gig(a.Peak),
			now.Sub(a.Started).Round(time.Second))
	}
	tw.Flush()
	table := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	room := math.MaxInt
	if height > 0 {
		room = max(height-1, 1) // the counts' line below
	}
	if len(table) > room { // the rows that do not fit, counted on the last
		table = append(table[:room-1], fmt.Sprintf("… %d more running", len(table)-room+1))
	}
	room -= len(table)
	var events []string // the latest that fit, each whole
	for i := len(u.log) - 1; i >= 0; i-- {
		ev := strings.Split(wrap(u.log[i], width-len(eventIndent), eventIndent), "\n")
		if len(ev) > room {
			break
		}
		events, room = append(ev, events...), room-len(ev)
	}
	lines := append(append(table, events...), u.sweep.Name+": "+u.countsText(counts, now))
	for i, l := range lines {
		if width > 0 {
			lines[i] = ansi.Truncate(l, width, "…")
		}
	}
	return lines
}

// countsText is the table's last line, its jobs counted by state; as the run stops,
// its running ones are counted as stopping, with the time left before their SIGKILL
// and how not to wait for it, or as being killed: they do not simply run any more.
func (u *runUI) countsText(counts map[string]int, now time.Time) string {
	n := counts[string(state.JobRunning)]
	if n == 0 || !u.killing && u.stopAt.IsZero() {
		return countsText(counts)
	}
	delete(counts, string(state.JobRunning))
	stopping := fmt.Sprintf("%d being killed (SIGKILL)", n)
	if left := u.stopAt.Sub(now); !u.killing && left > 0 {
		stopping = fmt.Sprintf("%d stopping (SIGTERM; SIGKILL in %s; Ctrl-C again to kill them now)", n, plans.FormatDuration((left + time.Second - 1).Truncate(time.Second)))
	}
	if len(counts) == 0 || countsText(counts) == "no jobs" {
		return stopping
	}
	return stopping + ", " + countsText(counts)
}

// eventIndent puts an event's wrapped lines under its message, past its time.
const eventIndent = "         "

// newRunDir makes the directory where one run keeps its attempts' configs and logs,
// under logDir: <sweep>-<time>, or <sweep>-<time>-2 (and on) where a run of the sweep
// started in that second already, so that no run writes into another's.
func newRunDir(logDir, sweep string, now time.Time) (string, error) {
	base := filepath.Join(logDir, sweep+"-"+now.Format("20060102-150405"))
	for n := 1; ; n++ {
		dir := base
		if n > 1 {
			dir = fmt.Sprintf("%s-%d", base, n)
		}
		err := os.Mkdir(dir, 0o700)
		if !errors.Is(err, fs.ErrExist) {
			return dir, err
		}
	}
}
