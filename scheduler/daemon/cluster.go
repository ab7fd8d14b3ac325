package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/gpuq/gpuq/launcher"
	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/gpu"
	"github.com/gpuq/gpuq/scheduler/runner"
	"github.com/gpuq/gpuq/scheduler/state"
)

// cluster is a listening daemon's machines as its engine sees them: its own, the first
// worker (named ""), and the gpuq workers that connect to it. It is the engine's
// Inventory (a scheduler.Cluster) and its Runner: it starts, stops and takes up each
// attempt where it runs, and merges how they end.
//
// A worker that goes away (its node failed, its allocation ended, it was killed, frozen
// or cut off) keeps its attempts for a grace period from the last of its beats the
// daemon answered: back within it, it takes them up again, as a restarted daemon takes
// up its supervisors. Past it, they are reported lost with Requeue, so their jobs run
// again at their tier; by then the worker's lease has stopped them (see fence.go), so
// nothing runs twice, however slow or frozen the worker was. Should the worker come
// back holding a success of one of them after all, the success wins (see api.Welcome.Ask).
type cluster struct {
	local  *machine
	runner *runner.Supervised // this machine's attempts
	fence  fence
	clock  scheduler.Clock
	log    *runner.EventLog
	exits  chan scheduler.Exit
	// version is the daemon's gpuq, as gpuq --version says it, which a worker's is
	// told beside (see connect).
	version string

	mu      sync.Mutex
	workers map[string]*remote
	// lost are the attempts given up for lost with each worker whose ends it has not
	// told, by worker and attempt id: it is asked for them when it is back.
	lost map[string]map[string]api.AttemptRef
	// streams are the requests for a worker's attempt streams, by token, each waiting
	// for the worker to open it.
	streams map[string]chan io.ReadWriteCloser
	// instances are the workers' instances (api.Hello.Instance) as last kept in the
	// file instancesPath ("": none kept), by name: a daemon started again tells the
	// worker that runs its attempts from another of its name (see connect).
	instances     map[string]string
	instancesPath string
	// written guards the instances file: the generation of the instances last written
	// there (instancesGen, c.mu's, counts those kept), so that of two connects that
	// write in turn outside c.mu, the later's stays.
	written      sync.Mutex
	writtenGen   uint64
	instancesGen uint64
}

// instancesFile, in the state directory, holds the instance of each worker the daemon
// knew, by name.
const instancesFile = "worker-instances.json"

// remote is a worker, while it is linked and for a grace period after.
type remote struct {
	hello api.Hello
	state api.WorkerState
	link  *link // nil while it is away
	// ready: it has beaten on its link, after answering the Welcome (see api.Welcome.Ask);
	// only then do its cards take jobs.
	ready bool
	// heard is when it was last heard from; acked when the daemon last answered one of
	// its beats (or welcomed it, or started): its lease runs from before then. Both
	// are the daemon's start for a worker whose attempts it took up (Adopt) and that
	// has not linked since (unheard): when the last daemon heard from it is not kept.
	heard, acked time.Time
	unheard      bool
	// takenUp are the cards of the attempts taken up there (Adopt), by index: what is
	// known of its cards while it is unheard, those of attempts stopped since too.
	takenUp []int
	// attempts run there, as the engine holds them.
	attempts map[string]*state.Attempt
	// stops are asked while the worker is away, for when it is back.
	stops map[string]api.AttemptRef
	// sweeps the worker has had over its link.
	sweeps   map[string]bool
	draining bool
	// metrics are its attempts' readings not yet read by the engine.
	metrics map[string][]plans.Reading
}

func newCluster(local *machine, r *runner.Supervised, f fence, log *runner.EventLog, stateDir, version string) *cluster {
	c := &cluster{local: local, runner: r, fence: f, clock: scheduler.RealClock{}, log: log, exits: make(chan scheduler.Exit, 64), version: version,
		workers: map[string]*remote{}, lost: map[string]map[string]api.AttemptRef{}, streams: map[string]chan io.ReadWriteCloser{}}
	c.loadInstances(filepath.Join(stateDir, instancesFile))
	return c
}

