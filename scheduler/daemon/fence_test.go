package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuq/gpuq/launcher"
	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/gpu"
	"github.com/gpuq/gpuq/scheduler/runner"
	"github.com/gpuq/gpuq/scheduler/schedtest"
	"github.com/gpuq/gpuq/scheduler/state"
)

// TestWorkerGraceHoldsTheFence: a grace leaves a worker's trainers a lease, their time
// from SIGTERM to SIGKILL and a margin; one too short for that is refused, naming the
// shortest that is not.
func TestWorkerGraceHoldsTheFence(t *testing.T) {
	for _, tt := range []struct {
		grace, stop time.Duration
		lease       time.Duration // 0: refused
		refusal     string
	}{
		{grace: 2 * time.Minute, stop: 10 * time.Second, lease: 2*time.Minute - 10*time.Second - 2*time.Second - 1200*time.Millisecond},
		{grace: 15 * time.Second, stop: 10 * time.Second, lease: 15*time.Second - 10*time.Second - 2*time.Second - 150*time.Millisecond},
		{grace: 14 * time.Second, stop: 10 * time.Second, refusal: "--worker-grace 14s is too short"},
		{grace: 10 * time.Second, stop: 10 * time.Second, refusal: "10s from SIGTERM to SIGKILL, and a margin of 2.1s; give at least 15s"},
		{grace: 0, stop: 10 * time.Second, refusal: "give at least 15s"},
		{grace: 10 * time.Second, stop: 2 * time.Second, lease: 10*time.Second - 2*time.Second - 2*time.Second - 100*time.Millisecond},
	} {
		f, err := newFence(tt.grace, tt.stop)
		switch {
		case tt.refusal != "" && (err == nil || !strings.Contains(err.Error(), tt.refusal)):
			t.Errorf("grace %s, stop %s: %v, want refused: %q", tt.grace, tt.stop, err, tt.refusal)
		case tt.refusal == "" && (err != nil || f.lease != tt.lease || f.grace != tt.grace || f.stop != tt.stop):
			t.Errorf("grace %s, stop %s: %+v %v, want a lease of %s", tt.grace, tt.stop, f, err, tt.lease)
		}
	}
	// The shortest it names is one it takes.
	for _, stop := range []time.Duration{time.Second, 10 * time.Second, 90 * time.Second} {
		_, err := newFence(0, stop)
		var shortest time.Duration
		if _, s, ok := strings.Cut(err.Error(), "give at least "); ok {
			shortest, _ = time.ParseDuration(s)
		}
		if _, err := newFence(shortest, stop); err != nil || shortest == 0 {
			t.Errorf("stop %s: the shortest grace named, %s, is refused: %v", stop, shortest, err)
		}
		if _, err := newFence(shortest-time.Second, stop); err == nil {
			t.Errorf("stop %s: a grace a second shorter than the shortest named, %s, is taken", stop, shortest)
		}
	}
}

// testClock is the cluster's time in tests: it moves when the test moves it.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) After(d time.Duration) <-chan time.Time { return make(chan time.Time) }

func (c *testClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// testCluster is a cluster of workers alone, on a test clock.
func testCluster(t *testing.T, f fence) (*cluster, *testClock) {
	clock := &testClock{now: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)}
	c := &cluster{local: &machine{}, fence: f, clock: clock, log: runner.NewEventLog(io.Discard), exits: make(chan scheduler.Exit, 64),
		workers: map[string]*remote{}, lost: map[string]map[string]api.AttemptRef{}}
	return c, clock
}

// testLink is a worker's end of its link, as a test holds it.
type testLink struct {
	l    *link
	from chan api.DaemonMessage
	conn net.Conn
}

