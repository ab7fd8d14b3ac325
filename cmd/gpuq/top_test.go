package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/spf13/viper"

	"github.com/gpuq/gpuq/cmd/gpuq/internal/browser"
	"github.com/gpuq/gpuq/cmd/gpuq/internal/tmux"
	"github.com/gpuq/gpuq/launcher"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/schedtest"
)

// TestTopInTmux drives gpuq top as a person would, in an 80×24 terminal (ssh's
// default), on a daemon running a small simulated sweep: the cards, the running jobs
// with their progress, the queue with its reasons, the events; keys that select, hold,
// show a log, attach and quit. With -update its screen becomes the README's picture.
func TestTopInTmux(t *testing.T) {
	needPython(t)
	dir := daemonEnv(t)
	startDaemon(t)
	trainer, _ := filepath.Abs("../../examples/trainers/simtrain.py")
	sweep := filepath.Join(t.TempDir(), "look.yaml")
	os.WriteFile(sweep, []byte(`name: look
command: [python3, `+trainer+`, --config, "{config}"]
config: {format: json}
params: {batch_size: 16, gradient_accumulation_steps: 2, gradient_checkpointing: false, sim_base: 3GiB, sim_activations: 6GiB, sim_seconds: 300}
matrix:
  task: [rte, sst2, mrpc]
  seed: [1, 2]
  include: [{task: rte, sim_activations: 40GiB}]
memory: 9GiB
gpu_plan: "1"
`), 0o644)
	if out, errOut, code := cli(t, "submit", sweep); code != exitOK {
		t.Fatalf("submit: exit %d: %s %s", code, out, errOut)
	}
	// HOME is the state directory's parent, as ~/.local/state's is: the title says ~/state.
	term := tmux.Start(t, 80, 24, []string{asGPUQ + "=1", "GPUQ_STATE_DIR=" + dir, "HOME=" + filepath.Dir(dir)}, os.Args[0], "top")
	screen := term.WaitFor("both cards busy, a job's progress, the queue's reasons and an OOM", 60*time.Second,
		tmux.Shows("SIMULATED GPUs sim:2x24GiB", "the daemon on ~/state", "GPU 0", "GPU 1", "RUNNING 2", "QUEUE 4", "train: ",
			"no-slot:", "gpu-oom", "q quit"))
	lines := strings.Split(strings.TrimRight(screen, "\n"), "\n")
	if len(lines) != 24 {
		t.Errorf("%d lines on a 24-line terminal", len(lines))
	}
	for i, l := range lines {
		if utf8.RuneCountInString(l) > 80 {
			t.Errorf("line %d is wider than the terminal: %q", i+1, l)
		}
	}

	// Filter down to a queued job and hold it: the daemon holds it and the screen says so.
	term.Keys("/", "look.6", "Enter")
	term.WaitFor("look.6 alone, selected", 10*time.Second, tmux.Shows(">look.6", "filter /look.6"))
	term.Keys("h")
	term.WaitFor("the job held", 10*time.Second, tmux.Shows("held: gpuq release look.6"))
	if out, _, _ := cli(t, "status", "--state", "held"); !strings.Contains(out, "look.6") {
		t.Errorf("the daemon does not hold look.6:\n%s", out)
	}

	// Without the filter, up to the first running job: l shows its log; esc comes back.
	term.Keys("Escape")
	term.WaitFor("the filter gone", 10*time.Second, tmux.Shows("RUNNING 2", "look.1"))
	term.Keys("Up", "Up", "Up", "Up", "Up", "Up")
	term.WaitFor("the first running job selected", 10*time.Second, func(s string) bool {
		return strings.Contains(s, "\n>look.") && strings.Index(s, ">look.") < strings.Index(s, "QUEUE")
	})
	term.Keys("l")
	term.WaitFor("its log", 10*time.Second, tmux.Shows("log of look.", "simtrain:"))
	term.Keys("Escape")
	term.WaitFor("the overview again", 10*time.Second, tmux.Shows("RUNNING 2"))
	if schedtest.Updating() {
		term.WaitFor("the trainers' progress and memory", 60*time.Second, tmux.Shows("%|", "17.0G"))
		screenshot(t, term)
	}

	// a attaches the terminal to the selected trainer; Ctrl-] comes back to top.
	term.Keys("a")
	term.WaitFor("the trainer's own terminal", 20*time.Second, func(s string) bool { return !strings.Contains(s, "RUNNING 2") && strings.Contains(s, "train:") })
	term.Keys("C-]")
	term.WaitFor("top again after detaching", 20*time.Second, tmux.Shows("RUNNING 2", "detached from look."))
	term.Keys("q")
	term.WaitFor("gpuq top to quit", 10*time.Second, func(string) bool { return term.Exited() })
}