// loadInstances reads the workers' instances the last daemon kept in path, and keeps
// them there from now on. A file that cannot be read is said and left: with it, only
// a worker of a name taken twice goes unrecognized.
func (c *cluster) loadInstances(path string) {
	c.instancesPath, c.instances = path, map[string]string{}
	data, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(data, &c.instances)
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		c.log.Printf("warning: the workers' instances in %s: %v", path, err)
	}
}

// keepInstances keeps the instances of the workers the daemon holds now, linked or
// away, and returns them with their generation for writeInstances, where a daemon
// started again reads them (see loadInstances); nil where they did not change. c.mu
// is held.
func (c *cluster) keepInstances() (map[string]string, uint64) {
	now := map[string]string{}
	for name, w := range c.workers {
		if w.hello.Instance != "" {
			now[name] = w.hello.Instance
		}
	}
	if maps.Equal(now, c.instances) {
		return nil, 0
	}
	c.instances = now
	c.instancesGen++
	return now, c.instancesGen
}

// writeInstances writes instances of generation gen (nil: nothing to write) to the
// file, unless a later generation is there already. It is called without c.mu: the
// write is synced, which on a cluster's shared home takes a while, and every worker
// that links again after a restart changes them, while rounds and heartbeats wait
// for c.mu.
func (c *cluster) writeInstances(instances map[string]string, gen uint64) {
	if instances == nil || c.instancesPath == "" {
		return
	}
	c.written.Lock()
	defer c.written.Unlock()
	if gen <= c.writtenGen {
		return
	}
	c.writtenGen = gen
	if err := launcher.WriteJSON(c.instancesPath, instances); err != nil {
		c.log.Printf("warning: keeping the workers' instances: %v", err)
	}
}

// forward passes the ends of the local runner's attempts on as the cluster's, until
// done is closed.
func (c *cluster) forward(done <-chan struct{}) {
	for {
		select {
		case x := <-c.runner.Exits():
			select {
			case c.exits <- x:
			case <-done:
				return
			}
		case <-done:
			return
		}
	}
}

// worker returns a worker's record, made if it has none. c.mu is held.
func (c *cluster) worker(name string) *remote {
	w := c.workers[name]
	if w == nil {
		now := c.clock.Now()
		w = &remote{heard: now, acked: now, attempts: map[string]*state.Attempt{}, stops: map[string]api.AttemptRef{}}
		// One whose attempts a daemon started again takes up is the instance the last
		// daemon knew by its name: another of that name is refused as it was.
		w.hello.Name, w.hello.Instance = name, c.instances[name]
		c.workers[name] = w
	}
	return w
}

