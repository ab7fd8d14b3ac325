package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/spf13/viper"

	"github.com/gpuq/gpuq/scheduler/schedtest"
)

// TestOneOffName: a one-off is named after its script, the module python -m runs, or
// its program, as a sweep name.
func TestOneOffName(t *testing.T) {
	for argv, want := range map[string]string{
		"python3 train.py --lr 1e-4":                   "train",
		"torchrun --nproc_per_node 2 src/Fine_Tune.py": "fine_tune",
		"python3 -m pkg.eval_glue --task sst2":         "eval_glue",
		"./run.sh":                                     "run",
		"/usr/bin/My+Tool":                             "my-tool",
		"sh -c echo":                                   "sh",
		"???":                                          "job",
	} {
		if got := oneOffName(strings.Split(argv, " ")); got != want {
			t.Errorf("%q is named %q, want %q", argv, got, want)
		}
	}
}

// TestRunOneOff: gpuq run -- CMD runs the command as written (braces and all), with the
// one-off's flags as its sweep's keys, and prints its output on stdout as if it ran
// here; a setting it cannot use names its flag; those
// flags without a command, a command beside a sweep file, or a program named where a
// sweep file goes, are bad input that says what to write.
func TestRunOneOff(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "show.sh")
	os.WriteFile(script, []byte("echo \"args $* A=$A\"\n"), 0o755)
	out, errOut, code := gpuq(t, "run", "--log-dir", dir, "--gpus", "sim:1x24GiB", "--memory", "2GiB", "--env", "A={x}", "--timeout", "1m", "--workdir", dir,
		"--", "sh", "show.sh", "--lr", "1e-4", `{"a": 1}`)
	if code != exitOK {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "show-*", "by-name", "show", "show", "attempt-1", "log"))
	if len(logs) != 1 {
		t.Fatalf("no log by name under %s:\n%s", dir, errOut)
	}
	log, _ := os.ReadFile(logs[0])
	if !strings.Contains(string(log), `args --lr 1e-4 {"a": 1} A={x}`) {
		t.Errorf("the command did not run as written:\n%s", log)
	}
	// Its stdout is the trainer's output, as if the command ran here; gpuq's progress and
	// summary are on stderr.
	if want := "args --lr 1e-4 {\"a\": 1} A={x}\n"; out != want {
		t.Errorf("stdout is %q, want the trainer's output alone, %q", out, want)
	}
	if !strings.Contains(errOut, "show.1  show  succeeded") || strings.Contains(errOut, "warning") {
		t.Errorf("summary or warnings:\n%s", errOut)
	}
	// Without --memory its estimate is unknown: "-", never "0 B".
	out, errOut, code = gpuq(t, "run", "--log-dir", dir, "--gpus", "sim:1x24GiB", "--", "sh", "-c", "true")
	if code != exitOK || !strings.Contains(out+errOut, "tier 0, no estimate") || strings.Contains(out+errOut, "0 B") {
		t.Errorf("an unknown estimate:\n%s%s", out, errOut)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--memory", "11", "--", "sh", "-c", "true"}, `--memory: "11" has no unit`},
		{[]string{"run", "--timeout", "soon", "--", "sh", "-c", "true"}, `--timeout: "soon" is not a duration`},
		{[]string{"run", "--env", "A", "--", "sh", "-c", "true"}, `--env "A": write KEY=VALUE`},
		{[]string{"run", "--", "no-such-program-here", "x"}, "gpuq run -- no-such-program-here x: no-such-program-here is not on the PATH"},
		{[]string{"run", "--memory", "1GiB", script}, "--memory is for a command after --; a sweep file says memory: itself"},
		{[]string{"run", "--name", "x", script}, "--name is for a command after --"},
		{[]string{"run", script, "--", "sh"}, "give sweep files or a command after --, not both"},
		{[]string{"run", "--"}, "no command after --"},
		{[]string{"run", "sh"}, "sh is no sweep file but a program: to run a command, give it after --: gpuq run -- sh ..."},
		{[]string{"submit", "sh"}, "sh is no sweep file but a program"},
	} {
		_, errOut, code := gpuq(t, tc.args...)
		if code != exitBadInput || !strings.Contains(errOut, tc.want) {
			t.Errorf("gpuq %s: exit %d, %q; want %d and %q", strings.Join(tc.args, " "), code, errOut, exitBadInput, tc.want)
		}
	}
}