// linkWorker connects a worker to c as its Hello would.
func linkWorker(t *testing.T, c *cluster, name string) *testLink {
	t.Helper()
	daemonEnd, workerEnd := net.Pipe()
	l, err := c.connect(api.Hello{Name: name, Instance: "i1"}, daemonEnd)
	if err != nil {
		t.Fatal(err)
	}
	tl := &testLink{l: l, from: make(chan api.DaemonMessage, 64), conn: workerEnd}
	go func() {
		dec := json.NewDecoder(workerEnd)
		for {
			var m api.DaemonMessage
			if dec.Decode(&m) != nil {
				close(tl.from)
				return
			}
			tl.from <- m
		}
	}()
	t.Cleanup(func() { workerEnd.Close() })
	return tl
}

func (tl *testLink) next(t *testing.T) api.DaemonMessage {
	t.Helper()
	select {
	case m, ok := <-tl.from:
		if !ok {
			t.Fatal("the link is closed")
		}
		return m
	case <-time.After(10 * time.Second):
		t.Fatal("the daemon said nothing")
	}
	return api.DaemonMessage{}
}

// closed reports whether the daemon has closed the link.
func (tl *testLink) closed() bool {
	select {
	case <-tl.l.done:
		return true
	default:
		return false
	}
}

// TestAWorkersAttemptsRunElsewhereOnlyPastTheFence: a worker's attempts are given up
// for lost the grace after the last of its beats the daemon answered, on the daemon's
// clock; its other messages (its cards every poll) do not hold them, since they renew
// no lease. Its link is cut once its lease has lapsed, and the attempts given up are
// asked about when it is back: a success it holds of one reaches the engine; another
// end does not.
func TestAWorkersAttemptsRunElsewhereOnlyPastTheFence(t *testing.T) {
	f, err := newFence(20*time.Second, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c, clock := testCluster(t, f)
	a1 := &state.Attempt{ID: "s.1/1", Job: "s.1", N: 1, Worker: "w1"}
	a2 := &state.Attempt{ID: "s.2/1", Job: "s.2", N: 1, Worker: "w1"}
	c.Adopt(a1)
	c.Adopt(a2)
	tl := linkWorker(t, c, "w1")
	if wel := tl.next(t).Welcome; wel == nil || wel.Lease != f.lease || wel.Stop != f.stop || len(wel.Attempts) != 2 {
		t.Fatalf("welcome %+v, want the lease, the stop time and both attempts", wel)
	}
	// Its cards take jobs once it has beaten, having answered the Welcome.
	c.heard("w1", tl.l, api.WorkerMessage{State: &api.WorkerState{Cards: []gpu.Card{{Index: 0}}}})
	if cards, _ := c.Read(); len(cards) != 0 {
		t.Errorf("before its first beat, the worker's cards are offered: %+v", cards)
	}
	clock.add(time.Second)
	c.heard("w1", tl.l, api.WorkerMessage{Beat: 1})
	if cards, _ := c.Read(); len(cards) != 1 {
		t.Errorf("after its first beat, the cards offered are %+v", cards)
	}
	if m := tl.next(t); m.Ack != 1 {
		t.Fatalf("a beat was answered with %+v, want ack 1", m)
	}
	beat := clock.Now()
	// Its cards, reported every poll, say nothing of its lease.
	for clock.Now().Sub(beat) < f.grace {
		clock.add(500 * time.Millisecond)
		c.heard("w1", tl.l, api.WorkerMessage{State: &api.WorkerState{}})
		c.tick()
		if since := clock.Now().Sub(beat); since > f.lease && !tl.closed() {
			t.Fatalf("the link is open %s after the last beat answered, past the lease of %s", since, f.lease)
		}
		select {
		case x := <-c.exits:
			t.Fatalf("%s given up %s after the last beat answered, within the grace of %s", x.Attempt, clock.Now().Sub(beat), f.grace)
		default:
		}
	}
	c.away("w1", tl.l, io.EOF)
	clock.add(500 * time.Millisecond)
	c.tick()
	for range 2 {
		select {
		case x := <-c.exits:
			if x.Outcome != plans.Lost || !x.Requeue {
				t.Errorf("given up: %+v, want lost with its job queued again", x)
			}
		default:
			t.Fatalf("the attempts were not given up past the grace")
		}
	}

	back := linkWorker(t, c, "w1")
	wel := back.next(t).Welcome
	if wel == nil || len(wel.Attempts) != 0 || len(wel.Ask) != 2 {
		t.Fatalf("welcome back %+v, want no attempt held and both asked about", wel)
	}
	last := []plans.Reading{{Step: 900, Name: "eval_loss", Value: 0.5}}
	c.heard("w1", back.l, api.WorkerMessage{Exit: &scheduler.Exit{Attempt: a1.ID, Outcome: plans.Success, Detail: "exited with status 0",
		Process: &plans.ProcessExit{Code: 0}, Command: []string{"train"}}, ExitMetrics: last, ExitAgo: 7 * time.Second})
	c.heard("w1", back.l, api.WorkerMessage{Exit: &scheduler.Exit{Attempt: a2.ID, Outcome: plans.Lost, Requeue: true}})
	select {
	case x := <-c.exits:
		if x.Attempt != a1.ID || x.Outcome != plans.Success || x.Requeue || x.Process == nil || len(x.Command) != 1 {
			t.Errorf("the engine hears %+v, want a1's success, with its exit and command", x)
		}
		// Dated when it came, as long ago as the worker says, by the daemon's clock.
		if want := clock.Now().Add(-7 * time.Second); !x.At.Equal(want) {
			t.Errorf("the late success is dated %s, want %s", x.At, want)
		}
	default:
		t.Fatal("the success told late did not reach the engine")
	}
	// What its trainer reported last is there for the engine to read as it applies it.
	if rs := c.Metrics(a1, true); len(rs) != 1 || rs[0] != last[0] {
		t.Errorf("the late success's last readings: %+v, want %+v", rs, last)
	}
	select {
	case x := <-c.exits:
		t.Errorf("the engine hears %+v, which changes nothing", x)
	default:
	}
	if len(c.lost) != 0 {
		t.Errorf("still to ask: %v", c.lost)
	}
}

// TestTheFenceIsOnTheDaemonsMonotonicClock: the times the daemon measures a worker's
// silence from keep the monotonic reading of Go's clock, so that a step of the wall
// clock neither hastens nor delays a requeue.
func TestTheFenceIsOnTheDaemonsMonotonicClock(t *testing.T) {
	f, err := newFence(20*time.Second, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := testCluster(t, f)
	c.clock = scheduler.RealClock{}
	c.Adopt(&state.Attempt{ID: "s.1/1", Job: "s.1", N: 1, Worker: "w1"})
	tl := linkWorker(t, c, "w1")
	tl.next(t)
	c.heard("w1", tl.l, api.WorkerMessage{Beat: 1})
	w := c.workers["w1"]
	for name, at := range map[string]time.Time{"heard": w.heard, "acked": w.acked} {
		// A time with a monotonic reading prints it ("m=+0.001").
		if !strings.Contains(at.String(), " m=") {
			t.Errorf("%s %s has no monotonic reading", name, at)
		}
	}
}

// TestAGoneWorkersAttemptEndsAsItsDirectorySays: a worker's attempt given up past the
// grace ends as its exit.json says where the daemon can read it (a shared home): a
// trainer that succeeded while its worker was gone has succeeded, and its job does not
// run again; one fenced, or with no end to read, is lost and its job queued again, and
// the worker is asked about it when it is back.
func TestAGoneWorkersAttemptEndsAsItsDirectorySays(t *testing.T) {
	for _, tt := range []struct {
		name    string
		ended   *launcher.Ended
		want    plans.Outcome
		requeue bool
		asked   bool
	}{
		{"succeeded meanwhile", &launcher.Ended{Outcome: plans.Success}, plans.Success, false, false},
		{"failed meanwhile", &launcher.Ended{Outcome: plans.Failed, Detail: "exited with status 1"}, plans.Failed, false, false},
		{"fenced", &launcher.Ended{Outcome: plans.Lost, Fenced: true}, plans.Lost, true, false},
		{"no end to read", nil, plans.Lost, true, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f, err := newFence(20*time.Second, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			c, clock := testCluster(t, f)
			dir := t.TempDir()
			if tt.ended != nil {
				if err := launcher.WriteJSON(filepath.Join(dir, "exit.json"), tt.ended); err != nil {
					t.Fatal(err)
				}
			}
			c.Adopt(&state.Attempt{ID: "s.1/1", Job: "s.1", N: 1, Worker: "w1", Log: launcher.LogPath(dir)})
			clock.add(f.grace + time.Second)
			c.tick()
			select {
			case x := <-c.exits:
				if x.Outcome != tt.want || x.Requeue != tt.requeue {
					t.Errorf("the engine hears %+v, want %s (requeue %v)", x, tt.want, tt.requeue)
				}
			default:
				t.Fatal("the attempt was not given up")
			}
			if _, asked := c.lost["w1"]["s.1/1"]; asked != tt.asked {
				t.Errorf("the worker is to be asked about it: %v, want %v", asked, tt.asked)
			}
		})
	}
}

// TestAWorkerStartedAttemptEndsAsItsDirectorySays: an attempt the daemon started on a
// worker is kept with its log in the worker's directory, so that, given up past the
// grace, it ends as its exit.json there says: a trainer that succeeded while its
// worker was gone does not run again. (It was kept without: its job ran twice.)
func TestAWorkerStartedAttemptEndsAsItsDirectorySays(t *testing.T) {
	f, err := newFence(20*time.Second, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c, clock := testCluster(t, f)
	home := t.TempDir()
	daemonEnd, workerEnd := net.Pipe()
	go io.Copy(io.Discard, workerEnd) // the worker reads what it is sent
	l, err := c.connect(api.Hello{Name: "w1", Instance: "i1", Dir: home}, daemonEnd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { workerEnd.Close() })
	a := &state.Attempt{ID: "s.1/1", Job: "s.1", N: 1, Worker: "w1", GPUs: []int{0}}
	st, err := c.Start(scheduler.Launch{Attempt: a, Submission: &state.Submission{Sweep: &plans.Sweep{Name: "s"}}})
	if err != nil || st.Log == "" {
		t.Fatalf("started: %+v, %v", st, err)
	}
	// The worker made its directory and its trainer succeeded there.
	if err := os.MkdirAll(filepath.Dir(st.Log), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := launcher.WriteJSON(filepath.Join(filepath.Dir(st.Log), "exit.json"), &launcher.Ended{Outcome: plans.Success}); err != nil {
		t.Fatal(err)
	}
	c.away("w1", l, io.EOF) // the worker goes away, and is not heard from past its grace
	clock.add(f.grace + time.Second)
	c.tick()
	select {
	case x := <-c.exits:
		if x.Outcome != plans.Success || x.Requeue {
			t.Errorf("the engine hears %+v, want success as exit.json says", x)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the attempt was not given up")
	}
}

// TestALostAttemptEndsWhenItsWorkerWasLastHeard: an attempt given up for lost with its
// worker ends when the worker was last heard from, not when its grace ran out: the wait
// is no part of its run (a 14 s trainer showed 26 s in gpuq status).
func TestALostAttemptEndsWhenItsWorkerWasLastHeard(t *testing.T) {
	f, err := newFence(20*time.Second, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c, clock := testCluster(t, f)
	c.Adopt(&state.Attempt{ID: "s.1/1", Job: "s.1", N: 1, Worker: "w1"})
	tl := linkWorker(t, c, "w1")
	tl.next(t)
	clock.add(3 * time.Second)
	c.heard("w1", tl.l, api.WorkerMessage{Beat: 1})
	clock.add(2 * time.Second)
	c.heard("w1", tl.l, api.WorkerMessage{State: &api.WorkerState{}})
	last := clock.Now()
	c.away("w1", tl.l, io.EOF)
	clock.add(f.grace)
	c.tick()
	select {
	case x := <-c.exits:
		if x.Outcome != plans.Lost || !x.At.Equal(last) {
			t.Errorf("the engine hears %+v, want lost, ended at %s, when the worker was last heard from", x, last)
		}
	default:
		t.Fatal("the attempt was not given up")
	}
}

// TestAWorkerAwayIsSaid: while a worker is away within its grace, its job is not said
// to run plainly: gpuq status (the job, and the listing) and gpuq why say that its
// worker is away, since when and until when, and gpuq top keeps its cards, marked away,
// with the jobs held there. (Top lost them, and the rest said "running".)
func TestAWorkerAwayIsSaid(t *testing.T) {
	d, _, _ := testDaemon(t)
	f, err := newFence(20*time.Second, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c, clock := testCluster(t, f)
	d.cluster = c
	client := clientOf(t, d)
	if _, err := client.Submit(api.SubmitRequest{File: "/s/a.yaml", Source: "name: a\ncommand: [train]\njobs: [{}]\nmemory: 1GiB\n"}); err != nil {
		t.Fatal(err)
	}
	schedtest.WaitFor(t, "the job to run", func() bool { return len(d.store.View().Running()) == 1 })
	// The attempt is moved to worker w1, as if the engine had placed it there.
	a := *d.store.View().Attempt("a.1/1")
	a.Worker = "w1"
	if err := d.eng.Put(context.Background(), state.Change{Attempts: []*state.Attempt{&a}}); err != nil {
		t.Fatal(err)
	}
	c.Adopt(&a)
	// Taken up from the state as a daemon started again does, before w1 links: the
	// daemon never heard from it, and says so rather than that it last did at its start.
	started := clock.Now()
	clock.add(3 * time.Second)
	unheard := api.WorkerAway{Since: started, Until: started.Add(f.grace), Unheard: true}
	if j, err := client.Job("a.1"); err != nil || j.Attempts[0].WorkerAway == nil || *j.Attempts[0].WorkerAway != unheard {
		t.Errorf("gpuq status a.1 before w1 links: %+v %v, want its worker away %+v", j.Attempts, err, unheard)
	}
	if why, err := client.Why("a.1"); err != nil || !strings.Contains(why.Detail, "but worker w1 is away, not heard from since the daemon started at 09:00:00; unless it is back within 17s") {
		t.Errorf("gpuq why a.1 before w1 links: %+v %v", why, err)
	}
	if ws := c.info(nil); len(ws) != 1 || !ws[0].Unheard || !ws[0].Heard.Equal(started) || len(ws[0].GPUs) != 1 || ws[0].GPUs[0].Index != 0 {
		t.Errorf("gpuq gpus' workers before w1 links: %+v, want w1 not heard from since the daemon started, with its card 0", ws)
	}
	// Its cards are known by the attempts it runs alone, until it reports them: gpuq top
	// shows them away, and a drain may name them.
	w10 := plans.CardID{Worker: "w1", Index: 0}
	if got := c.Away(); !slices.Equal(got, []plans.CardID{w10}) || !c.Keeps(w10) || c.Keeps(plans.CardID{Worker: "w1", Index: 1}) {
		t.Errorf("before w1 links: Away() = %v, Keeps(w1:0) = %v; want w1:0 alone", got, c.Keeps(w10))
	}
	if ov, err := client.Overview(); err != nil || !slices.ContainsFunc(ov.GPUs, func(g api.GPUView) bool {
		return g.Worker == "w1" && g.Index == 0 && g.WorkerAway != nil && g.WorkerAway.Unheard && len(g.Jobs) == 1 && g.Jobs[0].Job == "a.1"
	}) {
		t.Errorf("gpuq top before w1 links: %+v %v, want w1:0 away with a.1", ov.GPUs, err)
	}
	// Another attempt taken up there, on card 2, stopped meanwhile: its card stays known.
	c.Adopt(&state.Attempt{ID: "b.1/1", Job: "b.1", N: 1, Worker: "w1", GPUs: []int{2}})
	c.Stop(&state.Attempt{ID: "b.1/1", Job: "b.1", N: 1, Worker: "w1", GPUs: []int{2}})
	if got := c.Away(); !slices.Equal(got, []plans.CardID{w10, {Worker: "w1", Index: 2}}) {
		t.Errorf("an attempt taken up on w1:2 stopped: Away() = %v, want w1:0 and w1:2", got)
	}
	tl := linkWorker(t, c, "w1")
	tl.next(t)
	c.heard("w1", tl.l, api.WorkerMessage{Beat: 1, State: &api.WorkerState{Cards: []gpu.Card{{Index: 0, Total: 24 << 30}, {Index: 1, Total: 24 << 30}}}})
	if ws := c.info(nil); len(ws) != 1 || ws[0].Unheard {
		t.Errorf("gpuq gpus' workers once w1 linked: %+v, want it heard from", ws)
	}
	heard := clock.Now()
	if j, err := client.Job("a.1"); err != nil || j.Attempts[0].WorkerAway != nil {
		t.Fatalf("linked, the job's attempt is said to be away: %+v %v", j.Attempts, err)
	}
	c.away("w1", tl.l, io.EOF)
	clock.add(5 * time.Second)
	want := api.WorkerAway{Since: heard, Until: heard.Add(f.grace)}

	j, err := client.Job("a.1")
	if err != nil || j.State != "running" || j.Attempts[0].WorkerAway == nil || *j.Attempts[0].WorkerAway != want {
		t.Errorf("gpuq status a.1: %+v %v, want running, its worker away %+v", j.Attempts, err, want)
	}
	jobs, err := client.Jobs("", nil)
	if err != nil || len(jobs) != 1 || jobs[0].Attempts[0].WorkerAway == nil {
		t.Errorf("gpuq status: %+v %v, want its worker away", jobs, err)
	}
	why, err := client.Why("a.1")
	if err != nil || !strings.Contains(why.Detail, "it is running: attempt 1 on GPU w1:0") ||
		!strings.Contains(why.Detail, "but worker w1 is away, not heard from since 09:00:03; unless it is back within 15s") {
		t.Errorf("gpuq why a.1: %+v %v, want it running, its worker away", why, err)
	}
	ov, err := client.Overview()
	if err != nil {
		t.Fatal(err)
	}
	var away []string
	for _, g := range ov.GPUs {
		if g.WorkerAway != nil {
			away = append(away, fmt.Sprintf("%s:%d %d %v", g.Worker, g.Index, g.Busy, g.Jobs))
		}
	}
	if strings.Join(away, "; ") != "w1:0 1 [{a.1 0 1073741824}]; w1:1 0 []" || ov.GPUs[0].Worker != "" {
		t.Errorf("gpuq top's cards away: %q (of %+v), want w1's two after this machine's, a.1 on w1:0", away, ov.GPUs)
	}
	// A job that waits (this machine's cards drained) is told of the worker away in gpuq
	// top's queue, as gpuq why says.
	for _, g := range ov.GPUs {
		if g.Worker == "" {
			if err := client.DrainCard(api.DrainRequest{GPU: g.Index, On: true}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := client.Submit(api.SubmitRequest{File: "/s/b.yaml", Source: "name: b\ncommand: [train]\njobs: [{}]\nmemory: 1GiB\n"}); err != nil {
		t.Fatal(err)
	}
	const note = "; worker w1 is away, and its cards count for no job until it links again"
	schedtest.WaitFor(t, "b.1 to wait, told of w1 away in gpuq why and gpuq top", func() bool {
		why, err := client.Why("b.1")
		ov, oerr := client.Overview()
		return err == nil && oerr == nil && why.Reason != "" && strings.HasSuffix(why.Detail, note) &&
			slices.ContainsFunc(ov.Queue, func(q api.WaitingJob) bool { return q.Job == "b.1" && strings.HasSuffix(q.Reason, note) })
	})
}

// TestTheClusterKeepsCardsAway: the cards a worker last reported are kept (for drain and
// undrain) while it is linked, not yet ready, or away within its grace; not once it is
// gone past the grace, nor when it left drained with nothing running, nor another
// index or worker.
func TestTheClusterKeepsCardsAway(t *testing.T) {
	f, err := newFence(20*time.Second, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c, clock := testCluster(t, f)
	var k scheduler.Keeper = c
	w1 := plans.CardID{Worker: "w1", Index: 1}
	keeps := func(want bool, when string, cards ...plans.CardID) {
		t.Helper()
		for _, card := range cards {
			if got := k.Keeps(card); got != want {
				t.Errorf("%s: Keeps(%s) = %v, want %v", when, card, got, want)
			}
		}
	}
	tl := linkWorker(t, c, "w1")
	tl.next(t)
	c.heard("w1", tl.l, api.WorkerMessage{State: &api.WorkerState{Cards: []gpu.Card{{Index: 0}, {Index: 1}}}})
	keeps(true, "linked, not yet ready", w1)
	c.heard("w1", tl.l, api.WorkerMessage{Beat: 1})
	keeps(true, "ready", w1)
	keeps(false, "another index, another worker", plans.CardID{Worker: "w1", Index: 2}, plans.CardID{Worker: "w9", Index: 1}, plans.CardID{Index: 1})
	away := func(when string, want ...plans.CardID) {
		t.Helper()
		if got := k.Away(); !slices.Equal(got, want) {
			t.Errorf("%s: Away() = %v, want %v", when, got, want)
		}
	}
	away("linked")
	c.away("w1", tl.l, io.EOF)
	clock.add(15 * time.Second)
	c.tick()
	keeps(true, "away within its grace", w1)
	away("away within its grace", plans.CardID{Worker: "w1", Index: 0}, w1)
	clock.add(10 * time.Second)
	c.tick()
	keeps(false, "gone past its grace", w1)
	away("gone past its grace")

	// A stop of an attempt there, the worker gone since the engine read it, makes no
	// record of it again (gpuq gpus would show it away, heard at that moment).
	c.Stop(&state.Attempt{ID: "s.1/1", Job: "s.1", N: 1, Worker: "w1", GPUs: []int{1}})
	if ws := c.info(nil); len(ws) != 0 {
		t.Errorf("a stop on w1, gone: workers %+v, want none", ws)
	}

	tl = linkWorker(t, c, "w2")
	tl.next(t)
	c.heard("w2", tl.l, api.WorkerMessage{Beat: 1, Leaving: true, State: &api.WorkerState{Cards: []gpu.Card{{Index: 0}}}})
	c.away("w2", tl.l, io.EOF)
	keeps(false, "left drained with nothing running", plans.CardID{Worker: "w2", Index: 0})
}

// TestASecondWorkerOfOneNameIsRefusedAfterARestart: a daemon started again while a
// worker runs its attempts refuses another worker of that name (another node's, its
// instance another) that links first, as the daemon before did: welcomed with the
// first one's attempts, which it never had, it reported them unstarted, and their
// jobs ran again there while the first one's trainers ran on. The first is taken up.
func TestASecondWorkerOfOneNameIsRefusedAfterARestart(t *testing.T) {
	f, err := newFence(20*time.Second, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	link := func(c *cluster, instance string) error {
		daemonEnd, workerEnd := net.Pipe()
		go io.Copy(io.Discard, workerEnd)
		t.Cleanup(func() { workerEnd.Close() })
		_, err := c.connect(api.Hello{Name: "n1", Instance: instance}, daemonEnd)
		return err
	}
	before, _ := testCluster(t, f)
	before.loadInstances(filepath.Join(dir, instancesFile))
	if err := link(before, "first"); err != nil {
		t.Fatal(err)
	}
	// Started again, the daemon takes up the attempt that runs on n1.
	after, _ := testCluster(t, f)
	after.loadInstances(filepath.Join(dir, instancesFile))
	after.Adopt(&state.Attempt{ID: "s.1/1", Job: "s.1", N: 1, Worker: "n1", GPUs: []int{0}})
	if err := link(after, "second"); err == nil || !strings.Contains(err.Error(), "another gpuq worker named n1") {
		t.Errorf("another worker named n1, linked first after the restart: %v, want refused", err)
	}
	if err := link(after, "first"); err != nil {
		t.Errorf("the worker that runs the attempt: %v", err)
	}
}

// TestAWorkerOfAnotherProtocolIsRefused: a worker whose gpuq speaks another protocol of
// the worker link is refused, naming both gpuqs and what to do, and the daemon's log
// says so; one of another build that speaks the daemon's is linked, with a warning in
// the log and in what the API says of it; one that says no protocol (a gpuq from
// before it was said) speaks the first, and dev builds are told apart only by their
// commits.
func TestAWorkerOfAnotherProtocolIsRefused(t *testing.T) {
	f, err := newFence(20*time.Second, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	const daemonVersion = "v0.4.0 (commit 0123456789ab, 2026-03-01T09:00:00Z), built with go1.24.1"
	c, _ := testCluster(t, f)
	var log schedtest.Buffer
	c.log, c.version = runner.NewEventLog(&log), daemonVersion
	link := func(h api.Hello) error {
		daemonEnd, workerEnd := net.Pipe()
		go io.Copy(io.Discard, workerEnd)
		t.Cleanup(func() { workerEnd.Close() })
		_, err := c.connect(h, daemonEnd)
		return err
	}
	err = link(api.Hello{Name: "n1", Instance: "i1", Version: "v0.9.0", Protocol: api.WorkerProtocol + 1})
	want := fmt.Sprintf("this worker runs gpuq v0.9.0, which speaks protocol %d of the worker link, and the daemon runs gpuq %s, which speaks protocol %d: "+
		"the two would misread each other; install the daemon's gpuq on this node", api.WorkerProtocol+1, daemonVersion, api.WorkerProtocol)
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("a worker of another protocol: %v; want refused, %q", err, want)
	}
	if !strings.Contains(log.String(), "refused worker n1: it runs gpuq v0.9.0, which speaks protocol") {
		t.Errorf("the log of a refusal: %s", log.String())
	}
	if len(c.info(nil)) != 0 {
		t.Errorf("a refused worker is listed: %+v", c.info(nil))
	}
	for _, tc := range []struct {
		name, version string
		protocol      int
		other         bool
	}{
		{"n2", "v0.5.0, built with go1.24.1", api.WorkerProtocol, true},
		{"n3", "v0.4.0 (commit 0123456789ab, 2026-03-01T09:00:00Z), built with go1.25.0", api.WorkerProtocol, false},
		{"n4", "dev", 0, false},
	} {
		log = schedtest.Buffer{}
		if err := link(api.Hello{Name: tc.name, Instance: "i1", Version: tc.version, Protocol: tc.protocol}); err != nil {
			t.Errorf("worker %s, gpuq %s: %v", tc.name, tc.version, err)
			continue
		}
		warned := strings.Contains(log.String(), fmt.Sprintf("warning: worker %s runs gpuq %s, and this daemon gpuq %s", tc.name, tc.version, daemonVersion))
		var listed api.WorkerInfo
		for _, wi := range c.info(nil) {
			if wi.Name == tc.name {
				listed = wi
			}
		}
		if warned != tc.other || listed.OtherBuild != tc.other {
			t.Errorf("worker %s, gpuq %s: warned %v, listed as another build %v; want %v:\n%s", tc.name, tc.version, warned, listed.OtherBuild, tc.other, log.String())
		}
	}
}

// TestTheWelcomeSaysTheDaemonsProtocol: the daemon's Welcome says which protocol of
// the worker link it speaks, and its gpuq, for a worker to leave a daemon that would
// misread it and to warn of one of another build.
func TestTheWelcomeSaysTheDaemonsProtocol(t *testing.T) {
	f, err := newFence(20*time.Second, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := testCluster(t, f)
	c.version = "v0.4.0 (commit 0123456789ab, 2026-03-01T09:00:00Z), built with go1.24.1"
	m := linkWorker(t, c, "n1").next(t)
	if m.Welcome == nil || m.Welcome.Protocol != api.WorkerProtocol || m.Welcome.Version != c.version {
		t.Errorf("the daemon's first message: %+v; want a Welcome of protocol %d, gpuq %s", m, api.WorkerProtocol, c.version)
	}
}
