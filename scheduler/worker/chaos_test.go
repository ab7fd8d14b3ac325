package worker

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuq/gpuq/launcher"
	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/daemon"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
)

// The chaos run: a daemon and three workers, each a process of its own, run a sweep
// while the test kills and freezes them, and the trainers' own records say whether any
// job ran twice (finished twice, or ran beside another attempt of itself), never
// started, or was lost. It takes minutes, so it runs only when asked:
//
//	GPUQ_CHAOS_JOBS=300 go test -count=1 -run TestWorkerChaos -timeout 60m -v ./scheduler/worker/
//
// GPUQ_CHAOS_SEED picks the faults (default: the time).

const (
	asDaemon  = "GPUQ_TEST_DAEMON" // the daemon's state directory
	envListen = "GPUQ_TEST_LISTEN"
)

// runTestDaemon runs a daemon with no cards of its own until SIGTERM, listening for
// workers at the address its environment names.
func runTestDaemon(state string) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	return daemon.Run(ctx, daemon.Config{StateDir: state, Machine: plans.Overrides{GPUs: plans.Override{Value: daemon.NoCards, Source: "test"}},
		Poll: 200 * time.Millisecond, Supervisor: []string{os.Args[0]}, Version: "test", Log: os.Stderr,
		Listen: os.Getenv(envListen), WorkerGrace: grace})
}

// chaos is a chaos run's machines.
type chaos struct {
	t       *testing.T
	rnd     *rand.Rand
	state   string
	addr    string
	daemon  *proc
	workers map[string]*proc
	ledger  string
	faults  map[string]int
}

// chaosTrainer records its attempt's start, a beat every 0.1 s and its end in the
// job's own file: 6 s of work, and 1 s to save when asked to stop (within stopGrace).
const chaosTrainer = `f=%s/{job}; a={attempt}; echo "start $a $(date +%%s%%N)" >> $f; ` +
	`trap 'echo "term $a $(date +%%s%%N)" >> $f; sleep 1; exit 1' TERM; ` +
	`i=0; while [ $i -lt 60 ]; do echo "beat $a $(date +%%s%%N)" >> $f; sleep 0.1; i=$((i+1)); done; ` +
	`echo "done $a $(date +%%s%%N)" >> $f`