// TestOneOffRefusalsNameTheFlags: a one-off that this machine's cards (gpuq run) or
// the daemon's (gpuq submit) refuse is told by the flag that gave the setting at fault,
// not by the sweep key gpuq wrote for it; a sweep file the daemon refuses is still told
// by its file, field and job.
func TestOneOffRefusalsNameTheFlags(t *testing.T) {
	daemonEnv(t)
	refusals := []struct {
		args []string
		want string
	}{
		{[]string{"--memory", "100GiB", "--", "sh", "-c", "true"}, "gpuq: --memory: the estimate 100.00 GiB is larger than every card"},
		{[]string{"--gpus-per-job", "3", "--", "sh", "-c", "true"}, "gpuq: --gpus-per-job: needs 3 cards at once but the sweep has 2"},
	}
	for _, tc := range refusals {
		args := append([]string{"run", "--log-dir", t.TempDir()}, tc.args...)
		if _, errOut, code := cli(t, args...); code != exitBadInput || !strings.Contains(errOut, tc.want) {
			t.Errorf("gpuq %s: exit %d, %q; want %d and %q", strings.Join(args, " "), code, errOut, exitBadInput, tc.want)
		}
	}
	startDaemon(t)
	for _, tc := range refusals {
		args := append([]string{"submit"}, tc.args...)
		if _, errOut, code := cli(t, args...); code != exitBadInput || !strings.Contains(errOut, tc.want) {
			t.Errorf("gpuq %s: exit %d, %q; want %d and %q", strings.Join(args, " "), code, errOut, exitBadInput, tc.want)
		}
	}
	sweep := writeSweep(t, "name: big\ncommand: [sh, -c, 'true']\njobs: [{}]\nmemory: 100GiB\n")
	if _, errOut, code := cli(t, "submit", sweep); code != exitBadInput || !strings.Contains(errOut, sweep+": memory (job big.1): the estimate 100.00 GiB") {
		t.Errorf("gpuq submit %s: exit %d, %q; want it told by file, field and job", sweep, code, errOut)
	}
}

// TestSubmitOneOff: gpuq submit -- CMD sends a one-off to the daemon, named after its
// script (train.py here) and made unique by itself, so that the same command submitted again needs no
// --name and no clean; --name names it, made unique too.
func TestSubmitOneOff(t *testing.T) {
	daemonEnv(t)
	startDaemon(t)
	work := t.TempDir()
	os.WriteFile(filepath.Join(work, "train.py"), nil, 0o644)
	t.Chdir(work)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"submit", "--", "sh", "-c", "echo lr $0", "train.py", "1e-4"}, "submitted train.1: sh -c 'echo lr $0' train.py 1e-4; gpuq logs -f train.1 follows it"},
		{[]string{"submit", "--", "sh", "-c", "echo lr $0", "train.py", "1e-4"}, "submitted train-2.1:"},
		{[]string{"submit", "--name", "lr", "--", "sh", "-c", "echo lr $0", "3e-4"}, "submitted lr.1:"},
		{[]string{"submit", "--name", "lr", "--", "sh", "-c", "echo lr $0", "1e-3"}, "submitted lr-2.1:"},
	} {
		out, errOut, code := cli(t, tc.args...)
		if code != exitOK || !strings.Contains(out, tc.want) {
			t.Fatalf("gpuq %s: exit %d, %q; want %q\n%s", strings.Join(tc.args, " "), code, out, tc.want, errOut)
		}
	}
	schedtest.WaitFor(t, "the four to succeed", func() bool { return countState(listed(t), "succeeded") == 4 })
	if out, _, _ := cli(t, "logs", "lr-2.1"); !strings.Contains(out, "\nlr 1e-3\n") {
		t.Errorf("the log of lr-2.1:\n%s", out)
	}
	if out, _, _ := cli(t, "__complete", "status", "--sweep", "lr"); out != "lr\t1 job\nlr-2\t1 job\n:4\n" {
		t.Errorf("--sweep lr<TAB>: %q", out)
	}
}