// Read reads this machine's cards, and the last reading of each linked worker's.
func (c *cluster) Read() ([]gpu.Card, error) {
	var cards []gpu.Card
	if c.local.inv != nil {
		local, err := c.local.inv.Read()
		if err != nil {
			return nil, err
		}
		cards = local
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, name := range slices.Sorted(maps.Keys(c.workers)) {
		w := c.workers[name]
		if w.link == nil || !w.ready {
			continue
		}
		for _, card := range w.state.Cards {
			card.Worker = name
			cards = append(cards, card)
		}
	}
	return cards, nil
}

// Keeps reports whether card is one of a worker's that is linked or away within its
// grace, by the cards it last reported: Read leaves out those of one away, or not yet
// ready (see remote.ready), which a person may drain or undrain meanwhile.
func (c *cluster) Keeps(card plans.CardID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.workers[card.Worker]
	if w == nil || (w.link == nil && !w.isAway()) {
		return false
	}
	return slices.ContainsFunc(w.knownCards(), func(g gpu.Card) bool { return g.Index == card.Index })
}

// Away lists the cards of the workers away, by worker and index.
func (c *cluster) Away() []plans.CardID {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []plans.CardID
	for _, name := range slices.Sorted(maps.Keys(c.workers)) {
		if w := c.workers[name]; w.link == nil && w.isAway() {
			for _, g := range w.knownCards() {
				out = append(out, plans.CardID{Worker: name, Index: g.Index})
			}
		}
	}
	return out
}

// Slots is the plan's limit on a card: this machine's plan, or its worker's; none on a
// draining worker's.
func (c *cluster) Slots(card gpu.Card) int {
	if card.Worker == "" {
		for i, lc := range c.local.cards {
			if lc.Index == card.Index {
				return c.local.slots[i]
			}
		}
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.workers[card.Worker]
	if w == nil || w.draining {
		return 0
	}
	if n, ok := w.hello.Plan[card.Index]; ok {
		return n
	}
	return plans.NoSlotLimit
}

// Host reads a machine's RAM: this one's, or what its worker last said.
func (c *cluster) Host(worker string) (int64, int64, error) {
	if worker == "" {
		return launcher.HostMemory()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if w := c.workers[worker]; w != nil {
		return w.state.HostTotal, w.state.HostAvailable, nil
	}
	return 0, 0, nil
}

// Ends is when a worker stops taking jobs.
func (c *cluster) Ends(worker string) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if w := c.workers[worker]; w != nil {
		return w.state.Ends
	}
	return time.Time{}
}

// Start starts an attempt where the engine placed it. On a worker, it is sent there and
// its end reported when the worker says; a worker gone since the round read its cards
// never had it, and the job goes back to the queue.
func (c *cluster) Start(l scheduler.Launch) (scheduler.Started, error) {
	a := l.Attempt
	if a.Worker == "" {
		return c.runner.Start(l)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.worker(a.Worker)
	if w.link == nil {
		c.report(scheduler.Exit{Attempt: a.ID, Outcome: plans.Lost, Unstarted: true,
			Detail: fmt.Sprintf("worker %s went away before it started", a.Worker)})
		return scheduler.Started{}, nil
	}
	// Kept with its log, where the worker's directory puts it: an attempt given up
	// past the grace ends as its exit.json there says, where the daemon can read it
	// (see giveUp), and a trainer that succeeded meanwhile does not run again.
	kept := *a
	if dir, err := launcher.AttemptDir(w.hello.Dir, a.Job, a.N); err == nil {
		kept.Log = launcher.LogPath(dir)
	}
	w.attempts[a.ID] = &kept
	sub := l.Submission
	key := fmt.Sprintf("%s#%d", sub.Sweep.Name, sub.Seq)
	// The sweep's env goes with every start: the engine may have changed it (PyTorch's
	// allocator options refused) since the sweep was submitted.
	req := &api.StartRequest{Attempt: a, SweepKey: key, Env: sub.Sweep.Env, Environ: sub.Environ, Sharing: l.Sharing}
	if !w.sweeps[key] {
		sw := sub.Sweep
		req.Sweep = &api.SweepSource{File: sw.File, Source: string(sw.Source), Overrides: sw.Overrides, Files: sw.Files}
		w.sweeps[key] = true
	}
	w.link.send(api.DaemonMessage{Start: req})
	return scheduler.Started{Log: kept.Log}, nil
}

// StartsAtOnce is how many attempts the engine may start together: as many as this
// machine's runner takes; a start on a worker only sends the request.
func (c *cluster) StartsAtOnce() int { return c.runner.StartsAtOnce() }

// report sends an exit without blocking the caller, who may be the engine's loop.
func (c *cluster) report(x scheduler.Exit) { go func() { c.exits <- x }() }

// Stop asks an attempt's machine to stop it. A worker that is away is told when it is
// back, and its trainer stops by then anyway (its lease lapses): the attempt ends now,
// so that a daemon stopping its trainers, or a person cancelling a job, does not wait
// for a worker that may never come back.
func (c *cluster) Stop(a *state.Attempt) {
	if a.Worker == "" {
		c.runner.Stop(a)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.workers[a.Worker]
	if w == nil {
		// Gone past its grace since the engine read it: its attempts were given up for
		// lost (and are asked about if it links again), its trainers stopped by then
		// with its lease. A record made here would show a worker away never heard from.
		return
	}
	ref := refOf(a)
	if w.link != nil {
		w.link.send(api.DaemonMessage{Stop: &ref})
		return
	}
	w.stops[a.ID] = ref
	if w.attempts[a.ID] != nil {
		delete(w.attempts, a.ID)
		c.report(scheduler.Exit{Attempt: a.ID, Outcome: plans.Cancelled,
			Detail: fmt.Sprintf("stopped while worker %s was away; it stops there when the worker is back, or its lease lapses", a.Worker)})
	}
}

// Owner is the attempt a process of this machine belongs to; a worker names its own.
func (c *cluster) Owner(pid int) (string, bool) { return c.runner.Owner(pid) }

// Exits is where every machine's attempts' ends arrive.
func (c *cluster) Exits() <-chan scheduler.Exit { return c.exits }

// Adopt takes up an attempt that ran when the last daemon stopped: on this machine
// through its supervisor, on a worker when the worker is back (see connect), or lost
// with it after the grace period.
func (c *cluster) Adopt(a *state.Attempt) scheduler.Started {
	if a.Worker == "" {
		return c.runner.Adopt(a)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	_, known := c.workers[a.Worker]
	w := c.worker(a.Worker)
	w.attempts[a.ID] = a
	if !known {
		w.unheard = true // taken up from the state, before the worker links
	}
	for _, i := range a.GPUs {
		if at, found := slices.BinarySearch(w.takenUp, i); !found {
			w.takenUp = slices.Insert(w.takenUp, at, i)
		}
	}
	return scheduler.Started{}
}

// HostMemory is what each attempt's processes hold of their machine's RAM.
func (c *cluster) HostMemory() map[string]int64 {
	out := c.runner.HostMemory()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, w := range c.workers {
		if w.link != nil {
			maps.Copy(out, w.state.AttemptMemory)
		}
	}
	return out
}

// connect links a worker that said hello, replacing a link it had (a worker killed and
// started again before the daemon noticed), and welcomes it with the attempts it is to
// take up. Another worker of the same name (another node's) is refused while the first
// is linked or has attempts: the two would take each other's link and attempts in
// turn, and run jobs twice.
func (c *cluster) connect(h api.Hello, conn io.ReadWriteCloser) (*link, error) {
	var kept map[string]string
	var gen uint64
	defer func() { c.writeInstances(kept, gen) }() // once c.mu is unlocked
	if p := h.ProtocolOf(); p != api.WorkerProtocol {
		c.log.Printf("refused worker %s: it runs gpuq %s, which speaks protocol %d of the worker link; this daemon runs gpuq %s, which speaks protocol %d",
			h.Name, h.Version, p, c.version, api.WorkerProtocol)
		return nil, fmt.Errorf("this worker runs gpuq %s, which speaks protocol %d of the worker link, and the daemon runs gpuq %s, which speaks protocol %d: "+
			"the two would misread each other; install the daemon's gpuq on this node (gpuq --version says which each runs) and start the worker again",
			h.Version, p, c.version, api.WorkerProtocol)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.worker(h.Name)
	if was := w.hello.Instance; was != "" && h.Instance != was && (w.link != nil || len(w.attempts) > 0) {
		c.log.Printf("refused a second worker named %s: the first is linked or has attempts", h.Name)
		return nil, fmt.Errorf("another gpuq worker named %s is linked to this daemon, or has attempts that may run still: "+
			"give this one another --name", h.Name)
	}
	l := newLink(conn)
	if w.link != nil {
		w.link.close()
	}
	back := len(w.attempts)
	now := c.clock.Now()
	w.hello, w.state, w.link, w.heard, w.acked, w.sweeps, w.draining, w.ready = h, h.State, l, now, now, map[string]bool{}, false, false
	w.unheard, w.takenUp = false, nil // it says its cards
	welcome := &api.Welcome{Lease: c.fence.lease, Stop: c.fence.stop, Beat: beatEvery(c.fence.lease), Attempts: []api.AttemptRef{},
		Protocol: api.WorkerProtocol, Version: c.version}
	for _, id := range slices.Sorted(maps.Keys(w.attempts)) {
		welcome.Attempts = append(welcome.Attempts, refOf(w.attempts[id]))
	}
	for _, id := range slices.Sorted(maps.Keys(c.lost[h.Name])) {
		welcome.Ask = append(welcome.Ask, c.lost[h.Name][id])
	}
	l.send(api.DaemonMessage{Welcome: welcome})
	for _, ref := range w.stops {
		l.send(api.DaemonMessage{Stop: &ref})
	}
	clear(w.stops)
	kept, gen = c.keepInstances()
	c.log.Printf("worker %s (gpuq %s, %s) connected: %s; %s to take up",
		h.Name, h.Version, plans.Count(h.Cores, "core"), workerCardsText(h), plans.Count(back, "attempt"))
	if api.OtherBuilds(h.Version, c.version) {
		c.log.Printf("warning: worker %s runs gpuq %s, and this daemon gpuq %s: they speak one protocol of the worker link (%d), "+
			"so it is linked, but what each does of a job may differ; run one gpuq on both", h.Name, h.Version, c.version, api.WorkerProtocol)
	}
	return l, nil
}

// heard applies a worker's message.
func (c *cluster) heard(name string, l *link, m api.WorkerMessage) {
	c.mu.Lock()
	w := c.workers[name]
	if w == nil || w.link != l {
		c.mu.Unlock()
		return // a link replaced since
	}
	w.heard = c.clock.Now()
	if m.Beat > 0 {
		w.acked, w.ready = w.heard, true
		l.send(api.DaemonMessage{Ack: m.Beat})
	}
	if m.State != nil {
		w.state = *m.State
		w.keepMetrics(m.State.AttemptMetrics)
		w.state.AttemptMetrics = nil
	}
	if m.Exit != nil {
		w.keepMetrics(map[string][]plans.Reading{m.Exit.Attempt: m.ExitMetrics})
	}
	if m.Leaving && !w.draining {
		w.draining = true
		l.send(api.DaemonMessage{Drain: true})
		c.log.Printf("worker %s is leaving: it takes no more jobs", name)
	}
	var x *scheduler.Exit
	if m.Exit != nil {
		if x = c.ended(name, w, m.Exit, m.ExitMetrics); x != nil {
			x.At = c.clock.Now().Add(-m.ExitAgo) // by the daemon's clock, not the worker's
		}
	}
	c.mu.Unlock()
	if x != nil {
		c.exits <- *x
	}
}

// ended is what the engine is to hear of an end a worker reports: that of an attempt
// it runs, or a success of one given up for lost with it (a success wins over a
// requeue: see scheduler's late.go), with what its trainer last reported (metrics),
// for the engine to read as it applies it. c.mu is held.
func (c *cluster) ended(name string, w *remote, x *scheduler.Exit, metrics []plans.Reading) *scheduler.Exit {
	id := x.Attempt
	if w.attempts[id] != nil {
		delete(w.attempts, id)
		return x
	}
	if _, asked := c.lost[name][id]; !asked {
		return nil
	}
	delete(c.lost[name], id)
	if len(c.lost[name]) == 0 {
		delete(c.lost, name)
	}
	if x.Outcome != plans.Success {
		return nil
	}
	c.log.Printf("worker %s is back with attempt %s, given up for lost, ended a success: it wins over the requeue", name, id)
	if len(metrics) > 0 {
		if w.metrics == nil {
			w.metrics = map[string][]plans.Reading{}
		}
		w.metrics[id] = append(w.metrics[id], metrics...)
	}
	return &scheduler.Exit{Attempt: id, Outcome: plans.Success, Detail: x.Detail, Process: x.Process, Command: x.Command}
}

// remember notes attempts given up for lost with their workers, whose jobs have not
// ended, for each worker to be asked about when it is back: those a daemon before this
// one gave up.
func (c *cluster) remember(lost []*state.Attempt) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, a := range lost {
		c.lose(a)
	}
}

// lose notes an attempt given up for lost with its worker. c.mu is held.
func (c *cluster) lose(a *state.Attempt) {
	if c.lost[a.Worker] == nil {
		c.lost[a.Worker] = map[string]api.AttemptRef{}
	}
	c.lost[a.Worker][a.ID] = refOf(a)
}

// away marks a worker whose link broke as away: its attempts wait for it. One that was
// leaving, with none, is gone.
func (c *cluster) away(name string, l *link, why error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.workers[name]
	if w == nil || w.link != l {
		return
	}
	w.link = nil
	if w.draining && len(w.attempts) == 0 {
		// It said it was leaving (--idle-timeout, gpuq drain of it), and has nothing
		// left to come back for: gone, not away.
		delete(c.workers, name)
		c.log.Printf("worker %s has left", name)
		return
	}
	if len(w.attempts) > 0 {
		c.log.Printf("worker %s went away (%v): its %s run again elsewhere unless it is back within %s of its last beat",
			name, why, plans.Count(len(w.attempts), "attempt"), c.fence.grace)
	} else {
		c.log.Printf("worker %s went away (%v)", name, why)
	}
}

// Drain tells a worker to take no more jobs and to exit once its attempts have ended.
func (c *cluster) Drain(name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.workers[name]
	if w == nil || w.link == nil {
		return scheduler.Refused(fmt.Sprintf("no worker %q is connected; gpuq gpus lists the workers", name))
	}
	w.draining = true
	w.link.send(api.DaemonMessage{Drain: true})
	return nil
}

// tick is the cluster's clock work, on the daemon's monotonic clock: it cuts the link of
// a worker whose lease has lapsed (it links again once it has fenced its trainers), and
// gives up the attempts of one whose last answered beat is older than the grace.
func (c *cluster) tick() {
	now := c.clock.Now()
	var gone []*state.Attempt
	heard := map[string]time.Time{} // by worker, of those given up
	c.mu.Lock()
	for name, w := range c.workers {
		silent := now.Sub(w.acked)
		if w.link != nil && silent > c.fence.lease {
			w.link.close() // its handler marks it away
		}
		switch {
		case silent > c.fence.grace && len(w.attempts) > 0:
			c.log.Printf("worker %s did not come back within %s of its last beat: %s given up", name, c.fence.grace, plans.Count(len(w.attempts), "attempt"))
			for _, id := range slices.Sorted(maps.Keys(w.attempts)) {
				gone = append(gone, w.attempts[id])
			}
			heard[name] = w.heard
			clear(w.attempts)
		case silent > c.fence.grace && w.link == nil:
			delete(c.workers, name)
		}
	}
	c.mu.Unlock()
	for _, a := range gone {
		c.exits <- c.giveUp(a, heard[a.Worker])
	}
}

// giveUp is the end of an attempt whose worker did not come back within the grace: as
// its exit.json says where the daemon can read it (the worker's directory on a shared
// home, as on a Slurm cluster), so that a trainer that ended while its worker was gone
// counts as it ended; lost otherwise, its job queued again at its tier, and the worker
// asked about it when it is back. A lost attempt ends when its worker was last heard
// from (heard), not now: the grace waited for is no part of its run, and counted in, a
// short trainer's time in gpuq status was mostly that wait.
func (c *cluster) giveUp(a *state.Attempt, heard time.Time) scheduler.Exit {
	if a.Log != "" {
		if e, err := launcher.ReadEnded(filepath.Dir(a.Log)); err == nil && e != nil {
			c.log.Printf("attempt %s ended %s while worker %s was gone, as its directory shows", a.ID, e.Outcome, a.Worker)
			// Dated by the worker's clock, which the engine takes only between the
			// attempt's start and now.
			return scheduler.Exit{Attempt: a.ID, Outcome: e.Outcome, OOM: e.OOM, Detail: e.Detail, Requeue: e.Fenced,
				Process: e.Exit, Command: e.Command, At: e.At}
		}
	}
	c.mu.Lock()
	c.lose(a)
	c.mu.Unlock()
	return scheduler.Exit{Attempt: a.ID, Outcome: plans.Lost, Requeue: true, At: heard, Detail: fmt.Sprintf(
		"worker %s was not heard from for its grace of %s (its node failed or froze, its allocation ended, or it was killed): "+
			"its job runs again at tier %d", a.Worker, c.fence.grace, a.Tier)}
}

// run ticks until done is closed, then cuts every link: the workers come back to the
// next daemon. It runs until the engine has stopped, since stopping trainers takes their
// workers' answers.
func (c *cluster) run(done <-chan struct{}) {
	t := time.NewTicker(min(max(c.fence.grace/10, 100*time.Millisecond), time.Second))
	defer t.Stop()
	for {
		select {
		case <-done:
			c.mu.Lock()
			for _, w := range c.workers {
				if w.link != nil {
					w.link.close()
				}
			}
			c.mu.Unlock()
			return
		case <-t.C:
			c.tick()
		}
	}
}

// allocations counts the linked workers of each Slurm allocation, by its job id.
func (c *cluster) allocations() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for _, w := range c.workers {
		if w.link != nil && w.hello.Allocation != "" {
			out[w.hello.Allocation]++
		}
	}
	return out
}

// knownCards are the worker's cards as it last reported them; for one not heard from
// since the daemon started (unheard), the cards its attempts taken up ran on (takenUp),
// known by index alone until it links: a restarted daemon would otherwise show none of
// an away worker's cards (gpuq top, gpuq gpus), nor let them be drained. c.mu is held.
func (w *remote) knownCards() []gpu.Card {
	if len(w.state.Cards) > 0 || !w.unheard {
		return w.state.Cards
	}
	cards := []gpu.Card{}
	for _, i := range w.takenUp {
		cards = append(cards, gpu.Card{Worker: w.hello.Name, Index: i})
	}
	return cards
}

// isAway reports whether a worker is away: its link is lost, and it had not left (a
// worker drained or idle that leaves with nothing running is gone, not away). c.mu is
// held.
func (w *remote) isAway() bool { return w.link == nil && (len(w.attempts) > 0 || !w.draining) }

// awayOf is when an away worker was last heard from, and when its attempts are given
// up (see tick). c.mu is held.
func (c *cluster) awayOf(w *remote) api.WorkerAway {
	return api.WorkerAway{Since: w.heard, Until: w.acked.Add(c.fence.grace), Unheard: w.unheard}
}

// workersAway are the workers that are away, by name: the engine holds their attempts
// running, and people are to read that they may not be.
func (c *cluster) workersAway() map[string]api.WorkerAway {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]api.WorkerAway{}
	for name, w := range c.workers {
		if w.isAway() {
			out[name] = c.awayOf(w)
		}
	}
	return out
}

// awayCards are the cards of the workers that are away, as each last reported them,
// with the attempts held running there: the engine, which offers them no job, reads
// them no more, and gpuq top would lose them (and its jobs' cards) while they may
// come back.
func (c *cluster) awayCards() []api.GPUView {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []api.GPUView
	for _, name := range slices.Sorted(maps.Keys(c.workers)) {
		w := c.workers[name]
		if !w.isAway() {
			continue
		}
		away := c.awayOf(w)
		for _, card := range w.knownCards() {
			g := api.GPUView{Worker: name, Index: card.Index, Name: card.Name, TotalBytes: card.Total, UsedBytes: card.Used,
				Slots: -1, Utilization: -1, Temperature: -1, Jobs: []api.Holding{}, WorkerAway: &away}
			if n, ok := w.hello.Plan[card.Index]; ok && n != plans.NoSlotLimit {
				g.Slots = n
			}
			for _, id := range slices.Sorted(maps.Keys(w.attempts)) {
				if a := w.attempts[id]; slices.Contains(a.GPUs, card.Index) {
					g.Busy++
					g.Jobs = append(g.Jobs, api.Holding{Job: a.Job, ReservedBytes: a.Estimate})
				}
			}
			out = append(out, g)
		}
	}
	return out
}

// info lists the workers for the API.
func (c *cluster) info(drained map[plans.CardID]bool) []api.WorkerInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := []api.WorkerInfo{}
	for _, name := range slices.Sorted(maps.Keys(c.workers)) {
		w := c.workers[name]
		wi := api.WorkerInfo{Name: name, Connected: w.link != nil, Heard: w.heard, Unheard: w.unheard, Version: w.hello.Version, Cores: w.hello.Cores,
			GPUs: []api.GPUInfo{}, Running: len(w.attempts), Draining: w.draining, Ends: w.state.Ends,
			OtherBuild: api.OtherBuilds(w.hello.Version, c.version)}
		for _, card := range w.knownCards() {
			wi.GPUs = append(wi.GPUs, api.GPUInfo{Worker: name, Index: card.Index, Name: card.Name, TotalBytes: card.Total,
				Drained: drained[plans.CardID{Worker: name, Index: card.Index}]})
		}
		out = append(out, wi)
	}
	return out
}

func workerCardsText(h api.Hello) string {
	if len(h.State.Cards) == 0 {
		return "no cards"
	}
	slots := make([]int, len(h.State.Cards))
	for i, card := range h.State.Cards {
		slots[i] = plans.NoSlotLimit
		if n, ok := h.Plan[card.Index]; ok {
			slots[i] = n
		}
	}
	return gpu.CardsText(h.State.Cards, slots)
}

// link is a worker's stream as the daemon writes to it: messages are queued, so that
// neither the engine's loop nor a slow worker waits on the other. A worker that does
// not read what is queued for it is cut off.
type link struct {
	conn io.ReadWriteCloser
	out  chan api.DaemonMessage
	done chan struct{}
	once sync.Once
}

func newLink(conn io.ReadWriteCloser) *link {
	l := &link{conn: conn, out: make(chan api.DaemonMessage, 1024), done: make(chan struct{})}
	go func() {
		enc := json.NewEncoder(conn)
		for {
			select {
			case <-l.done:
				return
			case m := <-l.out:
				if enc.Encode(m) != nil {
					l.close()
					return
				}
			}
		}
	}()
	return l
}

func (l *link) send(m api.DaemonMessage) {
	select {
	case l.out <- m:
	case <-l.done:
	default:
		l.close()
	}
}

func (l *link) close() {
	l.once.Do(func() {
		close(l.done)
		l.conn.Close()
	})
}

// lostWithWorkers are the attempts on workers that ended lost while their jobs go on
// (queued, or running again): a worker back with a success of one of them ends its job.
func lostWithWorkers(view state.View) []*state.Attempt {
	var out []*state.Attempt
	for _, j := range view.Jobs() {
		if j.State != state.JobQueued && j.State != state.JobRunning {
			continue
		}
		for _, a := range view.Attempts(j.ID) {
			if a.Worker != "" && a.Outcome == plans.Lost {
				out = append(out, a)
			}
		}
	}
	return out
}