func TestWorkerChaos(t *testing.T) {
	jobs, _ := strconv.Atoi(os.Getenv("GPUQ_CHAOS_JOBS"))
	if jobs <= 0 {
		t.Skip("a chaos run of minutes: GPUQ_CHAOS_JOBS=300 go test -count=1 -run TestWorkerChaos -timeout 60m -v ./scheduler/worker/")
	}
	seed, err := strconv.ParseUint(os.Getenv("GPUQ_CHAOS_SEED"), 10, 64)
	if err != nil {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (GPUQ_CHAOS_SEED), %d jobs, grace %s, stop time %s", seed, jobs, grace, stopGrace)
	c := &chaos{t: t, rnd: rand.New(rand.NewPCG(seed, 0)), state: filepath.Join(t.TempDir(), "state"), workers: map[string]*proc{},
		ledger: filepath.Join(t.TempDir(), "ledger"), faults: map[string]int{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c.addr = ln.Addr().String()
	ln.Close()
	c.startDaemon()
	c.client(func(cl *api.Client) error { _, err := cl.Info(); return err })
	for _, name := range []string{"n1", "n2", "n3"} {
		c.startWorker(name)
	}
	records := t.TempDir()
	seeds := make([]string, jobs)
	for i := range seeds {
		seeds[i] = strconv.Itoa(i + 1)
	}
	doc := fmt.Sprintf("name: chaos\ncommand: [sh, -c, %q]\nmatrix: {seed: [%s]}\nmemory: 10GiB\ngpu_plan: \"1\"\noom: {max_attempts: 1}\n",
		fmt.Sprintf(chaosTrainer, records), strings.Join(seeds, ", "))
	sweep := filepath.Join(t.TempDir(), "chaos.yaml")
	if err := os.WriteFile(sweep, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	c.client(func(cl *api.Client) error {
		_, err := cl.Submit(api.SubmitRequest{File: sweep, Source: doc, Environ: os.Environ()})
		return err
	})

	began := time.Now()
	for !c.ended() {
		if time.Since(began) > 40*time.Minute {
			t.Fatalf("the jobs did not end within 40 minutes")
		}
		time.Sleep(c.between(time.Second, 3*time.Second))
		c.fault()
	}
	t.Logf("all jobs ended after %s; faults: %v", time.Since(began).Round(time.Second), c.faults)
	c.judge(records, jobs)
}

// client calls fn with a client of the daemon, until it answers.
func (c *chaos) client(fn func(*api.Client) error) {
	c.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		cl, err := api.Dial(c.state)
		if err == nil {
			if err = fn(cl); err == nil {
				return
			}
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("the daemon does not answer: %v\n%s", err, c.daemon.log)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// ended reports whether every job has ended.
func (c *chaos) ended() bool {
	var open int
	c.client(func(cl *api.Client) error {
		jobs, err := cl.Jobs("chaos", []string{"queued", "running"})
		open = len(jobs)
		return err
	})
	return open == 0
}

func (c *chaos) startDaemon() {
	c.daemon = spawn(c.t, "the daemon", []string{asDaemon + "=" + c.state, envListen + "=" + c.addr})
}

func (c *chaos) startWorker(name string) {
	c.workers[name] = spawn(c.t, name, []string{asWorker + "=" + name, envState + "=" + c.state, envServer + "=" + c.addr,
		envGPUs + "=sim:2x24GiB", "GPUQ_SIM_LEDGER=" + c.ledger})
}

func (c *chaos) killDaemon() {
	c.daemon.cmd.Process.Signal(syscall.SIGKILL)
	<-c.daemon.exited
}

func (c *chaos) killWorker(name string) {
	c.workers[name].kill(c.t)
}

// between is a random time from lo to hi.
func (c *chaos) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(c.rnd.Int64N(int64(hi-lo)))
}

// lease is about the lease a worker's trainers run on past its last answered beat.
const lease = grace - stopGrace - 2*time.Second

// faultKinds are the faults fault draws from, in the order of its cases.
var faultKinds = []string{
	"worker kill -9, back within the grace",
	"worker kill -9, back past the grace",
	"daemon kill -9",
	"daemon and worker kill -9, the worker back past the grace",
	"worker's node frozen (SIGSTOP) past the grace",
	"worker alone frozen (SIGSTOP) past its lease",
}

// fault does one fault, drawn at random, and undoes it: what a cluster's nodes and its
// login node go through.
func (c *chaos) fault() {
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range c.workers {
			if !yield(n) {
				return
			}
		}
	})
	name := names[c.rnd.IntN(len(names))]
	k := c.rnd.IntN(len(faultKinds))
	c.faults[faultKinds[k]]++
	c.t.Logf("%s %s: %s", time.Now().Format("15:04:05.000"), name, faultKinds[k])
	switch k {
	case 0:
		c.killWorker(name)
		time.Sleep(c.between(500*time.Millisecond, lease/2))
		c.startWorker(name)
	case 1:
		c.killWorker(name)
		time.Sleep(c.between(grace+time.Second, grace+5*time.Second))
		c.startWorker(name)
	case 2:
		c.killDaemon()
		time.Sleep(c.between(500*time.Millisecond, lease+3*time.Second))
		c.startDaemon()
	case 3:
		c.killDaemon()
		c.killWorker(name)
		time.Sleep(c.between(500*time.Millisecond, 2*time.Second))
		c.startDaemon()
		time.Sleep(c.between(grace+time.Second, grace+5*time.Second))
		c.startWorker(name)
	case 4:
		node := c.freeze(name)
		time.Sleep(c.between(grace+time.Second, grace+5*time.Second))
		// As a VM thaws, its processes run again together: here the worker first, then
		// the supervisors and trainers, in the order found.
		for _, pid := range node {
			syscall.Kill(pid, syscall.SIGCONT)
		}
	case 5:
		w := c.workers[name].cmd.Process
		w.Signal(syscall.SIGSTOP)
		time.Sleep(c.between(lease+time.Second, grace+3*time.Second))
		w.Signal(syscall.SIGCONT)
	}
}

// freeze stops (SIGSTOP) a worker's node as far as it runs gpuq, as a paused VM is: the
// worker, then its supervisors and everything of its attempts, found again until no
// process of theirs is left running (one started as the worker froze). It returns them
// in the order it stopped them.
func (c *chaos) freeze(name string) []int {
	w := c.workers[name].cmd.Process.Pid
	syscall.Kill(w, syscall.SIGSTOP)
	frozen := []int{w}
	seen := map[int]bool{w: true}
	root := filepath.Join(c.state, "workers", name, "attempts") + string(filepath.Separator)
	for found := true; found; {
		found = false
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || seen[pid] {
				continue
			}
			cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			environ, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
			if bytes.Contains(cmdline, []byte(root)) || bytes.Contains(environ, []byte("GPUQ_ATTEMPT_DIR="+root)) {
				syscall.Kill(pid, syscall.SIGSTOP)
				frozen, seen[pid], found = append(frozen, pid), true, true
			}
		}
	}
	return frozen
}

// span is what an attempt's records say of it: when it ran (its records' times), and
// whether it finished: its last record says done, not stopped after it.
type span struct {
	at   []int64
	done bool
}

func (s *span) first() int64 { return s.at[0] }
func (s *span) last() int64  { return s.at[len(s.at)-1] }

// judge reads the daemon's jobs and the trainers' records, and says how many jobs ran
// twice, never started, or were lost.
func (c *chaos) judge(records string, n int) {
	var jobs []api.Job
	c.client(func(cl *api.Client) error {
		var err error
		jobs, err = cl.Jobs("chaos", nil)
		return err
	})
	var twice, workedTwice, beside, thawBeat, never, lost []string
	var attempts, requeued, late int
	var overlap time.Duration
	for _, j := range jobs {
		attempts += len(j.Attempts)
		for _, a := range j.Attempts[:max(len(j.Attempts)-1, 0)] {
			if a.Outcome == "lost" {
				requeued++
			}
		}
		if len(j.Attempts) > 1 && j.Attempts[0].Outcome == "success" {
			late++
		}
		if j.State != "succeeded" {
			lost = append(lost, fmt.Sprintf("%s %s", j.ID, j.State))
		}
		spans := readSpans(filepath.Join(records, j.ID))
		if len(spans) == 0 {
			never = append(never, j.ID)
		}
		done := 0
		for _, s := range spans {
			if s.done {
				done++
			}
		}
		if done > 1 {
			workedTwice = append(workedTwice, j.ID)
		}
		if succeeded(j) > 1 {
			twice = append(twice, j.ID)
		}
		// One record is the beat a trainer frozen with its node writes as it thaws, in
		// the moment before it is killed; more is a trainer that ran on.
		switch n, o := besideOf(spans); {
		case n == 1:
			thawBeat = append(thawBeat, j.ID)
		case n > 1:
			beside = append(beside, fmt.Sprintf("%s (%d records over %s)", j.ID, n, o))
			overlap = max(overlap, o)
		}
	}
	if len(jobs) != n {
		c.t.Errorf("the daemon has %d jobs, %d were submitted", len(jobs), n)
	}
	c.t.Logf("%d jobs, %d attempts, %d attempts given up and run again, %d successes told late; "+
		"finished twice (two attempts ended a success): %d, ran beside another attempt of itself: %d (its records there spanning at most %s), "+
		"never started: %d, lost or not succeeded: %d; wrote one record as it thawed beside its replacement: %d %v; "+
		"did their work twice (done twice in the records, stopped as they ended): %d %v",
		len(jobs), attempts, requeued, late, len(twice), len(beside), overlap, len(never), len(lost), len(thawBeat), thawBeat, len(workedTwice), workedTwice)
	if len(twice)+len(beside)+len(never)+len(lost) > 0 {
		c.t.Errorf("finished twice %v; ran beside another attempt %v; never started %v; lost %v", twice, beside, never, lost)
		for _, j := range jobs {
			if id := j.ID + " "; strings.Contains(fmt.Sprint(twice, beside, never, lost), id) || slices.Contains(twice, j.ID) {
				data, _ := os.ReadFile(filepath.Join(records, j.ID))
				c.t.Logf("%s: attempts %+v\nrecords:\n%s", j.ID, j.Attempts, data)
			}
		}
	}
}

// succeeded counts a job's attempts whose supervisors recorded a success (exit.json).
func succeeded(j api.Job) int {
	n := 0
	for _, a := range j.Attempts {
		if a.Log == "" {
			continue
		}
		if e, _ := launcher.ReadEnded(filepath.Dir(a.Log)); e != nil && e.Outcome == plans.Success {
			n++
		}
	}
	return n
}

// readSpans reads a job's records, by attempt.
func readSpans(path string) map[string]*span {
	data, _ := os.ReadFile(path)
	out := map[string]*span{}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			continue
		}
		ns, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil {
			continue
		}
		s := out[f[1]]
		if s == nil {
			s = &span{}
			out[f[1]] = s
		}
		s.at = append(s.at, ns)
		s.done = f[0] == "done"
	}
	for _, s := range out {
		slices.Sort(s.at)
	}
	return out
}