// TestOneOffStartsTheOneDaemon: a one-off submitted where no daemon runs starts the
// daemon as a sweep does, on the machine's cards and not the one-off's --gpus, so that
// a one-off for the other card is served beside it; --after runs it after another.
func TestOneOffStartsTheOneDaemon(t *testing.T) {
	daemonEnv(t)
	t.Chdir(t.TempDir())
	_, errOut, code := cli(t, "submit", "--gpus", "1", "--", "sh", "-c", "echo one")
	if code != exitOK || !strings.Contains(errOut, "started a daemon") {
		t.Fatalf("submit --gpus 1 -- ...: exit %d: %s", code, errOut)
	}
	for _, args := range [][]string{
		{"submit", "--gpus", "0", "--", "sh", "-c", "echo two"},
		{"submit", "--after", "sh", "--", "sh", "-c", "echo three"},
	} {
		if _, errOut, code := cli(t, args...); code != exitOK {
			t.Errorf("gpuq %s: exit %d: %s", strings.Join(args, " "), code, errOut)
		}
	}
	schedtest.WaitFor(t, "the three to succeed", func() bool { return countState(listed(t), "succeeded") == 3 })
	want := map[string]struct{ after, card string }{"sh.1": {"[]", "1"}, "sh-2.1": {"[]", "0"}, "sh-3.1": {"[sh]", ""}}
	for _, j := range listed(t) {
		w, ok := want[j.ID]
		after, card := fmt.Sprint(j.After), cardsOf(j.Attempts[0])
		if !ok || after != w.after || w.card != "" && card != w.card {
			t.Errorf("%s: after %s, on card %s; want after %s, on card %q", j.ID, after, card, w.after, w.card)
		}
	}
}

// TestAOneOffsReaderGone: gpuq run -- CMD | head stops the run as Ctrl-C does once head
// has gone, its trainer stopped cleanly and the run's socket removed, rather than
// gpuq being killed by SIGPIPE at its next write to stdout.
func TestAOneOffsReaderGone(t *testing.T) {
	dir := t.TempDir()
	logs := filepath.Join(dir, "logs")
	cmd, stdout, errb := startPiped(t, dir, logs, "run", "--gpus", "sim:1x24GiB", "--log-dir", logs, "--",
		"sh", "-c", "i=0; while :; do i=$((i+1)); echo line $i; sleep 0.05; done")
	lines := bufio.NewScanner(stdout)
	for i := 1; i <= 3; i++ {
		if !lines.Scan() || lines.Text() != fmt.Sprintf("line %d", i) {
			t.Fatalf("line %d of the trainer's output: %q %v\n%s", i, lines.Text(), lines.Err(), errb)
		}
	}
	stdout.Close() // as head does once it has its lines
	wantStoppedForReader(t, cmd, errb, "the trainer's output", dir, logs)
	if !strings.Contains(errb.String(), "cancelled") {
		t.Errorf("the job was not cancelled:\n%s", errb)
	}
}

// wantStoppedForReader checks how a gpuq run started by startPiped ended once what
// read its output (what) had gone: interrupted, saying why, its socket removed and
// nothing of its attempts left.
func wantStoppedForReader(t *testing.T, cmd *exec.Cmd, errb *schedtest.Buffer, what, dir, logs string) {
	t.Helper()
	err := cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != exitInterrupt || !strings.Contains(errb.String(), "what reads "+what+" has ended; stopping the run") {
		t.Errorf("exit %d (%v), want %d:\n%s", code, err, exitInterrupt, errb)
	}
	if socks, _ := filepath.Glob(filepath.Join(dir, "state", "runs", "*.sock")); len(socks) > 0 {
		t.Errorf("the run left its socket: %v", socks)
	}
	schedtest.WaitFor(t, "nothing of the attempts left", func() bool { return len(attemptProcs(logs)) == 0 })
}

// startPiped starts gpuq with args on simulated cards, its state and config in dir and
// its stdout a pipe the test reads, as head would; what a failing test leaves of it and
// of the attempts logged under logs is killed.
func startPiped(t *testing.T, dir, logs string, args ...string) (*exec.Cmd, io.ReadCloser, *schedtest.Buffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), asGPUQ+"=1", "GPUQ_SIM_LEDGER="+filepath.Join(dir, "ledger"), "XDG_CONFIG_HOME="+dir,
		"GPUQ_STATE_DIR="+filepath.Join(dir, "state"))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	errb := &schedtest.Buffer{}
	cmd.Stderr = errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // what a failing test left
		cmd.Process.Kill()
		for _, pid := range attemptProcs(logs) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	return cmd, stdout, errb
}