// screenshot makes the README's picture of gpuq top from the terminal's screen.
func screenshot(t *testing.T, term *tmux.Session) {
	page := filepath.Join(t.TempDir(), "top.html")
	if err := os.WriteFile(page, []byte(tmux.HTML(term.ScreenANSI())), 0o600); err != nil {
		t.Fatal(err)
	}
	shot := browser.Render(t, page, 700, 460, func(context.Context, *browser.Page) {})
	if err := os.WriteFile(filepath.Join(screenshots, "top.png"), shot, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestTopPlain: with no terminal to draw on (a pipe, a file, cron), gpuq top prints the
// view once as plain text and exits.
func TestTopPlain(t *testing.T) {
	daemonEnv(t)
	startDaemon(t)
	sweep := filepath.Join(t.TempDir(), "p.yaml")
	os.WriteFile(sweep, []byte("name: p\ncommand: [sleep, \"60\"]\nmatrix: {seed: [1, 2, 3]}\nmemory: 1GiB\ngpu_plan: \"1\"\n"), 0o644)
	if _, errOut, code := cli(t, "submit", sweep); code != exitOK {
		t.Fatalf("submit: exit %d: %s", code, errOut)
	}
	var out string
	schedtest.WaitFor(t, "two jobs running", func() bool {
		var code int
		out, _, code = cli(t, "top")
		return code == exitOK && strings.Contains(out, "RUNNING 2")
	})
	for _, want := range []string{"SIMULATED GPUs sim:2x24GiB", "GPU 0", "GPU 1", "p.1 ", "QUEUE 1", "p.3 ", "no-slot", "EVENTS", "p.1 #1 started"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\x1b") {
		t.Errorf("escape codes in plain output: %q", out)
	}
	if _, errOut, code := cli(t, "top", "--every", "0s"); code != exitBadInput {
		t.Errorf("--every 0s: exit %d: %s", code, errOut)
	}
	// --sweep of the daemon's sweep (no gpuq run runs it) shows its jobs; of a sweep
	// the daemon has not, it says so, rather than show the daemon's every job.
	if out, errOut, code := cli(t, "top", "--sweep", "p"); code != exitOK || !strings.Contains(out, "p.1 ") {
		t.Errorf("--sweep p: exit %d: %s%s", code, out, errOut)
	}
	if out, errOut, code := cli(t, "top", "--sweep", "q"); code != exitBadInput || !strings.Contains(errOut, "no gpuq run runs sweep q") || strings.Contains(out, "GPU 0") {
		t.Errorf("--sweep q: exit %d: %s%s", code, out, errOut)
	}
}

// TestTopAttachesWhereItWatches: the gpuq attach that top's a runs reaches the daemon
// top watches: on its state directory, and over the network where top was given
// --server (it was given the state directory alone, and looked for a daemon there).
func TestTopAttachesWhereItWatches(t *testing.T) {
	st := &settings{v: viper.New()}
	st.v.Set(keyStateDir, "/home/u/state")
	args, err := attachArgs(st)
	if err != nil || strings.Join(args, " ") != "--state-dir /home/u/state" {
		t.Errorf("on the machine: %q, %v", args, err)
	}
	st.v.Set(keyServer, "head-node:7070")
	args, err = attachArgs(st)
	if err != nil || strings.Join(args, " ") != "--state-dir /home/u/state --server head-node:7070" {
		t.Errorf("with --server: %q, %v", args, err)
	}
}

// TestTopWaitsForARunStarting: gpuq top --sweep S, where a gpuq run in another terminal
// holds S and serves it not yet (it opens its cards first), waits for it and shows it,
// rather than say that no daemon runs, and send a person to start one, which would not
// run S; where the run does not serve it in time, top says so, and how to see it.
func TestTopWaitsForARunStarting(t *testing.T) {
	dir := daemonEnv(t)
	if _, err := api.MakeStateDir(dir); err != nil {
		t.Fatal(err)
	}
	// The run is this process, in a gpuq run's place: it holds the sweep's name.
	name, ok, err := api.Reserve(dir, "fg")
	if err != nil || !ok {
		t.Fatalf("reserve: %v %v", ok, err)
	}
	defer name.Close()
	limit := runServeLimit
	t.Cleanup(func() { runServeLimit = limit })
	runServeLimit = 100 * time.Millisecond
	_, errOut, code := cli(t, "top", "--sweep", "fg")
	said := fmt.Sprintf("the gpuq run of sweep fg (pid %d) on %s has not served the sweep in 100ms", os.Getpid(), dir)
	if code != exitFailed || !strings.Contains(errOut, said) || !strings.Contains(errOut, "its live table shows the sweep") || strings.Contains(errOut, "gpuq daemon") {
		t.Errorf("top --sweep fg of a run that does not serve it: exit %d, %q; want exit 1 and %q", code, errOut, said)
	}

	runServeLimit = time.Minute
	var out, errb schedtest.Buffer
	done := make(chan int)
	go func() {
		done <- run([]string{"top", "--sweep", "fg"}, ioStreams{In: strings.NewReader(""), Out: &out, Err: &errb})
	}()
	schedtest.WaitFor(t, "top to wait for the run", func() bool { return strings.Contains(errb.String(), "is starting; waiting for it to answer") })
	if err := os.MkdirAll(api.RunsDir(dir), 0o700); err != nil {
		t.Fatal(err)
	}
	ln, err := launcher.ListenUnix(api.RunSocket(dir, "fg", os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/overview", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("{}")) })
	go http.Serve(ln, mux)
	code = <-done
	if title := fmt.Sprintf("gpuq run of fg (pid %d)", os.Getpid()); code != exitOK || !strings.Contains(out.String(), title) {
		t.Errorf("top --sweep fg once the run serves it: exit %d, %s%s; want its view, titled %q", code, out.String(), errb.String(), title)
	}
}

// TestTopWaitingForARunHearsCtrlC: top --sweep S, waiting for a gpuq run of S that is
// starting, looks again every runPoll, not every awaitPoll, and stops waiting as soon
// as the verb's context ends (Ctrl-C), saying why: a pause as long as an hour ends
// with it.
func TestTopWaitingForARunHearsCtrlC(t *testing.T) {
	if runPoll < 10*awaitPoll {
		t.Errorf("runPoll %s: a run that starts is looked for as often as a daemon's socket (%s)", runPoll, awaitPoll)
	}
	dir := t.TempDir()
	if _, err := api.MakeStateDir(dir); err != nil {
		t.Fatal(err)
	}
	name, ok, err := api.Reserve(dir, "fg")
	if err != nil || !ok {
		t.Fatalf("reserve: %v %v", ok, err)
	}
	defer name.Close()
	limit := runServeLimit
	t.Cleanup(func() { runServeLimit = limit })
	runServeLimit = time.Hour

	var notices schedtest.Buffer
	st := &settings{v: viper.New(), notices: &notices}
	ctx, cancel := context.WithCancelCause(context.Background())
	defer st.bind(ctx)()
	paused := make(chan error, 1)
	go func() { paused <- st.pauseFor(time.Hour) }()
	waited := make(chan error, 1)
	go func() {
		_, err := awaitRunOf(st, dir, "fg", nil)
		waited <- err
	}()
	schedtest.WaitFor(t, "top to wait for the run", func() bool { return strings.Contains(notices.String(), "is starting; waiting for it to answer") })
	interrupt := errors.New("interrupted")
	cancel(interrupt)
	for what, ch := range map[string]chan error{"an hour's pause": paused, "the wait for the run": waited} {
		select {
		case err := <-ch:
			if !errors.Is(err, interrupt) {
				t.Errorf("%s ended with %v, want %v", what, err, interrupt)
			}
		case <-time.After(time.Minute):
			t.Fatalf("%s went on after Ctrl-C", what)
		}
	}
}

// TestTopShowsTheEndOfARun: gpuq top --sweep S, watching the gpuq run of S in an 80×24
// terminal until it ends, shows how each job ended (from the record the run left), not
// its last reading's running jobs; says that the run ended, and how its jobs did; and
// quits on q. The run is not called a daemon.
func TestTopShowsTheEndOfARun(t *testing.T) {
	dir := daemonEnv(t)
	gate := filepath.Join(t.TempDir(), "go")
	sweep := writeSweep(t, `name: end
command: [sh, -c, "echo waiting; while [ ! -e `+gate+` ]; do sleep 0.1; done; exit {code}"]
matrix: {code: [0, 3]}
memory: 1GiB
gpus: sim:2x24GiB
`)
	ended := make(chan int, 1)
	go func() {
		_, _, code := cli(t, "run", sweep, "--log-dir", filepath.Join(t.TempDir(), "logs"))
		ended <- code
	}()
	term := tmux.Start(t, 80, 24, []string{asGPUQ + "=1", "GPUQ_STATE_DIR=" + dir}, os.Args[0], "top", "--sweep", "end")
	term.WaitFor("both jobs running", 60*time.Second, tmux.Shows("gpuq run of end", "RUNNING 2", "end.1", "end.2"))
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if code := <-ended; code != exitFailed {
		t.Errorf("gpuq run: exit %d, want %d (a job failed)", code, exitFailed)
	}
	screen := term.WaitFor("how the run's jobs ended", 30*time.Second,
		tmux.Shows("ended ", "the gpuq run of end ended", "1 succeeded, 1 failed, 0 cancelled", "JOBS 2", "succeeded", "exited with status 3",
			// The run's last events, kept in its record as it ended.
			"end.1 #1 succeeded", "end.2 #1 failed"))
	for _, gone := range []string{"RUNNING", "daemon"} {
		if strings.Contains(screen, gone) {
			t.Errorf("%q on the screen of a run that ended:\n%s", gone, screen)
		}
	}
	term.Keys("q")
	term.WaitFor("gpuq top to quit", 10*time.Second, func(string) bool { return term.Exited() })
}