// besideOf is the most records an attempt of a job wrote while another one ran, and
// over how long: records that fall between two consecutive records of the other,
// written less than 2 s apart (it ran then: a trainer frozen writes nothing, and its
// records' gap spans the freeze).
func besideOf(spans map[string]*span) (n int, over time.Duration) {
	for a, s := range spans {
		for b, o := range spans {
			if a == b {
				continue
			}
			var in []int64
			for _, at := range s.at {
				i, _ := slices.BinarySearch(o.at, at)
				if i > 0 && i < len(o.at) && o.at[i]-o.at[i-1] < int64(2*time.Second) {
					in = append(in, at)
				}
			}
			if len(in) > n {
				n, over = len(in), time.Duration(in[len(in)-1]-in[0])
			}
		}
	}
	return n, over
}

// TestChaosCountsWhatRanBeside: the chaos run's measure of an attempt that ran beside
// another counts the records it wrote while the other ran, not the time it was frozen.
func TestChaosCountsWhatRanBeside(t *testing.T) {
	at := func(secs ...float64) *span {
		s := &span{}
		for _, x := range secs {
			s.at = append(s.at, int64(x*float64(time.Second)))
		}
		return s
	}
	for _, tt := range []struct {
		name  string
		spans map[string]*span
		want  int
	}{
		{"one after the other", map[string]*span{"1": at(0, 0.1, 0.2), "2": at(0.3, 0.4, 0.5)}, 0},
		{"frozen through the other's run", map[string]*span{"1": at(0, 0.1, 12.3), "2": at(11, 11.1, 11.2, 11.3)}, 0},
		{"a beat as it thawed, while the other ran", map[string]*span{"1": at(0, 0.1, 11.15), "2": at(11, 11.1, 11.2, 13)}, 1},
		{"side by side", map[string]*span{"1": at(0, 0.1, 0.2, 0.3), "2": at(0.05, 0.15, 0.25)}, 3},
	} {
		if n, _ := besideOf(tt.spans); n != tt.want {
			t.Errorf("%s: %d records beside, want %d", tt.name, n, tt.want)
		}
	}
}