// TestASweepRunsReaderGone: gpuq run SWEEP | head stops the run as Ctrl-C does once
// head has gone, at gpuq's next line of progress: its trainers stopped cleanly and the
// run's socket removed, rather than gpuq killed by SIGPIPE.
func TestASweepRunsReaderGone(t *testing.T) {
	dir := t.TempDir()
	logs := filepath.Join(dir, "logs")
	sweep := filepath.Join(dir, "piped.yaml")
	// Two that run on and one that ends soon: its end is the line written once head
	// has gone.
	os.WriteFile(sweep, []byte(`name: piped
command: [sh, -c, 'if [ "$0" = 3 ]; then read -r line < "$1"; exit 0; fi; sleep 300', "{seed}", "`+filepath.Join(dir, "go")+`"]
matrix: {seed: [1, 2, 3]}
memory: 2GiB
`), 0o644)
	if err := syscall.Mkfifo(filepath.Join(dir, "go"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd, stdout, errb := startPiped(t, dir, logs, "run", "--gpus", "sim:3x24GiB", "--log-dir", logs, sweep)
	lines := bufio.NewScanner(stdout)
	for started := 0; started < 3; {
		if !lines.Scan() {
			t.Fatalf("gpuq's output ended before the three started: %v\n%s", lines.Err(), errb)
		}
		if strings.Contains(lines.Text(), "started") {
			started++
		}
	}
	stdout.Close() // as head does once it has its lines
	// The third job ends now, and gpuq writes of it.
	fifo, err := os.OpenFile(filepath.Join(dir, "go"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fifo.WriteString("go\n")
	fifo.Close()
	wantStoppedForReader(t, cmd, errb, "gpuq's output", dir, logs)
	if !strings.Contains(errb.String(), "Not finished: piped.1 piped.2") {
		t.Errorf("does not say which jobs did not finish:\n%s", errb)
	}
}

// TestOneOffsStartedTogetherTakeTwoNames: two gpuq runs of one-offs that start at once,
// neither serving its sweep yet, each find "train" free; the first holds it, and the
// second takes train-2. Once the first has ended, its name is free again.
func TestOneOffsStartedTogetherTakeTwoNames(t *testing.T) {
	st := &settings{v: viper.New()}
	st.v.Set(keyStateDir, t.TempDir())
	first, second := &runOptions{settings: st}, &runOptions{settings: st}
	if got := first.reserve("train", map[string]bool{}); got != "train" || first.reserved == nil {
		t.Fatalf("the first run's name: %q", got)
	}
	if got := second.reserve("train", map[string]bool{}); got != "train-2" {
		t.Errorf("the second run's name: %q, want train-2", got)
	}
	first.reserved.Close()
	second.reserved.Close()
	third := &runOptions{settings: st}
	if got := third.reserve("train", map[string]bool{}); got != "train" {
		t.Errorf("a run started once both ended: %q, want train", got)
	}
	third.reserved.Close()
}

// TestOneOffKeepsItsEnvironment: a one-off runs with the environment it was given in,
// where that sets what gpuq sets for a sweep's trainer by default; the rest are gpuq's.
func TestOneOffKeepsItsEnvironment(t *testing.T) {
	t.Setenv("OMP_NUM_THREADS", "8")
	t.Setenv("MKL_NUM_THREADS", "")
	os.Unsetenv("MKL_NUM_THREADS")
	out, errOut, code := gpuq(t, "run", "--log-dir", t.TempDir(), "--gpus", "sim:1x24GiB", "--", "sh", "-c", "echo OMP=$OMP_NUM_THREADS MKL=$MKL_NUM_THREADS")
	if code != exitOK || out != "OMP=8 MKL=1\n" {
		t.Errorf("exit %d: %q, want OMP=8 MKL=1\n%s", code, out, errOut)
	}
}

// TestAOneOffsSummaryFitsStderrsTerminal: a one-off's summary goes to stderr, beside
// its trainer's output on stdout, and is laid out for stderr: on a terminal of 60
// columns it fits them where stdout is a file, and to a file every value is whole where
// stdout is a terminal of 40 columns. It was sized to stdout's terminal: wider than
// stderr's, or cut for a terminal it was not written to.
func TestAOneOffsSummaryFitsStderrsTerminal(t *testing.T) {
	const name = "a-one-off-with-a-rather-long-name"
	for _, tc := range []struct {
		out, err int // the terminal's columns; 0: a file
	}{{0, 60}, {40, 0}} {
		dir := t.TempDir()
		out, outWritten := streamOf(t, tc.out)
		errOut, errWritten := streamOf(t, tc.err)
		code := gpuqTo(t, ioStreams{In: strings.NewReader(""), Out: out, Err: errOut},
			"run", "--log-dir", dir, "--gpus", "sim:1x24GiB", "--memory", "2GiB", "--name", name, "--", "sh", "-c", "echo trained")
		stdout, stderr := outWritten(), errWritten()
		if code != exitOK || strings.TrimSpace(stdout) != "trained" {
			t.Fatalf("stdout on %d columns, stderr on %d: exit %d\n%s%s", tc.out, tc.err, code, stdout, stderr)
		}
		_, summary, ok := strings.Cut(stderr, "\n\nJOB ")
		if !ok {
			t.Fatalf("no summary on stderr:\n%s", stderr)
		}
		summary = "JOB " + summary
		if tc.err > 0 {
			fitsWidth(t, summary, tc.err)
		} else if !strings.Contains(summary, name+".1  "+name+"  succeeded") {
			t.Errorf("to a file, the summary's values are not whole:\n%s", summary)
		}
	}
}

// streamOf is what gpuq writes to in a test: a pseudo-terminal cols wide, or a file
// where cols is 0; written is what it was written, once gpuq is done, with lines ended
// by "\n" (a terminal's "\r\n" undone). It skips the test where there is no
// pseudo-terminal.
func streamOf(t *testing.T, cols int) (f *os.File, written func() string) {
	t.Helper()
	if cols == 0 {
		f, err := os.CreateTemp(t.TempDir(), "stream")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f, func() string {
			b, _ := os.ReadFile(f.Name())
			return string(b)
		}
	}
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	t.Cleanup(func() { ptmx.Close(); tty.Close() })
	if err := pty.Setsize(ptmx, &pty.Winsize{Rows: 24, Cols: uint16(cols)}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var b bytes.Buffer
	done := make(chan struct{})
	go func() { // the terminal's buffer is small: it is read as it is written
		defer close(done)
		buf := make([]byte, 4096)
		for {
			n, err := ptmx.Read(buf)
			mu.Lock()
			b.Write(buf[:n])
			mu.Unlock()
			if err != nil { // EIO once the terminal's side is closed
				return
			}
		}
	}()
	return tty, func() string {
		tty.Close()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
		}
		mu.Lock()
		defer mu.Unlock()
		return strings.ReplaceAll(b.String(), "\r\n", "\n")
	}
}

// TestARunsLogPathStaysWhole: the line a run begins with says where its logs are;
// where the line would be wider than stderr's terminal (80 columns), the path goes on
// a line of its own, whole, so that it can be copied as one, and the line before it
// fits; where it fits (300 columns), or stderr is no terminal, it is one line. At 80
// columns the terminal broke the path in the middle.
func TestARunsLogPathStaysWhole(t *testing.T) {
	const name = "a-one-off-with-a-rather-long-name"
	const running = "gpuq: running 1 job of " + name + "; logs in"
	for _, cols := range []int{80, 300, 0} {
		dir := filepath.Join(t.TempDir(), "logs-with-a-long-directory-name", "for-this-run")
		_, errOut, code := gpuqIn(t, cols, "run", "--log-dir", dir, "--gpus", "sim:1x24GiB", "--name", name, "--", "sh", "-c", "true")
		paths, _ := filepath.Glob(filepath.Join(dir, name+"-*"))
		if code != exitOK || len(paths) != 1 {
			t.Fatalf("at %d columns: exit %d, the run's directories %q:\n%s", cols, code, paths, errOut)
		}
		want := running + "\n" + paths[0] + "\n"
		if cols == 0 || len(running+" "+paths[0]) <= cols {
			want = running + " " + paths[0] + "\n"
		}
		if !strings.Contains(errOut, "\n"+want) {
			t.Errorf("at %d columns, want\n%swhere the run begins:\n%s", cols, want, errOut)
		}
	}
}
