package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuq/gpuq/launcher"
	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler"
	"github.com/gpuq/gpuq/scheduler/daemon"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/gpu/nvidia"
	"github.com/gpuq/gpuq/scheduler/schedtest"
)

// The tests run a daemon in-process, on no cards of its own, listening on loopback; its
// workers are the test binary started as one (each a process, so that it can be killed
// as a node's worker is), and so are their supervisors.

const (
	asWorker  = "GPUQ_TEST_WORKER" // the worker's name
	envState  = "GPUQ_TEST_STATE"
	envServer = "GPUQ_TEST_SERVER"
	envGPUs   = "GPUQ_TEST_GPUS"
	envIdle   = "GPUQ_TEST_IDLE"
	// envStartGate, a directory: each supervisor marks its start there and waits for
	// the file go in it before it starts its trainer.
	envStartGate = "GPUQ_TEST_START_GATE"
	envEnds      = "GPUQ_TEST_ENDS" // the worker's Ends, RFC 3339
)

func TestMain(m *testing.M) {
	// The daemon gives trainers this long from SIGTERM to SIGKILL (Welcome.Stop), so that
	// a grace of a few seconds holds the fence.
	launcher.GroupGrace = stopGrace
	if len(os.Args) == 3 && os.Args[1] == launcher.SupervisorMode {
		if gate := os.Getenv(envStartGate); gate != "" {
			waitAtGate(gate)
		}
		if err := launcher.Supervise(os.Args[2]); err != nil {
			fmt.Fprintln(os.Stderr, "supervisor:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if name := os.Getenv(asWorker); name != "" {
		if err := runTestWorker(name); err != nil {
			fmt.Fprintln(os.Stderr, "worker:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if state := os.Getenv(asDaemon); state != "" {
		if err := runTestDaemon(state); err != nil {
			fmt.Fprintln(os.Stderr, "daemon:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// waitAtGate marks a supervisor's start in gate, then waits for gate/go (a minute at
// most, so that a test that fails leaves nothing waiting).
func waitAtGate(gate string) {
	os.WriteFile(filepath.Join(gate, strconv.Itoa(os.Getpid())), nil, 0o600)
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(gate, "go")); err == nil {
			return
		}
	}
}

func runTestWorker(name string) error {
	state := os.Getenv(envState)
	creds, err := api.LoadCredentials(state)
	if err != nil {
		return err
	}
	var ends time.Time
	if v := os.Getenv(envEnds); v != "" {
		if ends, err = time.Parse(time.RFC3339Nano, v); err != nil {
			return err
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	idle, _ := time.ParseDuration(os.Getenv(envIdle))
	return Run(ctx, Config{IdleTimeout: idle, Server: os.Getenv(envServer), Credentials: creds, Name: name, Dir: filepath.Join(state, "workers", name),
		GPUs: plans.Override{Value: os.Getenv(envGPUs), Source: "test"}, Inventory: nvidia.Options{Ledger: os.Getenv("GPUQ_SIM_LEDGER")},
		Poll: 100 * time.Millisecond, Supervisor: []string{os.Args[0]}, Version: "test", Log: os.Stderr, Ends: ends})
}

// cluster is a daemon in the test's process and its workers.
type cluster struct {
	t      *testing.T
	state  string
	server string
	client *api.Client
	log    *schedtest.Buffer
	// stopDaemon stops the daemon, leaving its trainers running, as a kill would.
	stopDaemon func()
}

// grace is the daemon's worker grace in these tests: short, so that they are quick,
// and long against a busy machine's pauses; it leaves a worker's trainers a lease of
// about 6s, then stopGrace from SIGTERM to SIGKILL.
const (
	grace     = 10 * time.Second
	stopGrace = 2 * time.Second
)

// startCluster runs a daemon listening on 127.0.0.1 with no cards of its own.
func startCluster(t *testing.T) *cluster {
	t.Helper()
	c := &cluster{t: t, state: filepath.Join(t.TempDir(), "state"), log: &schedtest.Buffer{}}
	c.startDaemon()
	return c
}

// startDaemon starts the cluster's daemon on its state: again after stopDaemon, on
// another port.
func (c *cluster) startDaemon() {
	t := c.t
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ended := make(chan error, 1)
	go func() {
		ended <- daemon.Run(ctx, daemon.Config{StateDir: c.state, Machine: plans.Overrides{GPUs: plans.Override{Value: daemon.NoCards, Source: "test"}},
			Poll: 100 * time.Millisecond, Supervisor: []string{os.Args[0]}, Version: "test", Log: c.log,
			Listen: "127.0.0.1:0", WorkerGrace: grace})
	}()
	stopped := false
	c.stopDaemon = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-ended; err != nil {
			t.Errorf("the daemon ended with %v\n%s", err, c.log)
		}
	}
	stop := c.stopDaemon
	t.Cleanup(func() {
		if !stopped && c.client != nil {
			c.client.Stop(true)
		}
		stop()
	})
	schedtest.WaitFor(t, "the daemon to listen", func() bool {
		select {
		case err := <-ended:
			t.Fatalf("the daemon ended: %v\n%s", err, c.log)
		default:
		}
		cl, err := api.Dial(c.state)
		if err != nil {
			return false
		}
		info, err := cl.Info()
		c.client, c.server = cl, info.Listen
		return err == nil && info.Listen != ""
	})
}

// proc is a worker process of the test's.
type proc struct {
	name   string
	cmd    *exec.Cmd
	log    *schedtest.Buffer
	exited chan struct{} // closed once it has exited, with err
	err    error
}

// startWorker starts a worker process on simulated cards of its own; env is more of
// its environment.
func (c *cluster) startWorker(name, gpus string, env ...string) *proc {
	c.t.Helper()
	w := spawn(c.t, name, append([]string{asWorker + "=" + name, envState + "=" + c.state, envServer + "=" + c.server, envGPUs + "=" + gpus,
		"GPUQ_SIM_LEDGER=" + filepath.Join(c.t.TempDir(), "ledger")}, env...))
	// Linked: its own log says so (the daemon may not have seen a killed one's link
	// break yet); or refused, and gone.
	schedtest.WaitFor(c.t, "worker "+name+" to link", func() bool {
		select {
		case <-w.exited:
			return true
		default:
			return strings.Contains(w.log.String(), "linked to the daemon") && c.connected(name)
		}
	})
	return w
}

// spawn starts the test binary as a process of the test's (a worker, a daemon), with
// env added to its environment; it is stopped (SIGTERM) when the test ends.
func spawn(t *testing.T, name string, env []string) *proc {
	t.Helper()
	p := &proc{name: name, log: &schedtest.Buffer{}, exited: make(chan struct{})}
	p.cmd = exec.Command(os.Args[0])
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.cmd.Process.Signal(syscall.SIGCONT)
		p.cmd.Process.Signal(syscall.SIGTERM)
		<-p.exited
		if t.Failed() {
			t.Logf("%s's log:\n%s", name, p.log)
		}
	})
	return p
}

// kill kills a worker as the kernel's OOM killer or a node failure would: at once,
// leaving its supervisors.
func (w *proc) kill(t *testing.T) {
	t.Helper()
	w.cmd.Process.Signal(syscall.SIGKILL)
	<-w.exited
}

func (c *cluster) connected(name string) bool {
	ws, err := c.client.Workers()
	if err != nil {
		c.t.Fatal(err)
	}
	for _, w := range ws {
		if w.Name == name {
			return w.Connected
		}
	}
	return false
}

func (c *cluster) jobs() []api.Job {
	c.t.Helper()
	jobs, err := c.client.Jobs("", nil)
	if err != nil {
		c.t.Fatal(err)
	}
	return jobs
}

func (c *cluster) submit(doc string) {
	c.t.Helper()
	path := filepath.Join(c.t.TempDir(), "sweep.yaml")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		c.t.Fatal(err)
	}
	if _, err := c.client.Submit(api.SubmitRequest{File: path, Source: doc, Environ: os.Environ()}); err != nil {
		c.t.Fatal(err)
	}
}

// running is the running jobs on each worker, by job id.
func running(jobs []api.Job) map[string][]string {
	out := map[string][]string{}
	for _, j := range jobs {
		if j.State == "running" {
			a := j.Attempts[len(j.Attempts)-1]
			out[a.Worker] = append(out[a.Worker], j.ID)
		}
	}
	return out
}

// TestTwoWorkersRunASweepThroughAKill: a daemon and two workers on loopback, each with
// its own simulated cards, run a sweep to the end. One worker killed and started again
// at once takes its attempts up; the other, killed for good, has its attempts run again
// on a third, at their tier and without counting against oom.max_attempts, once its
// trainers have ended (each given most of its time to stop to save a checkpoint):
// every job succeeds exactly once.
func TestTwoWorkersRunASweepThroughAKill(t *testing.T) {
	c := startCluster(t)
	w1 := c.startWorker("w1", "sim:2x24GiB")
	w2 := c.startWorker("w2", "sim:2x24GiB")
	// Every trainer waits for the gate, so that none ends while a worker is down; asked
	// to stop, it saves for most of its time to.
	gate := filepath.Join(t.TempDir(), "gate")
	c.submit(fmt.Sprintf(`name: spread
command: [sh, -c, "trap 'echo saving; sleep %.1f; echo saved $(date +%%s%%N); exit 0' TERM; echo start {seed} $(date +%%s%%N); while [ ! -e %s ]; do sleep 0.05; done; echo done {seed}"]
matrix: {seed: [1, 2, 3, 4]}
memory: 10GiB
gpu_plan: "1"
oom: {max_attempts: 1}
`, 0.8*stopGrace.Seconds(), gate))
	var first map[string][]string
	schedtest.WaitFor(t, "two trainers running on each worker", func() bool {
		jobs := c.jobs()
		first = running(jobs)
		for _, j := range jobs {
			// Started, not only sent: the daemon holds an attempt running once it has
			// asked its worker to start it, and a supervisor killed with its worker
			// before it has said that its trainer runs is taken for one that never
			// started it (launcher.SupervisedLeader), as after a daemon's death.
			if j.State != "running" || launcher.SupervisedLeader(filepath.Dir(j.Attempts[len(j.Attempts)-1].Log)) == 0 {
				return false
			}
		}
		return len(first["w1"]) == 2 && len(first["w2"]) == 2
	})

	// Killed and back within the grace period: its attempts are taken up, not run again.
	w2.kill(t)
	c.startWorker("w2", "sim:2x24GiB")
	log := c.logOf(first["w2"][0])
	if !strings.Contains(log, "start") {
		t.Errorf("the log of %s through the daemon: %q", first["w2"][0], log)
	}

	// Killed for good: past the grace period its jobs run again on a worker with room.
	w1.kill(t)
	c.startWorker("w3", "sim:2x24GiB")
	lost := map[string]bool{first["w1"][0]: true, first["w1"][1]: true}
	schedtest.WaitFor(t, "w1's jobs to run again on w3", func() bool { return len(running(c.jobs())["w3"]) == 2 })
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	schedtest.WaitFor(t, "every job to succeed", func() bool {
		for _, j := range c.jobs() {
			if j.State != "succeeded" {
				return false
			}
		}
		return true
	})
	for _, j := range c.jobs() {
		seed := strings.TrimPrefix(j.ID, "spread.")
		last := j.Attempts[len(j.Attempts)-1]
		switch {
		case last.Outcome != "success":
			t.Errorf("%s: last attempt %s", j.ID, last.Outcome)
		case lost[j.ID]:
			if len(j.Attempts) != 2 || j.Attempts[0].Outcome != "lost" || j.Attempts[0].Worker != "w1" || last.Worker != "w3" || last.Tier != j.Attempts[0].Tier {
				t.Errorf("%s, lost with w1: attempts %+v; want one lost on w1, then a success on w3 at its tier", j.ID, j.Attempts)
				continue
			}
			// The lost trainer had saved and ended before the next one started.
			old, _ := os.ReadFile(j.Attempts[0].Log) // on this machine, as every worker is
			next, _ := os.ReadFile(last.Log)
			saved, started := stamp(string(old), "saved "), stamp(string(next), "start "+seed+" ")
			if saved == 0 || started == 0 || saved > started {
				t.Errorf("%s: its trainer on w1 saved at %d (0: not seen), the next started at %d: it ran beside it\n%s", j.ID, saved, started, old)
			}
		case len(j.Attempts) != 1:
			t.Errorf("%s: %d attempts, want one", j.ID, len(j.Attempts))
		}
		var done int
		for _, a := range j.Attempts {
			data, _ := os.ReadFile(a.Log) // on this machine, as every worker is
			done += strings.Count(string(data), "done "+seed+"\n")
		}
		if done != 1 {
			t.Errorf("%s's trainer finished %d times, want once", j.ID, done)
		}
	}
	if t.Failed() {
		t.Logf("the daemon's log:\n%s", c.log)
	}
}

// stamp is the time (ns) a trainer printed last after what, in its log (its header,
// the command, has what too); 0 where it did not.
func stamp(log, what string) int64 {
	i := strings.LastIndex(log, what)
	if i < 0 {
		return 0
	}
	line, _, _ := strings.Cut(log[i+len(what):], "\n")
	ns, _ := strconv.ParseInt(strings.TrimSpace(line), 10, 64)
	return ns
}

// logOf reads a job's latest log through the daemon, from its worker.
func (c *cluster) logOf(job string) string {
	c.t.Helper()
	s, err := c.client.Attempt(api.StreamRequest{Attempt: api.AttemptRef{Job: job, N: 1}, Kind: api.StreamLog})
	if err != nil {
		c.t.Fatal(err)
	}
	defer s.Close()
	data, err := io.ReadAll(s)
	if err != nil {
		c.t.Fatal(err)
	}
	return string(data)
}

// TestAWorkersTerminalTakesItsClientsSize: an attach client's terminal size reaches a
// worker's trainer through the daemon, as it reaches one on the daemon's machine.
func TestAWorkersTerminalTakesItsClientsSize(t *testing.T) {
	c := startCluster(t)
	c.startWorker("w1", "sim:1x24GiB")
	c.submit(`name: size
command: [sh, -c, "trap 'stty size; exit 0' WINCH; echo ready; while :; do sleep 0.05; done"]
jobs: [{}]
memory: 1GiB
`)
	schedtest.WaitFor(t, "the trainer to run", func() bool {
		return c.jobs()[0].State == "running" && strings.Contains(c.logOf("size.1"), "ready")
	})
	s, err := c.client.Attempt(api.StreamRequest{Attempt: api.AttemptRef{Job: "size.1", N: 1}, Kind: api.StreamSize, Rows: 30, Cols: 100})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	schedtest.WaitFor(t, "the trainer to hear of its size", func() bool { return c.jobs()[0].State == "succeeded" })
	if log := c.logOf("size.1"); !strings.Contains(log, "30 100") {
		t.Errorf("the trainer's terminal: %q, want 30 rows of 100", log)
	}
}

// TestAWorkersJobThroughTheDaemon: a job on a worker is seen and handled as one on the
// daemon's own machine: its terminal (keys to it, its output back), its log (whole, its
// last lines, or followed to its end), and a cancel stops it there.
func TestAWorkersJobThroughTheDaemon(t *testing.T) {
	c := startCluster(t)
	c.startWorker("w1", "sim:1x24GiB")
	c.submit(`name: talk
command: [sh, -c, "echo ready; read line; echo \"got $line\"; echo bye"]
jobs: [{}]
memory: 1GiB
`)
	schedtest.WaitFor(t, "the trainer to run", func() bool {
		j := c.jobs()[0]
		return j.State == "running" && strings.Contains(c.logOf("talk.1"), "ready")
	})
	term, err := c.client.Attempt(api.StreamRequest{Attempt: api.AttemptRef{Job: "talk.1", N: 1}, Kind: api.StreamAttach})
	if err != nil {
		t.Fatal(err)
	}
	follow, err := c.client.Attempt(api.StreamRequest{Attempt: api.AttemptRef{Job: "talk.1", N: 1}, Kind: api.StreamLog, Follow: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(term, "hello\n"); err != nil {
		t.Fatal(err)
	}
	// The terminal's scrollback, then its live output, to the trainer's end.
	seen, err := io.ReadAll(term)
	if err != nil || !strings.Contains(string(seen), "ready") || !strings.Contains(string(seen), "got hello") {
		t.Errorf("the terminal showed %q (%v)", seen, err)
	}
	logged, err := io.ReadAll(follow)
	if err != nil || !strings.Contains(string(logged), "got hello\nbye") || !strings.Contains(string(logged), "exited with status 0") {
		t.Errorf("the log followed to its end: %q (%v)", logged, err)
	}
	schedtest.WaitFor(t, "the job to succeed", func() bool { return c.jobs()[0].State == "succeeded" })
	tail, err := c.client.Attempt(api.StreamRequest{Attempt: api.AttemptRef{Job: "talk.1", N: 1}, Kind: api.StreamLog, Tail: 1})
	if err != nil {
		t.Fatal(err)
	}
	last, _ := io.ReadAll(tail)
	if lines := strings.Split(strings.TrimSpace(string(last)), "\n"); len(lines) != 1 || !strings.Contains(lines[0], "exited with status 0") {
		t.Errorf("its last line: %q", last)
	}

	c.submit("name: stop\ncommand: [sh, -c, \"sleep 60\"]\njobs: [{}]\nmemory: 1GiB\n")
	var dir string
	schedtest.WaitFor(t, "the other trainer to run", func() bool {
		j := c.jobs()[1]
		if j.State != "running" {
			return false
		}
		dir = filepath.Dir(j.Attempts[len(j.Attempts)-1].Log)
		return launcher.SupervisedLeader(dir) != 0
	})
	if _, err := c.client.Act(api.Cancel, api.SelectRequest{IDs: []string{"stop.1"}}); err != nil {
		t.Fatal(err)
	}
	schedtest.WaitFor(t, "the job to be cancelled", func() bool { return c.jobs()[1].State == "cancelled" })
	if j := c.jobs()[1]; j.Attempts[0].Outcome != "cancelled" || syscall.Kill(launcher.SupervisedLeader(dir), 0) == nil {
		t.Errorf("stop.1's attempt %s; its trainer still runs: %v", j.Attempts[0].Outcome, syscall.Kill(launcher.SupervisedLeader(dir), 0) == nil)
	}
}

// TestAWorkerStartsItsAttemptsTogether: a worker starts the attempts the daemon sends
// it each beside the others, not each once the last one's trainer runs: every
// supervisor is under way before any has started its trainer. One cancelled while it
// starts is stopped once it has, and the others run on.
func TestAWorkerStartsItsAttemptsTogether(t *testing.T) {
	const n = 3
	c := startCluster(t)
	gate := t.TempDir()
	w := c.startWorker("w1", "sim:3x24GiB", envStartGate+"="+gate)
	c.submit("name: together\ncommand: [sh, -c, 'sleep 600']\nmatrix: {seed: [1, 2, 3]}\nmemory: 1GiB\n")
	schedtest.WaitFor(t, fmt.Sprintf("%d supervisors to be under way at once", n), func() bool {
		ents, _ := os.ReadDir(gate)
		return len(ents) == n
	})
	if _, err := c.client.Act(api.Cancel, api.SelectRequest{IDs: []string{"together.1"}}); err != nil {
		t.Fatal(err)
	}
	schedtest.WaitFor(t, "the worker to hold the stop until the start", func() bool {
		return strings.Contains(w.log.String(), "together.1/1 is starting: it stops once it has started")
	})
	os.WriteFile(filepath.Join(gate, "go"), nil, 0o600)
	schedtest.WaitFor(t, "the cancelled job to end, the others to run", func() bool {
		states := map[string]string{}
		for _, j := range c.jobs() {
			states[j.ID] = j.State
		}
		return states["together.1"] == "cancelled" && states["together.2"] == "running" && states["together.3"] == "running"
	})
}

// TestASlowWorkerRunsNothingTwice: a worker that stops answering for a while, less than
// the grace period, loses nothing: its jobs run on where they are, each once.
func TestASlowWorkerRunsNothingTwice(t *testing.T) {
	c := startCluster(t)
	w := c.startWorker("w1", "sim:1x24GiB")
	gate := filepath.Join(t.TempDir(), "gate")
	c.submit(fmt.Sprintf("name: slow\ncommand: [sh, -c, \"while [ ! -e %s ]; do sleep 0.05; done\"]\njobs: [{}]\nmemory: 1GiB\n", gate))
	schedtest.WaitFor(t, "the trainer to run", func() bool {
		j := c.jobs()[0]
		return j.State == "running" && launcher.SupervisedLeader(filepath.Dir(j.Attempts[0].Log)) != 0
	})
	w.cmd.Process.Signal(syscall.SIGSTOP)
	time.Sleep(grace / 4)
	w.cmd.Process.Signal(syscall.SIGCONT)
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	schedtest.WaitFor(t, "the job to end", func() bool { return c.jobs()[0].State != "running" })
	if j := c.jobs()[0]; j.State != "succeeded" || len(j.Attempts) != 1 {
		t.Errorf("the job %s after %d attempts, want one, a success:\n%s", j.State, len(j.Attempts), c.log)
	}
}

// TestWhyNamesAWorkerAway: a job that waits while a worker is away is told so: the
// worker's cards count for no job until it links again; once it is back, that goes.
func TestWhyNamesAWorkerAway(t *testing.T) {
	c := startCluster(t)
	w := c.startWorker("w1", "sim:1x24GiB")
	gate, started := filepath.Join(t.TempDir(), "gate"), filepath.Join(t.TempDir(), "started")
	t.Cleanup(func() { os.WriteFile(gate, nil, 0o644) })
	c.submit(fmt.Sprintf("name: one\ncommand: [sh, -c, \"touch %s; while [ ! -e %s ]; do sleep 0.05; done\"]\nmatrix: {seed: [1, 2]}\nmemory: 1GiB\ngpu_plan: \"1\"\n", started, gate))
	schedtest.WaitFor(t, "one job's trainer to run on w1", func() bool {
		_, err := os.Stat(started)
		return err == nil && len(running(c.jobs())["w1"]) == 1
	})
	waiting := "one.2"
	if running(c.jobs())["w1"][0] == waiting {
		waiting = "one.1"
	}
	w.kill(t)
	schedtest.WaitFor(t, "why to name w1 away", func() bool {
		why, err := c.client.Why(waiting)
		return err == nil && strings.Contains(why.Detail, "; worker w1 is away, and its cards count for no job until it links again")
	})
	c.startWorker("w1", "sim:1x24GiB")
	schedtest.WaitFor(t, "why to name no worker away once w1 is back", func() bool {
		why, err := c.client.Why(waiting)
		return err == nil && why.Reason != "" && !strings.Contains(why.Detail, "away")
	})
}

// TestDrainOfACardAway: while a worker is away, its card may be undrained and drained
// again, and once the daemon has forgotten the worker (it restarted), a card left
// drained may still be undrained: the drain is the person's intent about the card, kept
// across the restart, and back, the worker's card takes jobs. A card never seen is
// refused. (An undrain of a card away was refused: no GPU w1:0 here.)
func TestDrainOfACardAway(t *testing.T) {
	c := startCluster(t)
	w1 := c.startWorker("w1", "sim:1x24GiB")
	card := func(on bool) api.DrainRequest { return api.DrainRequest{Worker: "w1", GPU: 0, On: on} }
	schedtest.WaitFor(t, "w1:0 to be drained", func() bool { return c.client.DrainCard(card(true)) == nil })
	w1.kill(t)
	// Away, and read by no round since: gpuq top has w1:0 from what the cluster keeps
	// of it, with no headroom, which only a round's reading reckons.
	schedtest.WaitFor(t, "a round to read the cards without w1's", func() bool {
		ov, err := c.client.Overview()
		if err != nil {
			t.Fatal(err)
		}
		return len(ov.GPUs) == 1 && ov.GPUs[0].WorkerAway != nil && ov.GPUs[0].HeadroomBytes == 0
	})
	for _, on := range []bool{false, true} {
		if err := c.client.DrainCard(card(on)); err != nil {
			t.Fatalf("drain (%v) of w1:0, w1 away: %v", on, err)
		}
	}
	c.stopDaemon()
	c.startDaemon()
	if err := c.client.DrainCard(card(false)); err != nil {
		t.Fatalf("undrain of w1:0, drained, w1 not back since the daemon restarted: %v", err)
	}
	if err := c.client.DrainCard(api.DrainRequest{Worker: "w9", GPU: 0, On: true}); err == nil || !strings.Contains(err.Error(), "no GPU w9:0 here") {
		t.Errorf("drain of w9:0, never seen: %v", err)
	}
	c.startWorker("w1", "sim:1x24GiB")
	c.submit("name: back\ncommand: [true]\njobs: [{}]\nmemory: 1GiB\n")
	schedtest.WaitFor(t, "the job to end", func() bool { s := c.jobs()[0].State; return s != "queued" && s != "running" })
	if j := c.jobs()[0]; j.State != "succeeded" || j.Attempts[0].Worker != "w1" {
		t.Errorf("the job %s on %+v, want it to succeed on w1, undrained", j.State, j.Attempts)
	}
}

// TestWorkersLeave: a worker its daemon drains takes no other job and leaves once its
// job has ended; one idle past its --idle-timeout leaves; the daemon forgets each as it
// goes, rather than wait for it as away.
func TestWorkersLeave(t *testing.T) {
	c := startCluster(t)
	drained := c.startWorker("drained", "sim:1x24GiB")
	gate := filepath.Join(t.TempDir(), "gate")
	c.submit(fmt.Sprintf("name: busy\ncommand: [sh, -c, \"while [ ! -e %s ]; do sleep 0.05; done\"]\nmatrix: {seed: [1, 2]}\nmemory: 1GiB\ngpu_plan: \"1\"\n", gate))
	schedtest.WaitFor(t, "a job to run", func() bool { return c.jobs()[0].State == "running" })
	if err := c.client.DrainWorker("drained"); err != nil {
		t.Fatal(err)
	}
	idle := c.startWorker("idle", "sim:1x24GiB", envIdle+"=1s")
	schedtest.WaitFor(t, "the other job to run on the worker that is not drained", func() bool { return c.jobs()[1].State == "running" })
	select {
	case <-drained.exited:
		t.Fatalf("the drained worker left while its job ran: %v", drained.err)
	default:
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, w := range []*proc{drained, idle} {
		select {
		case <-w.exited:
			if w.err != nil {
				t.Errorf("worker %s left with %v", w.name, w.err)
			}
		case <-time.After(60 * time.Second):
			t.Fatalf("worker %s is still there", w.name)
		}
	}
	for i, want := range []string{"drained", "idle"} {
		if j := c.jobs()[i]; j.State != "succeeded" || j.Attempts[0].Worker != want {
			t.Errorf("%s %s on %s, want it to succeed on %s", j.ID, j.State, j.Attempts[0].Worker, want)
		}
	}
	if !strings.Contains(idle.log.String(), "idle for 1s: leaving") {
		t.Errorf("the idle worker's log:\n%s", idle.log)
	}
	// Each has left, with nothing to come back for: gone from the daemon's workers, not
	// away until its grace runs out.
	schedtest.WaitFor(t, "the daemon to forget both workers", func() bool {
		ws, err := c.client.Workers()
		return err == nil && len(ws) == 0
	})
	for _, name := range []string{"drained", "idle"} {
		if !strings.Contains(c.log.String(), "worker "+name+" has left") {
			t.Errorf("the daemon's log does not say %s has left:\n%s", name, c.log)
		}
	}
	if err := c.client.DrainWorker("nobody"); err == nil {
		t.Error("drain of no worker: no error")
	}
}

// TestAWorkerEndsInTime: a worker whose allocation is about to end stops the trainers it
// runs, whose jobs go back to the queue at once, at their tier and not counted as failed
// attempts, and leaves; another worker runs them to the end.
func TestAWorkerEndsInTime(t *testing.T) {
	c := startCluster(t)
	ends := time.Now().Add(4 * time.Second)
	w := c.startWorker("ending", "sim:2x24GiB", envEnds+"="+ends.Format(time.RFC3339Nano))
	c.submit(`name: late
command: [sh, -c, "echo start; sleep 30; echo done"]
matrix: {seed: [1, 2]}
memory: 10GiB
gpu_plan: "1"
oom: {max_attempts: 1}
`)
	schedtest.WaitFor(t, "both jobs running on the ending worker", func() bool { return len(running(c.jobs())["ending"]) == 2 })
	select {
	case <-w.exited:
		if w.err != nil {
			t.Errorf("the worker left with %v", w.err)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("the worker did not leave at its end\n%s", w.log)
	}
	if time.Now().Before(ends) {
		t.Errorf("the worker left before its end")
	}
	for _, j := range c.jobs() {
		if j.State != "queued" || len(j.Attempts) != 1 || j.Attempts[0].Outcome != "lost" {
			t.Errorf("%s as its worker ended: %s, attempts %+v; want queued again, its attempt lost", j.ID, j.State, j.Attempts)
		}
	}
	if !strings.Contains(w.log.String(), "the allocation is ending: stopping 2 attempts") {
		t.Errorf("the worker's log does not say why it stopped them:\n%s", w.log)
	}
	c.startWorker("next", "sim:2x24GiB")
	schedtest.WaitFor(t, "both jobs running again elsewhere", func() bool { return len(running(c.jobs())["next"]) == 2 })
	for _, j := range c.jobs() {
		if a := j.Attempts[len(j.Attempts)-1]; a.Tier != j.Attempts[0].Tier {
			t.Errorf("%s runs again at tier %d, not %d", j.ID, a.Tier, j.Attempts[0].Tier)
		}
	}
}

// TestASecondWorkerOfOneNameIsRefused: a worker given the name of one that is linked,
// on another node (a state directory of its own, with the daemon's credentials), is
// refused and says why, rather than taking the first one's link and attempts in turn
// with it, every second, and running its jobs twice; the first runs its job once.
func TestASecondWorkerOfOneNameIsRefused(t *testing.T) {
	c := startCluster(t)
	c.startWorker("n1", "sim:1x24GiB")
	gate := filepath.Join(t.TempDir(), "gate")
	c.submit(fmt.Sprintf("name: once\ncommand: [sh, -c, \"while [ ! -e %s ]; do sleep 0.05; done\"]\njobs: [{}]\nmemory: 1GiB\n", gate))
	schedtest.WaitFor(t, "the job to run", func() bool { return len(running(c.jobs())["n1"]) == 1 })
	other := t.TempDir()
	for _, f := range []string{"secret", "tls.crt"} {
		data, err := os.ReadFile(filepath.Join(c.state, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(other, f), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	second := c.startWorker("n1", "sim:1x24GiB", envState+"="+other)
	select {
	case <-second.exited:
	case <-time.After(60 * time.Second):
		t.Fatal("the second worker named n1 was not refused")
	}
	if !strings.Contains(second.log.String(), "another gpuq worker named n1 is linked to this daemon") {
		t.Errorf("the second worker's log:\n%s", second.log)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	schedtest.WaitFor(t, "the job to succeed", func() bool { return c.jobs()[0].State == "succeeded" })
	if n := len(c.jobs()[0].Attempts); n != 1 {
		t.Errorf("the job ran %d attempts, want 1", n)
	}
}

// firstTrainer waits for the first job's first trainer to run (and for ready of its
// attempt's directory, if not nil), and returns that directory.
func (c *cluster) firstTrainer(ready func(dir string) bool) string {
	c.t.Helper()
	var dir string
	schedtest.WaitFor(c.t, "the trainer to run", func() bool {
		j := c.jobs()[0]
		if j.State != "running" {
			return false
		}
		dir = filepath.Dir(j.Attempts[0].Log)
		return launcher.SupervisedLeader(dir) != 0 && (ready == nil || ready(dir))
	})
	return dir
}

// alive reports whether a process runs: it is neither gone nor a zombie (whose parent,
// frozen, has not reaped it).
func alive(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(data), ')')
	return i > 0 && i+2 < len(data) && data[i+2] != 'Z' && data[i+2] != 'X'
}

// supervisorOf is the pid of the supervisor of the attempt in dir.
func supervisorOf(t *testing.T, dir string) int {
	t.Helper()
	var info struct {
		PID int `json:"pid"`
	}
	data, err := os.ReadFile(filepath.Join(dir, "supervisor.json"))
	if err == nil {
		err = json.Unmarshal(data, &info)
	}
	if err != nil || info.PID == 0 {
		t.Fatalf("the supervisor of %s: %v", dir, err)
	}
	return info.PID
}

// toldItsWorker reports whether the supervisor of the attempt in dir has told its
// worker the trainer's pid, and closed its standard output, the pipe its worker reads
// (a file it opens later may take the descriptor): a worker still reading it waits for
// the supervisor, frozen or not.
func toldItsWorker(t *testing.T, dir string) bool {
	out, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/1", supervisorOf(t, dir)))
	return errors.Is(err, os.ErrNotExist) || err == nil && !strings.HasPrefix(out, "pipe:")
}

// TestAFrozenWorkerRunsNothingTwice: a worker's node frozen past the grace (its worker,
// supervisors and trainers stopped, as a paused VM is) has its job run elsewhere. When
// the worker thaws, before it does anything else, it kills the trainer it had, which
// never runs beside the one that replaced it, even where its supervisor thaws later.
// The trainer thaws once the worker has acted: how soon a thawing worker runs is the
// machine's to say.
func TestAFrozenWorkerRunsNothingTwice(t *testing.T) {
	c := startCluster(t)
	w1 := c.startWorker("w1", "sim:1x24GiB")
	beats := filepath.Join(t.TempDir(), "beats")
	c.submit(fmt.Sprintf(`name: frozen
command: [sh, -c, "trap 'while :; do echo {attempt} saving $(date +%%s%%N) >> %[1]s; sleep 0.1; done' TERM; while :; do echo {attempt} $(date +%%s%%N) >> %[1]s; sleep 0.05; done"]
jobs: [{}]
memory: 1GiB
`, beats))
	// Frozen once its worker has the trainer's pid: a worker frozen as it starts an
	// attempt waits for its supervisor, which here thaws last.
	dir := c.firstTrainer(func(dir string) bool {
		data, _ := os.ReadFile(beats)
		return strings.HasPrefix(string(data), "1 ") && toldItsWorker(t, dir)
	})
	leader, sup, worker := launcher.SupervisedLeader(dir), supervisorOf(t, dir), w1.cmd.Process.Pid
	for _, pid := range []int{-leader, sup, worker} {
		syscall.Kill(pid, syscall.SIGSTOP)
	}
	thawed := false
	thaw := func() {
		if !thawed {
			thawed = true
			for _, pid := range []int{worker, -leader, sup} {
				syscall.Kill(pid, syscall.SIGCONT)
			}
		}
	}
	t.Cleanup(thaw)

	c.startWorker("w2", "sim:1x24GiB")
	schedtest.WaitFor(t, "the job to run again on w2", func() bool {
		j := c.jobs()[0]
		data, _ := os.ReadFile(beats)
		return len(j.Attempts) == 2 && j.State == "running" && j.Attempts[1].Worker == "w2" && strings.Contains(string(data), "\n2 ")
	})
	// The worker thaws first, then, once it has acted, its trainer; its supervisor,
	// still frozen, can do nothing.
	thawedAt := time.Now()
	syscall.Kill(worker, syscall.SIGCONT)
	schedtest.WaitFor(t, "the thawed worker to kill its trainers", func() bool {
		return strings.Contains(w1.log.String(), "killed every process of the trainers whose lease had lapsed")
	})
	syscall.Kill(-leader, syscall.SIGCONT)
	schedtest.WaitFor(t, "the old trainer to be gone", func() bool { return !alive(leader) })
	gone := time.Since(thawedAt)
	time.Sleep(time.Second)
	syscall.Kill(sup, syscall.SIGCONT)
	thawed = true
	// The thawed supervisor records its trainer's end in the test's directory: done
	// before the directory is removed.
	schedtest.WaitFor(t, "the old supervisor to end", func() bool { return !alive(sup) })

	data, _ := os.ReadFile(beats)
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Fields(line)
		if ns, _ := strconv.ParseInt(f[len(f)-1], 10, 64); f[0] == "1" && ns > thawedAt.UnixNano() {
			t.Errorf("the old trainer ran %s after its worker thawed, beside the new one: %q", time.Duration(ns-thawedAt.UnixNano()), line)
		}
	}
	// At once: not a lease or a grace later (a busy machine's worker may take seconds
	// to be scheduled as it thaws).
	if gone > grace {
		t.Errorf("the old trainer was gone %s after its worker thawed", gone)
	}
	if j := c.jobs()[0]; j.Attempts[0].Outcome != "lost" || j.State != "running" {
		t.Errorf("the job is %s, its first attempt %s; want it running on w2, the first lost", j.State, j.Attempts[0].Outcome)
	}
}

// waitSuccess waits for the supervisor of the attempt in dir to record its success.
func waitSuccess(t *testing.T, dir string) {
	t.Helper()
	schedtest.WaitFor(t, "the trainer's success to be recorded", func() bool {
		e, _ := launcher.ReadEnded(dir)
		return e != nil && e.Outcome == plans.Success
	})
}

// TestASuccessHeldPastTheGraceWins: the daemon and a worker die before the worker has
// reported that its attempt succeeded. Where the daemon, started again, reads the
// attempt's end in its directory once the grace has passed (a shared home), the job has
// succeeded. Where it cannot (its supervisor, frozen, had not recorded it yet), it gives
// the attempt up; when the worker is back, the success it holds wins: the job succeeds
// once, and an attempt that had started it again meanwhile is stopped.
func TestASuccessHeldPastTheGraceWins(t *testing.T) {
	for _, tt := range []struct {
		name string
		// told: the daemon learns the success from the worker; again: it started the
		// job again meanwhile.
		told, again bool
	}{
		{name: "read in its directory"},
		{name: "told by the worker when back", told: true},
		{name: "told by the worker when back, the job started again meanwhile", told: true, again: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := startCluster(t)
			w1 := c.startWorker("w1", "sim:1x24GiB")
			gates := t.TempDir()
			c.submit(fmt.Sprintf(`name: late
command: [sh, -c, "echo start; while [ ! -e %s/{attempt} ]; do sleep 0.05; done; echo done"]
jobs: [{}]
memory: 1GiB
`, gates))
			dir := c.firstTrainer(nil)
			sup := supervisorOf(t, dir)
			// The worker, frozen, tells the daemon nothing more; the trainer ends at
			// once, well within its lease, however long the daemon then takes to stop.
			w1.cmd.Process.Signal(syscall.SIGSTOP)
			if tt.told {
				syscall.Kill(sup, syscall.SIGSTOP)
				t.Cleanup(func() { syscall.Kill(sup, syscall.SIGCONT) })
			}
			if err := os.WriteFile(filepath.Join(gates, "1"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			if !tt.told {
				waitSuccess(t, dir)
			}
			c.stopDaemon()
			w1.kill(t)
			c.startDaemon()
			if tt.again {
				c.startWorker("w2", "sim:1x24GiB")
			}
			schedtest.WaitFor(t, "the attempt to be given up past the grace", func() bool {
				j := c.jobs()[0]
				return j.Attempts[0].Outcome != "" && (!tt.again || j.State == "running" && len(j.Attempts) == 2)
			})
			if tt.told {
				syscall.Kill(sup, syscall.SIGCONT)
				waitSuccess(t, dir)
				c.startWorker("w1", "sim:1x24GiB")
			}
			schedtest.WaitFor(t, "the job to end", func() bool { return c.jobs()[0].State != "running" && c.jobs()[0].State != "queued" })
			j := c.jobs()[0]
			first := j.Attempts[0]
			if j.State != "succeeded" || first.Outcome != "success" || first.Worker != "w1" {
				t.Errorf("the job %s, its attempts %+v; want it succeeded by the first, on w1", j.State, j.Attempts)
			}
			if tt.again && (len(j.Attempts) != 2 || j.Attempts[1].Outcome != "cancelled") {
				t.Errorf("the attempt that started it again: %+v; want it stopped", j.Attempts[1:])
			}
			if !tt.again && len(j.Attempts) != 1 {
				t.Errorf("%d attempts, want the first alone", len(j.Attempts))
			}
			if t.Failed() {
				t.Logf("the daemon's log:\n%s", c.log)
			}
		})
	}
}

// TestAnEndToldLateSaysHowLongAgo: a worker tells the daemon how long ago an attempt
// ended, by its own clock, rather than the time its clock read: an end told again when
// the worker is back after an absence is dated then by the daemon's clock.
func TestAnEndToldLateSaysHowLongAgo(t *testing.T) {
	m := endMessage(scheduler.Exit{Attempt: "s.1/1", At: time.Now().Add(-time.Minute)}, nil)
	if m.ExitAgo < time.Minute || m.ExitAgo > 2*time.Minute || !m.Exit.At.IsZero() {
		t.Errorf("an end a minute ago: %+v ago, at %s", m.ExitAgo, m.Exit.At)
	}
	if m := endMessage(scheduler.Exit{Attempt: "s.1/1"}, nil); m.ExitAgo != 0 {
		t.Errorf("an end of no known time: %s ago", m.ExitAgo)
	}
}

// TestAWorkerStoppedSaysWhatBecomesOfItsTrainers: a worker stopped by SIGTERM says so,
// and that its trainers, which are not its children to stop, run on under its lease,
// until when, and how they are taken up or run again. (It said nothing.)
func TestAWorkerStoppedSaysWhatBecomesOfItsTrainers(t *testing.T) {
	c := startCluster(t)
	w := c.startWorker("w1", "sim:1x24GiB")
	gate, started := filepath.Join(t.TempDir(), "gate"), filepath.Join(t.TempDir(), "started")
	c.submit(fmt.Sprintf("name: held\ncommand: [sh, -c, \"touch %s; while [ ! -e %s ]; do sleep 0.05; done\"]\njobs: [{}]\nmemory: 1GiB\n", started, gate))
	// Its trainer ends once the test has, whatever the test found.
	t.Cleanup(func() { os.WriteFile(gate, nil, 0o644) })
	// Its trainer runs: the daemon shows it running as the worker is asked to start it.
	schedtest.WaitFor(t, "the job's trainer to run on the worker", func() bool {
		_, err := os.Stat(started)
		return err == nil && len(running(c.jobs())["w1"]) == 1
	})
	w.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-w.exited:
	case <-time.After(60 * time.Second):
		t.Fatal("the worker did not stop at SIGTERM")
	}
	if log := w.log.String(); !strings.Contains(log, "stopping, as signalled, leaving 1 trainer (held.1/1) to run on under the lease until ") ||
		!strings.Contains(log, "a worker of this name started again by then takes up what runs") {
		t.Errorf("the worker's log does not say what becomes of its trainer:\n%s", log)
	}
}
