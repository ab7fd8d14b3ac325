package launcher

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/gpuq/gpuq/plans"
	"golang.org/x/sys/unix"
)

// fakeProc is one process of a fake /proc tree.
type fakeProc struct {
	pid, ppid, sid int
	pgrp           int // 0: sid, the session leader's group
	state          string
	environ        *string // nil: unreadable
	pssKiB         int     // 0: no smaps_rollup
	rssPages       int
}

// writeProcs writes a fake /proc of procs, with each one's children listed as the
// kernel lists them (task/TID/children) if children is set.
func writeProcs(t *testing.T, procs []fakeProc, children ...bool) procFS {
	t.Helper()
	root := t.TempDir()
	if len(children) > 0 && children[0] {
		kids := map[int]string{}
		for _, p := range procs {
			kids[p.ppid] += fmt.Sprint(p.pid, " ")
		}
		for _, p := range procs {
			dir := filepath.Join(root, fmt.Sprint(p.pid), "task", fmt.Sprint(p.pid))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "children"), []byte(kids[p.pid]), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, p := range procs {
		dir := filepath.Join(root, fmt.Sprint(p.pid))
		must := func(err error) {
			if err != nil {
				t.Fatal(err)
			}
		}
		must(os.MkdirAll(dir, 0o755))
		// A command name with spaces and parentheses, as stat(5) allows.
		pgrp := p.pgrp
		if pgrp == 0 {
			pgrp = p.sid
		}
		stat := fmt.Sprintf("%d (py (worker) 1) %s %d %d %d 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 100 1000 %d 18446744073709551615\n",
			p.pid, p.state, p.ppid, pgrp, p.sid, p.rssPages)
		must(os.WriteFile(filepath.Join(dir, "stat"), []byte(stat), 0o644))
		if p.environ != nil {
			must(os.WriteFile(filepath.Join(dir, "environ"), []byte(*p.environ), 0o644))
		}
		if p.pssKiB > 0 {
			must(os.WriteFile(filepath.Join(dir, "smaps_rollup"), fmt.Appendf(nil, "Rss:  %d kB\nPss:  %d kB\n", 2*p.pssKiB, p.pssKiB), 0o644))
		}
	}
	os.MkdirAll(filepath.Join(root, "self"), 0o755) // not a process
	return procFS(root)
}

func env(kv ...string) *string {
	s := ""
	for _, e := range kv {
		s += e + "\x00"
	}
	return &s
}

// ownedTree is a torchrun-like tree of processes: gpuq (pid 90) and its attempts'
// processes under it, and others under init.
func ownedTree() []fakeProc {
	mine := attemptDirVar + "=/state/attempts/t.1/attempt-2"
	return []fakeProc{
		{pid: 1, ppid: 0, sid: 1, state: "S", environ: env("HOME=/")},
		{pid: 90, ppid: 1, sid: 90, state: "S", environ: env("HOME=/root")}, // gpuq
		{pid: 100, ppid: 90, sid: 100, state: "S", environ: env("PATH=/bin", "GPUQ_JOB_ID=t.1", "GPUQ_ATTEMPT=2", mine), pssKiB: 1000},
		{pid: 200, ppid: 100, sid: 200, state: "S", environ: env(mine, "LOCAL_RANK=0"), pssKiB: 3000},              // a worker in a new session
		{pid: 300, ppid: 200, sid: 200, state: "R", pssKiB: 500},                                                   // environment unreadable
		{pid: 310, ppid: 200, sid: 200, state: "Z", environ: env()},                                                // a zombie: empty environ
		{pid: 320, ppid: 90, sid: 320, state: "S", environ: env(mine), rssPages: 10},                               // no smaps_rollup: RSS
		{pid: 330, ppid: 320, sid: 320, state: "S", environ: env("PATH=/bin"), pssKiB: 100},                        // started with a clean environment
		{pid: 400, ppid: 1, sid: 400, state: "S", environ: env("GPUQ_JOB_ID=t.1", "GPUQ_ATTEMPT=2"), pssKiB: 7000}, // not ours
		{pid: 500, ppid: 1, sid: 500, state: "S", pssKiB: 9000},                                                    // unreadable, under init
		{pid: 600, ppid: 1, sid: 600, state: "S", environ: env(attemptDirVar + "=/other/t.1/attempt-2"), pssKiB: 11000},
		{pid: 700, ppid: 90, sid: 700, state: "S", environ: env(attemptDirVar + "=/state/attempts/t.2/attempt-1"), pssKiB: 64},
		{pid: 800, ppid: 1, sid: 800, state: "S", environ: env(mine), pssKiB: 13000}, // the mark, not under gpuq
	}
}

// TestOwnerByInheritance: the attempt's processes are told by GPUQ_ATTEMPT_DIR, in
// whatever session; one whose environment cannot be read by its parent's; another
// gpuq's attempt of the same job is not this one's.
func TestOwnerByInheritance(t *testing.T) {
	root := "/state/attempts"
	fs := writeProcs(t, ownedTree())
	for _, tt := range []struct {
		pid  int
		want string
	}{
		{100, "t.1/2"}, {200, "t.1/2"}, {300, "t.1/2"}, {310, "t.1/2"}, {320, "t.1/2"}, {330, "t.1/2"},
		{400, ""}, {500, ""}, {600, ""}, {700, "t.2/1"}, {800, "t.1/2"}, {90, ""}, {1, ""}, {4242, ""},
	} {
		got := ""
		if dir, ok := fs.owner(tt.pid, attemptDirVar, nil); ok {
			got, _ = attemptIn(root, dir)
		}
		if got != tt.want {
			t.Errorf("pid %d: owner %q, want %q", tt.pid, got, tt.want)
		}
	}
}

// TestOnlyTheProcessesUnderGpuqAreRead: an attempt's memory and its processes are
// found among the processes under gpuq (a subreaper, whose descendants all its
// attempts' processes are), whether the kernel lists children or every process's
// parent is read: a process with the attempt's mark elsewhere (800, under init) is not
// read, nor counted; with no process to look under, every one is.
func TestOnlyTheProcessesUnderGpuqAreRead(t *testing.T) {
	root := "/state/attempts"
	page := int64(os.Getpagesize())
	for _, children := range []bool{true, false} {
		fs := writeProcs(t, ownedTree(), children)
		if got := sorted(fs.descendants(90)); fmt.Sprint(got) != "[100 200 300 310 320 330 700]" {
			t.Errorf("children listed %v: under gpuq %v", children, got)
		}
		want := map[string]int64{"t.1/2": (1000+3000+500+100)<<10 + 10*page, "t.2/1": 64 << 10}
		got := fs.memory(root, []int{90})
		if len(got) != len(want) || got["t.1/2"] != want["t.1/2"] || got["t.2/1"] != want["t.2/1"] {
			t.Errorf("children listed %v: memory %v, want %v", children, got, want)
		}
		if got := fs.memory(root, nil); len(got) != 0 {
			t.Errorf("children listed %v: memory under nothing %v", children, got)
		}
		mark := attemptMark("/state/attempts/t.1/attempt-2")
		if m := sorted(fs.members(mark, 90)); fmt.Sprint(m) != "[100 200 300 310 320 330]" {
			t.Errorf("children listed %v: members under gpuq %v", children, m)
		}
		if m := sorted(fs.members(mark, 0)); fmt.Sprint(m) != "[100 200 300 310 320 330 800]" {
			t.Errorf("children listed %v: members anywhere %v", children, m)
		}
	}
}

// TestAGoneProcessHasNothingUnderIt: the processes under one that has ended are none,
// found without reading every process's parent (as where the kernel lists no children),
// which would find a process that still names it; a zombie's are its children's, none.
func TestAGoneProcessHasNothingUnderIt(t *testing.T) {
	procs := append(ownedTree(), fakeProc{pid: 900, ppid: 4242, sid: 900, state: "S"})
	fs := writeProcs(t, procs, true)
	if got := fs.descendants(4242); len(got) != 0 {
		t.Errorf("under a process that is gone: %v", got)
	}
	if got := fs.descendants(310); len(got) != 0 {
		t.Errorf("under a zombie: %v", got)
	}
}

func sorted(pids []int) []int {
	slices.Sort(pids)
	return pids
}

// TestOwnersKeepWhatTheyFound: a process is read once; one that took its pid after it
// (another start time) is read anew.
func TestOwnersKeepWhatTheyFound(t *testing.T) {
	procs := ownedTree()
	fs := writeProcs(t, procs)
	o := &Owners{root: "/state/attempts", fs: fs, known: map[Proc]owner{}}
	for _, pid := range []int{200, 400} {
		if a, _ := o.Of(pid); a != map[int]string{200: "t.1/2", 400: ""}[pid] {
			t.Fatalf("pid %d: %q", pid, a)
		}
	}
	// 200 says it is another attempt's now, and 400 this one's: read once, they are
	// what they were.
	other := env(attemptDirVar + "=/state/attempts/t.9/attempt-1")
	for _, pid := range []int{200, 400} {
		if err := os.WriteFile(fs.path(pid, "environ"), []byte(*other), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if a, _ := o.Of(200); a != "t.1/2" {
		t.Errorf("pid 200 read again: %q", a)
	}
	// A new process 200, started later.
	stat, _ := os.ReadFile(fs.path(200, "stat"))
	if err := os.WriteFile(fs.path(200, "stat"), []byte(strings.Replace(string(stat), " 100 1000 ", " 900 1000 ", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if a, _ := o.Of(200); a != "t.9/1" {
		t.Errorf("a new process 200: %q, want t.9/1", a)
	}
	if a, ok := o.Of(4242); ok {
		t.Errorf("no process 4242: %q", a)
	}
}

// TestOwnersTellAnotherGPUQsTrainer: a process of an attempt laid out under another
// root (another daemon's, a gpuq run's) is no attempt of these owners, and is a
// trainer; a process that names no attempt is neither.
func TestOwnersTellAnotherGPUQsTrainer(t *testing.T) {
	o := &Owners{root: "/elsewhere/attempts", fs: writeProcs(t, ownedTree()), known: map[Proc]owner{}}
	for _, tc := range []struct {
		pid     int
		trainer bool
	}{{200, true}, {400, false}, {4242, false}} {
		if a, ok := o.Of(tc.pid); ok {
			t.Errorf("pid %d: attempt %q of another root's", tc.pid, a)
		}
		if got := o.Trainer(tc.pid); got != tc.trainer {
			t.Errorf("pid %d: trainer %v, want %v", tc.pid, got, tc.trainer)
		}
	}
	mine := &Owners{root: "/state/attempts", fs: o.fs, known: map[Proc]owner{}}
	if a, _ := mine.Of(200); a != "t.1/2" || !mine.Trainer(200) {
		t.Errorf("pid 200 under its own root: %q, trainer %v", a, mine.Trainer(200))
	}
}

// TestScopeIsThisProcessWhereItIsASubreaper: only a subreaper holds every process its
// children start.
func TestScopeIsThisProcessWhereItIsASubreaper(t *testing.T) {
	if got := scope(); got != os.Getpid() {
		t.Errorf("scope of a subreaper %d, want %d", got, os.Getpid())
	}
	unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
	defer unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	if got := scope(); got != 0 {
		t.Errorf("scope of a process that is no subreaper %d, want 0 (every process)", got)
	}
}

func TestAttemptDir(t *testing.T) {
	for _, tt := range []struct {
		job  string
		n    int
		want string
	}{
		{"q.1", 2, "/s/q.1/attempt-2"},
		{"../x", 1, ""}, {"a/b", 1, ""}, {"", 1, ""}, {"/x.1", 1, ""}, {"q.1", 0, ""},
	} {
		got, err := AttemptDir("/s", tt.job, tt.n)
		if got != tt.want || (err != nil) != (tt.want == "") {
			t.Errorf("AttemptDir(%q, %d) = %q, %v; want %q", tt.job, tt.n, got, err, tt.want)
		}
		if tt.want != "" {
			if back, ok := attemptIn("/s", got); !ok || back != tt.job+"/"+strconv.Itoa(tt.n) {
				t.Errorf("attemptIn(%q) = %q, %v", got, back, ok)
			}
		}
	}
}

// worker is a trainer, in python3 as torchrun's are, whose worker leaves its process
// group for a session of its own (as torchrun's start_new_session=True does) and ignores
// SIGTERM. With LEAVE set the trainer exits at once and leaves it running.
const worker = `
import os, signal, sys, time
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.setsid()
    if not os.environ.get("TERM_ENDS_IT"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    os.write(w, b"x")
    time.sleep(120)
    os._exit(0)
os.read(r, 1)
print("worker=%d" % pid, flush=True)
if not os.environ.get("LEAVE"):
    time.sleep(120)
`

// startPython starts the worker script above as an attempt, with env (LEAVE=1: the
// leader exits at once; TERM_ENDS_IT=1: the worker does not ignore SIGTERM).
func startPython(t *testing.T, env ...string) (p *Process, root string, workerPID int) {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3")
	}
	doc := "name: w\ncommand: [python3, -c, \"{script}\"]\njobs: [{}]\nparams:\n  script: |" + strings.ReplaceAll(worker, "\n", "\n    ")
	sw, err := plans.DecodeSweep(filepath.Join(t.TempDir(), "w.yaml"), []byte(doc), plans.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	root = t.TempDir()
	dir, err := AttemptDir(root, "w.1", 1)
	if err != nil {
		t.Fatal(err)
	}
	parent := append(os.Environ(), env...)
	c, err := Prepare(Attempt{Sweep: sw, JobID: "w.1", N: 1, Params: sw.Jobs[0].Params, Dir: dir, Cards: []plans.Card{{Index: 0}}}, parent)
	if err != nil {
		t.Fatal(err)
	}
	if p, err = Start(c, filepath.Join(dir, "log"), "", nil); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		// Up to the line's end: a pty read can return half of what one write wrote.
		if pid := regexpFind(string(p.Output()), `worker=(\d+)\r?\n`); pid != "" {
			fmt.Sscan(pid, &workerPID)
			return p, root, workerPID
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.Stop(0)
	t.Fatalf("no worker: %q", p.Output())
	return
}

// TestWorkerInANewSessionIsTheAttempts: a worker that left the trainer's session is
// still the attempt's, for its memory and when the attempt is stopped.
func TestWorkerInANewSessionIsTheAttempts(t *testing.T) {
	old := GroupGrace
	GroupGrace = 300 * time.Millisecond
	defer func() { GroupGrace = old }()
	p, root, w := startPython(t)
	if st, ok := hostProcs.stat(w); !ok || st.sid == p.PID() {
		t.Fatalf("worker %d: %+v, want a session of its own", w, st)
	}
	for _, pid := range []int{p.PID(), w} {
		if a, ok := OwnerIn(root, pid); !ok || a != "w.1/1" {
			t.Errorf("pid %d: owner %q %v, want w.1/1", pid, a, ok)
		}
	}
	if a, ok := OwnerIn(t.TempDir(), w); ok {
		t.Errorf("another root owns the worker: %q", a)
	}
	wpss, _ := hostProcs.pss(w)
	if m := AttemptMemory(root, []int{os.Getpid()})["w.1/1"]; wpss <= 0 || m <= wpss {
		t.Errorf("attempt holds %d bytes, its worker alone %d", m, wpss)
	}
	p.Stop(GroupGrace)
	waitDone(t, p)
	assertGone(t, []int{p.PID(), w})
}

// TestAWorkerStoppedFirstIsReaped: a worker in a session of its own that Stop's
// SIGTERM ends before its leader is gone is, by the time the leader is, a zombie whose
// environment no longer names the attempt, handed to gpuq as the subreaper: it is
// reaped all the same, not left a zombie for as long as gpuq runs.
func TestAWorkerStoppedFirstIsReaped(t *testing.T) {
	p, _, w := startPython(t, "TERM_ENDS_IT=1")
	p.Stop(GroupGrace)
	waitDone(t, p)
	assertGone(t, []int{p.PID(), w})
}

// TestLeaderExitStopsWorkerInANewSession: nothing an attempt started outlives it, not
// even a worker in a session of its own.
func TestLeaderExitStopsWorkerInANewSession(t *testing.T) {
	old := GroupGrace
	GroupGrace = 300 * time.Millisecond
	defer func() { GroupGrace = old }()
	p, _, w := startPython(t, "LEAVE=1")
	waitDone(t, p)
	if e := p.Exit(); e.Code != 0 || e.Cancelled {
		t.Errorf("exit %+v, want status 0", e)
	}
	assertGone(t, []int{w})
}

// BenchmarkAttemptMemory is one engine round's host-memory reading: the owners of the
// processes under this one, and the PSS of those of an attempt; and, to compare, of
// every process on the machine, as every round read them before.
func BenchmarkAttemptMemory(b *testing.B) {
	b.Run("under=self", func(b *testing.B) {
		for b.Loop() {
			AttemptMemory("/nonexistent", []int{os.Getpid()})
		}
	})
	b.Run("every-process", func(b *testing.B) {
		for b.Loop() {
			hostProcs.memory("/nonexistent", []int{1})
		}
	})
}

// TestLinkName: a job's directory is found by its name under by-name/<sweep>/; the link
// is made once, replaced where it names another job, and made a file name of a name
// with a '/'; UnlinkNames removes a sweep's links.
func TestLinkName(t *testing.T) {
	root := t.TempDir()
	for _, job := range []string{"s.1", "s.2"} {
		if err := os.MkdirAll(filepath.Join(root, job, "attempt-1"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct{ name, job, file string }{
		{"glue-sst2,seed=87", "s.1", "glue-sst2,seed=87"},
		{"glue-sst2,seed=87", "s.1", "glue-sst2,seed=87"},
		{"glue-sst2,seed=87", "s.2", "glue-sst2,seed=87"},
		{"lr/1e-4", "s.1", "lr∕1e-4"},
		{".hidden", "s.1", "_hidden"},
	} {
		if err := LinkName(root, "s", tc.name, tc.job); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if _, err := os.Stat(filepath.Join(root, "by-name", "s", tc.file, "attempt-1")); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
		if dest, _ := filepath.EvalSymlinks(filepath.Join(root, "by-name", "s", tc.file)); dest != filepath.Join(root, tc.job) {
			t.Errorf("%s leads to %s, not %s", tc.name, dest, tc.job)
		}
	}
	// Two names past 200 bytes that differ only at their end: two links, each whole
	// runes of at most 200 bytes, with the start and the end of its name.
	long := "data=" + strings.Repeat("é", 120)
	for _, job := range []string{"s.1", "s.2"} {
		seed := ",seed=" + job[2:]
		if err := LinkName(root, "long", long+seed, job); err != nil {
			t.Fatal(err)
		}
		links, _ := os.ReadDir(filepath.Join(root, "by-name", "long"))
		var found bool
		for _, l := range links {
			name := l.Name()
			if !strings.HasSuffix(name, seed) {
				continue
			}
			found = true
			dest, _ := filepath.EvalSymlinks(filepath.Join(root, "by-name", "long", name))
			if len(name) > 200 || !utf8.ValidString(name) || !strings.HasPrefix(name, long[:100]) || dest != filepath.Join(root, job) {
				t.Errorf("the link of %s: %q (%d bytes) leads to %s", job, name, len(name), dest)
			}
		}
		if !found {
			t.Errorf("no link of %s among %v", job, links)
		}
	}
	if links, _ := os.ReadDir(filepath.Join(root, "by-name", "long")); len(links) != 2 {
		t.Errorf("two long names, links %v", links)
	}
	if err := LinkName(root, "s", "x", "../s.1"); err == nil {
		t.Error("a job that is no path element was linked")
	}
	if err := UnlinkNames(root, "s"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "by-name", "s")); !os.IsNotExist(err) || func() bool { _, err := os.Stat(filepath.Join(root, "s.1")); return err != nil }() {
		t.Errorf("UnlinkNames left the links, or took the jobs: %v", err)
	}
}

// TestJobOf: a process is told by the job id and name it inherited, its own or its
// parent's.
func TestJobOf(t *testing.T) {
	cmd := exec.Command("sh", "-c", "env -u GPUQ_JOB_ID -u GPUQ_JOB_NAME sleep 30 & echo $!; wait")
	cmd.Env = append(os.Environ(), "GPUQ_JOB_ID=s.3", "GPUQ_JOB_NAME=glue-sst2,seed=87")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var child int
	fmt.Fscan(out, &child)
	defer func() {
		if p, err := os.FindProcess(child); err == nil && child > 0 {
			p.Kill()
		}
		cmd.Process.Kill()
		cmd.Wait()
	}()
	for _, pid := range []int{cmd.Process.Pid, child} {
		if id, name, ok := JobOf(pid); !ok || id != "s.3" || name != "glue-sst2,seed=87" {
			t.Errorf("process %d is of %q %q %v", pid, id, name, ok)
		}
	}
	if _, _, ok := JobOf(os.Getpid()); ok {
		t.Error("the test itself is of a job")
	}
}
