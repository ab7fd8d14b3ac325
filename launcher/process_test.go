package launcher

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuq/gpuq/plans"
)

// The test binary doubles as the trainer: GPUQ_TEST_HELPER picks what it does.
func TestMain(m *testing.M) {
	if len(os.Args) == 3 && os.Args[1] == SupervisorMode {
		fillDiskAt(os.Getenv(diskFullAt), os.Getenv(diskSteps))
		holdDiskAt(os.Getenv(diskHeldAt))
		if d, err := time.ParseDuration(os.Getenv(aliveEveryIs)); err == nil {
			aliveEvery = d
		}
		if err := Supervise(os.Args[2]); err != nil {
			fmt.Fprintln(os.Stderr, "supervisor:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	switch os.Getenv("GPUQ_TEST_HELPER") {
	case "":
		BecomeSubreaper()
		os.Exit(m.Run())
	case "echo":
		tty, _ := os.Readlink("/proc/self/fd/1")
		fmt.Printf("tty=%v\n", strings.HasPrefix(tty, "/dev/pts/"))
		for i, a := range os.Args[1:] {
			fmt.Printf("arg%d=%s\n", i, a)
		}
		for _, k := range []string{"CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF",
			"TOKENIZERS_PARALLELISM", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "GPUQ_JOB_ID", "GPUQ_JOB_NAME", "GPUQ_ATTEMPT", "GPUQ_TIER",
			"GPUQ_SWEEP", "MASTER_ADDR", "MASTER_PORT", "PET_MASTER_ADDR", "PET_MASTER_PORT", "GPUQ_ATTEMPT_DIR", "RUN_NAME", "KEPT_FROM_PARENT"} {
			fmt.Printf("%s=%s\n", k, os.Getenv(k))
		}
		os.Exit(3)
	case "spawn": // a trainer with DataLoader-like workers that ignore SIGTERM
		for range 2 {
			c := exec.Command(os.Args[0])
			c.Env = append(os.Environ(), "GPUQ_TEST_HELPER=stubborn")
			c.Start()
			fmt.Printf("child=%d\n", c.Process.Pid)
		}
		if os.Getenv("LEAVE") != "" {
			os.Exit(0) // the leader exits and leaves its children running
		}
		time.Sleep(time.Minute)
	case "saver": // a trainer that saves for 2 s when asked to stop, and says so each time
		script := "trap 'echo saving; sleep 2; echo saved; exit 0' TERM; echo ready; while :; do sleep 0.05; done"
		fmt.Println(syscall.Exec("/bin/sh", []string{"sh", "-c", script}, os.Environ()))
		os.Exit(1)
	case "outsider": // a leader that ends when asked to stop, and a worker in a session of its own that saves for 1 s
		worker := `trap 'echo term >> "$GPUQ_ATTEMPT_DIR/worker-terms"; sleep 1; exit 0' TERM; echo ready; while :; do sleep 0.05; done`
		script := "trap 'exit 0' TERM; setsid sh -c '" + strings.ReplaceAll(worker, "'", `'\''`) + "' & wait"
		fmt.Println(syscall.Exec("/bin/sh", []string{"sh", "-c", script}, os.Environ()))
		os.Exit(1)
	case "leaver": // a leader that exits 0 once its worker, in a session of its own, is ready; the worker saves for 2 s
		worker := `trap 'echo term >> "$GPUQ_ATTEMPT_DIR/worker-terms"; sleep 2; echo saved >> "$GPUQ_ATTEMPT_DIR/worker-terms"; exit 0' TERM; ` +
			`touch "$GPUQ_ATTEMPT_DIR/worker-ready"; while :; do sleep 0.05; done`
		script := "setsid sh -c '" + strings.ReplaceAll(worker, "'", `'\''`) + `' & until [ -e "$GPUQ_ATTEMPT_DIR/worker-ready" ]; do sleep 0.05; done; exit 0`
		fmt.Println(syscall.Exec("/bin/sh", []string{"sh", "-c", script}, os.Environ()))
		os.Exit(1)
	case "stubborn":
		signalIgnore()
		time.Sleep(time.Minute)
	case "children": // hasChildren at each stage of a child's life
		fmt.Printf("none=%v\n", hasChildren())
		c := exec.Command("sh", "-c", "read x")
		in, _ := c.StdinPipe()
		c.Start()
		fmt.Printf("running=%v\n", hasChildren())
		in.Close()
		for st, ok := hostProcs.stat(c.Process.Pid); ok && !st.zombie; st, ok = hostProcs.stat(c.Process.Pid) {
			time.Sleep(10 * time.Millisecond)
		}
		fmt.Printf("ended=%v\n", hasChildren())
		st, ok := hostProcs.stat(c.Process.Pid)
		fmt.Printf("unreaped=%v\n", ok && st.zombie)
		c.Wait()
		fmt.Printf("reaped=%v\n", hasChildren())
	}
	os.Exit(0)
}

func signalIgnore() { syscallIgnore(syscall.SIGTERM) }

func testSweep(t *testing.T) *plans.Sweep {
	t.Helper()
	doc := `
name: t
command: ["` + os.Args[0] + `", --config, "{config}", --lr, "{lr}", "{{literal}}"]
config: {format: yaml}
params: {lr: 0.0001, model.hidden: 64}
env: {RUN_NAME: "run-{lr}-{attempt}", PYTORCH_CUDA_ALLOC_CONF: "expandable_segments:False"}
jobs: [{}]
`
	s, err := plans.DecodeSweep(filepath.Join(t.TempDir(), "t.yaml"), []byte(doc), plans.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func startHelper(t *testing.T, mode string, extraEnv ...string) (*Process, string) {
	t.Helper()
	s := testSweep(t)
	dir := t.TempDir()
	a := Attempt{Sweep: s, JobID: "t.1", JobName: "lr=1e-4", N: 2, Tier: 1, Params: s.Jobs[0].Params, Dir: dir, Threads: 3,
		Cards: []plans.Card{{Index: 2}, {Index: 5}}, MasterPort: 29517}
	env := append(os.Environ(), "GPUQ_TEST_HELPER="+mode, "KEPT_FROM_PARENT=yes", "CUDA_VISIBLE_DEVICES=7")
	c, err := Prepare(a, append(env, extraEnv...))
	if err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(dir, "log")
	p, err := Start(c, log, Header(c, a, "32"), nil)
	if err != nil {
		t.Fatal(err)
	}
	return p, log
}

func waitDone(t *testing.T, p *Process) {
	t.Helper()
	select {
	case <-p.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("attempt did not end")
	}
}

func TestChildInPtyGetsArgvAndEnvironment(t *testing.T) {
	p, log := startHelper(t, "echo")
	waitDone(t, p)
	if e := p.Exit(); e.Code != 3 {
		t.Errorf("exit %v, want status 3", e)
	}
	out := strings.ReplaceAll(string(p.Output()), "\r\n", "\n")
	for _, want := range []string{
		"tty=true",
		"arg0=--config", "arg2=--lr", "arg3=0.0001", "arg4={literal}",
		"CUDA_VISIBLE_DEVICES=2,5", "CUDA_DEVICE_ORDER=PCI_BUS_ID",
		"PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False", "PYTORCH_ALLOC_CONF=expandable_segments:False",
		"TOKENIZERS_PARALLELISM=false", "OMP_NUM_THREADS=3", "MKL_NUM_THREADS=3",
		"GPUQ_JOB_ID=t.1", "GPUQ_JOB_NAME=lr=1e-4", "GPUQ_ATTEMPT=2", "GPUQ_TIER=1", "GPUQ_SWEEP=t", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=29517", "PET_MASTER_ADDR=127.0.0.1", "PET_MASTER_PORT=29517",
		"RUN_NAME=run-0.0001-2", "KEPT_FROM_PARENT=yes", "GPUQ_ATTEMPT_DIR=" + filepath.Dir(log),
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	cfgLine := regexpFind(out, `arg1=(\S+)`)
	cfg, err := os.ReadFile(cfgLine)
	if err != nil || string(cfg) != "lr: 0.0001\nmodel:\n    hidden: 64\n" {
		t.Errorf("rendered config %s: %q %v", cfgLine, cfg, err)
	}
	logText, _ := os.ReadFile(log)
	header, _, _ := strings.Cut(string(logText), "\n\n")
	seen := map[string]bool{}
	for _, line := range strings.Split(header, "\n") {
		if k, _, ok := strings.Cut(strings.TrimSpace(line), "="); ok && !strings.Contains(k, " ") {
			if seen[k] {
				t.Errorf("the rerun line sets %s twice:\n%s", k, header)
			}
			seen[k] = true
		}
	}
	if !strings.Contains(header, "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False \\") {
		t.Errorf("the rerun line lacks the sweep's PYTORCH_CUDA_ALLOC_CONF:\n%s", header)
	}
	if strings.Contains(string(logText), "\r") {
		t.Errorf("the log keeps the pty's \\r\\n:\n%q", logText)
	}
	for _, want := range []string{"# gpuq attempt 2 of job t.1 (lr=1e-4), tier 1, cards 2 5, effective batch 32", "  CUDA_VISIBLE_DEVICES=2,5 \\", "RUN_NAME=run-0.0001-2", "gpuq: exited with status 3"} {
		if !strings.Contains(string(logText), want) {
			t.Errorf("log lacks %q:\n%s", want, logText)
		}
	}
}

func TestCancelLeavesNoSurvivor(t *testing.T) {
	old := GroupGrace
	GroupGrace = 300 * time.Millisecond
	defer func() { GroupGrace = old }()
	p, _ := startHelper(t, "spawn")
	children := waitChildren(t, p)
	p.Stop(GroupGrace)
	waitDone(t, p)
	if !p.Exit().Cancelled {
		t.Errorf("exit %+v not marked cancelled", p.Exit())
	}
	assertGone(t, append(children, p.PID()))
}

// TestAStopAskedTwiceSignalsOnce: a trainer asked to stop gets SIGTERM once, though it
// is both in its group and marked as the attempt's, and however often it is asked (its
// lease lapsed, then a person cancelled): a second would run its handler again and
// kill what the first started in the group, its save (the sleep here), which a
// worker's test once saw as a trainer that never saved.
func TestAStopAskedTwiceSignalsOnce(t *testing.T) {
	p, _ := startHelper(t, "saver")
	waitOutput(t, p, "ready")
	p.Stop(time.Minute)
	waitOutput(t, p, "saving")
	p.Stop(time.Minute)
	waitDone(t, p)
	out := string(p.Output())
	if n := strings.Count(out, "saving"); n != 1 || !strings.Contains(out, "saved") || p.Exit().Code != 0 || !p.Exit().Cancelled {
		t.Errorf("asked to save %d times, exited %v (cancelled: %v); want once, saved, status 0 and cancelled:\n%s", n, p.Exit(), p.Exit().Cancelled, out)
	}
}

// TestAWorkerOutsideTheGroupIsAskedToStopOnce: a process of the attempt in a session of
// its own (torchrun's worker) is sent SIGTERM by the Stop, and not again when its
// leader, stopped too, exits before it: it saves once, to the end.
func TestAWorkerOutsideTheGroupIsAskedToStopOnce(t *testing.T) {
	p, log := startHelper(t, "outsider")
	waitOutput(t, p, "ready")
	p.Stop(time.Minute)
	waitDone(t, p)
	terms, err := os.ReadFile(filepath.Join(filepath.Dir(log), "worker-terms"))
	if string(terms) != "term\n" {
		t.Errorf("the worker was asked to stop %d times (%v), want once", strings.Count(string(terms), "term"), err)
	}
}

// TestAStopWhileTheRestStopsSendsNoSecondTerm: a trainer that exited 0 leaves a
// worker that gpuq stops; a Stop that comes while the worker saves (a cancel heard
// just then) sends it no second SIGTERM, and the attempt, which finished, is not a
// cancelled one.
func TestAStopWhileTheRestStopsSendsNoSecondTerm(t *testing.T) {
	p, log := startHelper(t, "leaver")
	terms := filepath.Join(filepath.Dir(log), "worker-terms")
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if b, _ := os.ReadFile(terms); strings.Contains(string(b), "term") {
			break // stopRest's SIGTERM: the worker saves
		}
		if time.Now().After(deadline) {
			t.Fatal("the worker was never asked to stop after its leader exited")
		}
	}
	p.Stop(time.Minute)
	waitDone(t, p)
	if b, err := os.ReadFile(terms); string(b) != "term\nsaved\n" {
		t.Errorf("the worker's stops: %q (%v), want one term and its save", b, err)
	}
	if e := p.Exit(); e.Code != 0 || e.Cancelled {
		t.Errorf("exit %+v, want a success, not cancelled", e)
	}
}

func TestLeaderExitStopsWhatItLeft(t *testing.T) {
	old := GroupGrace
	GroupGrace = 300 * time.Millisecond
	defer func() { GroupGrace = old }()
	p, _ := startHelper(t, "spawn", "LEAVE=1")
	waitDone(t, p)
	children := pidsIn(string(p.Output()))
	if len(children) != 2 {
		t.Fatalf("children: %v in %q", children, p.Output())
	}
	assertGone(t, children)
}

// TestAProcessIsLeftUntilItIsGone: a process of the attempt that left its group, once
// seen, is left until /proc has it no more, whatever its environment reads meanwhile: an
// exiting process's (its memory released, its files, a card's, still open) reads
// empty, and an orphan's parent (gpuq) does not speak for it. A zombie that gpuq could
// not reap is another's (init's, another subreaper's) to reap, and holds nothing: it is
// gone, or a reaper that is not its parent would wait for it for ever. Pids above any
// pid_max keep wait4 off real processes.
func TestAProcessIsLeftUntilItIsGone(t *testing.T) {
	const dir, pid = "/state/attempts/t.1/attempt-2", 1 << 23
	for _, tt := range []struct {
		name  string
		procs []fakeProc
		left  bool
	}{
		{"running", []fakeProc{{pid: pid, ppid: 90, sid: pid, state: "S", environ: env(attemptDirVar + "=" + dir)}}, true},
		{"exiting", []fakeProc{{pid: pid, ppid: 90, sid: pid, state: "R", environ: env()}}, true},
		{"exiting, unreadable", []fakeProc{{pid: pid, ppid: 90, sid: pid, state: "D"}}, true},
		{"a zombie not gpuq's to reap", []fakeProc{{pid: pid, ppid: 90, sid: pid, state: "Z", environ: env()}}, false},
		{"gone", nil, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := remains{mark: attemptMark(dir), fs: writeProcs(t, append(tt.procs, fakeProc{pid: 90, ppid: 1, sid: 90, state: "S", environ: env("HOME=/root")}))}
			seen := map[int]bool{pid: true}
			if got := r.left(seen); got != tt.left || seen[pid] != tt.left {
				t.Errorf("left %v, seen %v; want %v", got, seen, tt.left)
			}
		})
	}
}

// TestASignalReachesEachProcessOnce: the processes signalled one by one are those of the
// attempt that a signal to its group misses, or may (its group unread); one in the
// group, signalled both ways, would run its SIGTERM handler twice.
func TestASignalReachesEachProcessOnce(t *testing.T) {
	const dir = "/state/attempts/t.1/attempt-1"
	marked := env(attemptDirVar + "=" + dir)
	fs := writeProcs(t, []fakeProc{
		{pid: 90, ppid: 1, sid: 90, state: "S", environ: env("HOME=/root")},
		{pid: 100, ppid: 90, sid: 100, state: "S", environ: marked},             // the leader
		{pid: 101, ppid: 100, sid: 100, state: "S", environ: marked},            // a DataLoader worker
		{pid: 102, ppid: 100, sid: 102, state: "S", environ: marked},            // torchrun's worker, in a session of its own
		{pid: 103, ppid: 100, sid: 100, pgrp: 103, state: "S", environ: marked}, // a shell's job
		{pid: 104, ppid: 90, sid: 104, state: "S", environ: env(attemptDirVar + "=/state/attempts/t.2/attempt-1")},
		{pid: 105, ppid: 100, sid: 100, state: "S", environ: marked}, // its stat unreadable below
	})
	if err := os.Remove(filepath.Join(string(fs), "105", "stat")); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		pgid int
		want []int
	}{{100, []int{102, 103, 105}}, {0, []int{100, 101, 102, 103, 105}}} {
		r := remains{pgid: tt.pgid, mark: attemptMark(dir), fs: fs}
		got := r.outsiders()
		slices.Sort(got)
		if !slices.Equal(got, tt.want) {
			t.Errorf("group %d: signalled one by one %v, want %v", tt.pgid, got, tt.want)
		}
	}
}

// waitOutput waits until the attempt has said what.
func waitOutput(t *testing.T, p *Process, what string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if strings.Contains(string(p.Output()), what) {
			return
		}
	}
	t.Fatalf("the attempt never said %q: %q", what, p.Output())
}

func waitChildren(t *testing.T, p *Process) []int {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if pids := pidsIn(string(p.Output())); len(pids) == 2 {
			return pids
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("children never started: %q", p.Output())
	return nil
}

func pidsIn(out string) []int {
	var pids []int
	for _, f := range strings.Fields(out) {
		if v, ok := strings.CutPrefix(f, "child="); ok {
			if pid, err := strconv.Atoi(v); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// assertGone: no process left, not even a zombie.
func assertGone(t *testing.T, pids []int) {
	t.Helper()
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
			t.Errorf("process %d survived: %s", pid, stat)
		}
	}
}

func TestHostMemory(t *testing.T) {
	total, avail, err := HostMemory()
	if err != nil || total <= 0 || avail <= 0 || avail > total {
		t.Errorf("HostMemory() = %d, %d, %v", total, avail, err)
	}
}

// TestEveryJobGetsARendezvousPort: torchrun binds its port even for one worker, so every
// attempt, one card or several, gets a free port of its own under both names torch reads.
func TestEveryJobGetsARendezvousPort(t *testing.T) {
	s := testSweep(t)
	c, err := Prepare(Attempt{Sweep: s, JobID: "t.1", N: 1, Params: s.Jobs[0].Params, Dir: t.TempDir(), Cards: []plans.Card{{Index: 0}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	port := envValue(c.Env, "MASTER_PORT")
	if n, err := strconv.Atoi(port); err != nil || n <= 0 || envValue(c.Env, "PET_MASTER_PORT") != port ||
		envValue(c.Env, "MASTER_ADDR") != "127.0.0.1" || envValue(c.Env, "PET_MASTER_ADDR") != "127.0.0.1" {
		t.Errorf("env: %v", c.Set)
	}
}

// fullLog is a log on a full disk.
type fullLog struct{}

func (fullLog) Write([]byte) (int, error) { return 0, syscall.ENOSPC }

// TestAFullLogDiskKeepsTheOOMText: output the log cannot take still reaches the ring
// from which the attempt's end is classified, and attach's live view, so that a real
// CUDA OOM on a full log disk is still an OOM.
func TestAFullLogDiskKeepsTheOOMText(t *testing.T) {
	text, err := os.ReadFile("testdata/oom/torch-2.5.txt")
	if err != nil {
		t.Fatal(err)
	}
	ring, live := NewRing(64<<10), &strings.Builder{}
	lost, err := tee(strings.NewReader(string(text)), fullLog{}, ring, live)
	if lost != int64(len(text)) || !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("tee says the log lost %d bytes (%v); want %d, no space left", lost, err, len(text))
	}
	if out, _ := Classify(Exit{Code: 1}, ring.Bytes()); out != plans.GPUOOM || live.String() != string(text) {
		t.Errorf("classified %s from what the ring kept, live view %d bytes; want gpu-oom, all %d", out, live.Len(), len(text))
	}
}

// TestMeminfoField: a field of /proc/meminfo or smaps_rollup is read by its whole key,
// in bytes where given in kB, and not read where its number is not one.
func TestMeminfoField(t *testing.T) {
	data := []byte("MemTotal:       24608284 kB\nMemFree:  1 kB\nPss_Anon:\t7 kB\nEmpty:\nPss:                 123 kB\nHugePages_Total:       0\nBad:  x kB\nEmpty: 5 kB")
	for _, tt := range []struct {
		key  string
		want int64
		ok   bool
	}{
		{"MemTotal:", 24608284 << 10, true},
		{"Pss:", 123 << 10, true}, // not Pss_Anon's
		{"Pss_Anon:", 7 << 10, true},
		{"HugePages_Total:", 0, true}, // a count, no unit
		{"MemAvailable:", 0, false},
		{"Mem", 0, false}, // no key is a prefix of another's
		{"Bad:", 0, false},
		{"Empty:", 5 << 10, true}, // the line with a value, the last without a newline
	} {
		if got, ok := meminfoField(data, tt.key); got != tt.want || ok != tt.ok {
			t.Errorf("meminfoField(%q) = %d, %v; want %d, %v", tt.key, got, ok, tt.want, tt.ok)
		}
	}
	if n := testing.AllocsPerRun(100, func() { meminfoField(data, "Pss:") }); n != 0 {
		t.Errorf("meminfoField allocates %.0f times a call; want none (the daemon reads every trainer's every round)", n)
	}
}

// TestHostMemoryWithoutAFreeDescriptor: a daemon whose descriptors have all been taken
// (a flood of connections) still reads the host's memory each round, rather than stop.
func TestHostMemoryWithoutAFreeDescriptor(t *testing.T) {
	if _, _, err := HostMemory(); err != nil {
		t.Fatal(err)
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	none := lim
	none.Cur = 0 // no descriptor may be opened
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &none); err != nil {
		t.Fatal(err)
	}
	_, err := os.Open("/proc/meminfo")
	total, avail, merr := HostMemory()
	syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	if !errors.Is(err, syscall.EMFILE) {
		t.Fatalf("open with no descriptor free: %v; want EMFILE", err)
	}
	if merr != nil || total <= 0 || avail <= 0 {
		t.Errorf("HostMemory() with no descriptor free = %d, %d, %v", total, avail, merr)
	}
}

// TestHasChildren: a process tells whether it has a child, running or ended and not yet
// reaped, without reaping it; so that a supervisor whose trainer left nothing reads
// nothing of /proc to find what is left.
func TestHasChildren(t *testing.T) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "GPUQ_TEST_HELPER=children")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	want := "none=false\nrunning=true\nended=true\nunreaped=true\nreaped=false\n"
	if string(out) != want {
		t.Errorf("got\n%swant\n%s", out, want)
	}
}

// TestAPlaceholderReachesIntoAMappingParameter: {training.batch_size} in the command is
// the batch of params {training: {batch_size: ...}}, at the tier the attempt runs.
func TestAPlaceholderReachesIntoAMappingParameter(t *testing.T) {
	s, err := plans.DecodeSweep("m.yaml", []byte("name: m\ncommand: [train, --batch, \"{training.batch_size}\"]\n"+
		"params: {training: {batch_size: 32, gradient_accumulation_steps: 1}}\njobs: [{}]\n"), plans.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	j := s.Jobs[0]
	tiers := plans.Tiers(j.Params, j.Ladder)
	want := map[int]string{0: "32"}
	for _, tier := range tiers {
		if slices.Contains(tier.Changed, "training.batch_size") {
			want[tier.N] = "16"
			break
		}
	}
	if len(want) != 2 {
		t.Fatalf("no tier halves training.batch_size: %d tiers", len(tiers))
	}
	for n, batch := range want {
		c, err := Prepare(Attempt{Sweep: s, JobID: "m.1", N: 1, Tier: n, Params: tiers[n].Params, Dir: t.TempDir(), Cards: []plans.Card{{Index: 0}}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(c.Argv, " "); got != "train --batch "+batch {
			t.Errorf("tier %d: argv %q, want batch %s", n, got, batch)
		}
	}
}

// TestAMappingPlaceholderIsWhatTheConfigHolds: {training}, a mapping parameter used
// whole, is the training section the trainer's config has: the base's keys (lr) and
// the parameters the ladder sets under it (training.gradient_accumulation_steps,
// taken from the base) merged in.
func TestAMappingPlaceholderIsWhatTheConfigHolds(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "base.yaml"), []byte("training: {batch_size: 8, gradient_accumulation_steps: 1, lr: 0.1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := plans.DecodeSweep(filepath.Join(dir, "m.yaml"), []byte("name: m\ncommand: [train, --config, \"{config}\", --training, \"{training}\"]\n"+
		"config: {base: base.yaml}\nparams: {training: {batch_size: 32}}\njobs: [{}]\n"), plans.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	j := s.Jobs[0]
	tiers := plans.Tiers(j.Params, j.Ladder)
	for n, want := range map[int]string{0: `{"batch_size":32,"gradient_accumulation_steps":1,"lr":0.1}`, 1: `{"batch_size":16,"gradient_accumulation_steps":2,"lr":0.1}`} {
		c, err := Prepare(Attempt{Sweep: s, JobID: "m.1", N: 1, Tier: n, Params: tiers[n].Params, Dir: t.TempDir(), Cards: []plans.Card{{Index: 0}}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Argv[len(c.Argv)-1]; got != want {
			t.Errorf("tier %d: {training} is %s, the config's %s", n, got, want)
		}
	}
}

// TestTheProgramIsFoundOnTheTrainersPath: a command's program named without a path is
// looked for on the PATH of the environment the trainer gets (the one its sweep was
// submitted from, checked then), not on the PATH of the daemon or supervisor that
// starts it: another python there, or none.
func TestTheProgramIsFoundOnTheTrainersPath(t *testing.T) {
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "gpuq-test-trainer"), []byte("#!/bin/sh\necho found on the trainers PATH\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	c := Command{Argv: []string{"gpuq-test-trainer"}, Dir: dir, Env: []string{"PATH=" + bin + ":/usr/bin:/bin"}}
	p, err := Start(c, filepath.Join(dir, "log"), "", nil)
	if err != nil {
		t.Fatalf("a program on the trainer's PATH, not on this process's: %v", err)
	}
	waitDone(t, p)
	if e := p.Exit(); e.Code != 0 || !strings.Contains(string(p.Output()), "found on the trainers PATH") {
		t.Errorf("exit %v, output %q", e, p.Output())
	}
	// One on this process's PATH alone is not the trainer's.
	c.Argv, c.Env = []string{"sh", "-c", "true"}, []string{"PATH=" + bin}
	if _, err := Start(c, filepath.Join(dir, "log2"), "", nil); !errors.Is(err, exec.ErrNotFound) {
		t.Errorf("sh, not on the trainer's PATH: %v, want not found", err)
	}
}
