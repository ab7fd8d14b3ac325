package scheduler

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/gpu"
)

// Clock is the engine's time: real under `gpuq run`, virtual under a simulation.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

// RealClock is the wall clock.
type RealClock struct{}

// Now returns the wall-clock time.
func (RealClock) Now() time.Time { return time.Now() }

// After waits d of wall-clock time.
func (RealClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Inventory reads the cards.
type Inventory interface {
	Snapshot() ([]gpu.Card, error)
}

// Launch is what a Runner needs to start an attempt.
type Launch struct {
	Attempt *Attempt
	Job     *Job
	Sweep   *plans.Sweep
	Cards   []gpu.Card
	// Sharing is how many trainers run once this round's have started, this one
	// included: threads: auto divides the cores by it.
	Sharing int
}

// Runner starts attempts and reports, on the engine's Exits channel, how each ended.
type Runner interface {
	// Start starts the attempt and says where it runs and logs.
	Start(l Launch) (Started, error)
	// Stop asks a running attempt to end; its Exit follows.
	Stop(attempt string)
	// Owner returns the session leader of a process, so that the engine can tell its
	// attempts' processes from foreign ones; ok is false when it cannot tell.
	Owner(pid int) (leader int, ok bool)
}

// HostMeter is a Runner that can measure host memory: what the processes of each
// session (by its leader) hold now. Leaders it cannot measure are left out.
type HostMeter interface {
	HostMemory(leaders []int) map[int]int64
}

// Started is what a Runner tells of an attempt it started.
type Started struct {
	Leader int    // the session leader's pid
	Log    string // the attempt's log file
}

// Exit is how an attempt ended, as its Runner reports it.
type Exit struct {
	Attempt string
	Outcome plans.Outcome
	OOM     *plans.OOMFacts
	Detail  string // e.g. "exited with status 2"
	// Unstarted: the attempt was recorded but its trainer never started (a daemon
	// died in between); the job goes back to the queue as it was.
	Unstarted bool
}

// Event is something that happened, for the user interface.
type Event struct {
	Time    time.Time
	Job     string
	Attempt int
	Kind    string // "started", "gpu-oom", "requeued", "succeeded", "failed", "cancelled", ...
	Message string
}

// Config is the machine side of an engine.
type Config struct {
	Slots    []int // the plan, fitted to the inventory's cards
	Headroom plans.Headroom
	// Poll is how often the engine samples the cards between events.
	Poll time.Duration
	// Settle bounds how long a card waits, after an attempt on it ends, for NVML to stop
	// showing that attempt's memory before another job starts there.
	Settle time.Duration
	// LearnAfter is how long an attempt must run before its measured peak speaks for
	// its shape; a finished attempt's always does.
	LearnAfter time.Duration
	// Host reads the machine's RAM; nil leaves host memory out of the packing.
	Host func() (total, available int64, err error)
	// HostReserve is the RAM kept for the system.
	HostReserve plans.Headroom
}

// Engine runs jobs to the end: it packs, starts attempts, and reacts to how they end.
type Engine struct {
	store  *Store
	inv    Inventory
	runner Runner
	clock  Clock
	cfg    Config
	sweeps map[string]*plans.Sweep
	exits  chan Exit
	events func(Event)
	ghosts []ghost
	cards  []gpu.Card
	// cardPos maps a card's index to its position in cards.
	cardPos map[int]int
	// owners maps each process on the cards to its attempt's session leader, resolved
	// once per round (see resolveOwners).
	owners map[int]int
	// hostNow is what each running attempt's processes hold of host RAM, by leader.
	hostNow map[int]int64
	// lastRound is when the last round sampled the cards.
	lastRound time.Time
	// limits are the sweeps' own plans on the machine's cards (see SetLimit).
	limits map[string]Limit
	// commands are people's requests (cancel, hold, drain...), run between rounds.
	commands chan func()
	// err is the first failure to journal a change: the engine stops at the end of
	// the round, having done nothing it could not record.
	err error
}

// Limit is a sweep's own plan on the machine: the most of its jobs on each card, by
// card index. A card not in it takes none of the sweep's jobs.
type Limit map[int]int

// ghost is an ended attempt whose memory NVML may still show.
type ghost struct {
	attempt *Attempt
	until   time.Time
}

// NewEngine returns an engine over the store's jobs. events may be nil.
func NewEngine(store *Store, inv Inventory, runner Runner, clock Clock, cfg Config, events func(Event)) *Engine {
	if events == nil {
		events = func(Event) {}
	}
	if cfg.Poll == 0 {
		cfg.Poll = time.Second
	}
	if cfg.Settle == 0 {
		cfg.Settle = 30 * time.Second
	}
	if cfg.LearnAfter == 0 {
		cfg.LearnAfter = 5 * time.Minute
	}
	return &Engine{store: store, inv: inv, runner: runner, clock: clock, cfg: cfg,
		sweeps: map[string]*plans.Sweep{}, exits: make(chan Exit, 64), events: events, owners: map[int]int{}, cardPos: map[int]int{},
		hostNow: map[int]int64{}, limits: map[string]Limit{}, commands: make(chan func())}
}

// Submit adds a sweep's jobs.
func (e *Engine) Submit(sw *plans.Sweep) error {
	if err := e.store.Submit(sw); err != nil {
		return err
	}
	e.sweeps[sw.Name] = sw
	return nil
}

// Resume takes up a sweep whose jobs are in the store already: one replayed from a
// state directory.
func (e *Engine) Resume(sw *plans.Sweep) { e.sweeps[sw.Name] = sw }

// SetLimit limits a sweep's jobs to its own plan; a sweep without one is limited by the
// machine's alone.
func (e *Engine) SetLimit(sweep string, l Limit) { e.limits[sweep] = l }

// put writes to the store; on failure (the journal could not be written) it keeps the
// error for Run and Serve to return, and reports false.
func (e *Engine) put(objs ...any) bool {
	if e.err != nil {
		return false
	}
	if err := e.store.Put(objs...); err != nil {
		e.err = fmt.Errorf("state not saved, stopping: %w", err)
		return false
	}
	return true
}

// Exits is where the Runner reports attempts' ends.
func (e *Engine) Exits() chan<- Exit { return e.exits }

// Run schedules until every job has succeeded, failed or been cancelled. When ctx is
// cancelled it stops every running attempt, cancels the queued jobs, waits for the
// attempts to end, and returns ctx's error.
func (e *Engine) Run(ctx context.Context) error {
	for {
		if err := e.Schedule(); err != nil {
			return err
		}
		if e.finished() {
			return nil
		}
		select {
		case <-ctx.Done():
			return e.shutdown(ctx.Err())
		case x := <-e.exits:
			e.Apply(x)
		case <-e.clock.After(e.cfg.Poll):
		}
		if e.err != nil {
			return e.err
		}
	}
}

// Serve schedules, and runs what Do is given, until ctx is cancelled; then it returns
// ctx's error and leaves the running attempts as they are, for a later engine on the
// same state to take up (a daemon restarting), unless stopAll is set: then it stops
// them first, as Run does on Ctrl-C, and leaves queued jobs queued.
func (e *Engine) Serve(ctx context.Context, stopAll func() bool) error {
	for {
		if err := e.Schedule(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			if stopAll() {
				e.stopRunning()
			}
			return ctx.Err()
		case x := <-e.exits:
			e.Apply(x)
		case fn := <-e.commands:
			fn()
		case <-e.clock.After(e.cfg.Poll):
		}
		if e.err != nil {
			return e.err
		}
	}
}

// Do runs fn in the engine's loop, between rounds, and returns its error. Serve must be
// running, or Do waits for it; the next round follows fn at once.
func (e *Engine) Do(ctx context.Context, fn func() error) error {
	done := make(chan error, 1)
	select {
	case e.commands <- func() { done <- fn() }:
	case <-ctx.Done():
		return ctx.Err()
	}
	return <-done
}

// finished reports whether no job runs or waits.
func (e *Engine) finished() bool {
	snap := e.store.Snapshot()
	return len(snap.Running()) == 0 && snap.Smallest() == nil
}

func (e *Engine) shutdown(cause error) error {
	e.stopRunning()
	// Only now: an attempt that ended of an OOM while the others were stopping has
	// just been requeued, and must not be left queued.
	for _, j := range e.store.Snapshot().Queue() {
		c := *j
		c.State, c.Reason = JobCancelled, "cancelled while queued"
		e.put(&c)
		e.events(Event{Time: e.clock.Now(), Job: j.ID, Kind: "cancelled", Message: c.Reason})
	}
	return cause
}

// stopRunning stops every running attempt and applies their ends.
func (e *Engine) stopRunning() {
	running := e.store.Snapshot().Running()
	for _, a := range running {
		e.runner.Stop(a.ID)
	}
	for left := len(running); left > 0; left-- {
		e.Apply(<-e.exits)
	}
}

// Schedule is one round: it samples the cards, learns peaks, and starts what the packer
// places. Run calls it after every event and poll; a driver of its own (a simulation in
// virtual time) calls it, with Apply, instead of Run.
func (e *Engine) Schedule() error {
	cards, err := e.inv.Snapshot()
	if err != nil {
		return err
	}
	e.cards = cards
	clear(e.cardPos)
	for i, c := range cards {
		e.cardPos[c.Index] = i
	}
	e.resolveOwners()
	running := e.store.Snapshot().Running()
	e.learnPeaks(running)
	e.failTooLarge()
	snap := e.store.Snapshot()
	running = snap.Running()
	smallest := snap.Smallest()
	if smallest == nil {
		return nil
	}
	host, err := e.hostState(running)
	if err != nil {
		return err
	}
	states, quotas := e.cardStates(snap, running)
	probing := map[string]bool{}
	queue := func(yield func(Request) bool) {
		for j := range snap.Queued() {
			if waitsForProbe(snap, j, probing) {
				continue
			}
			r := requestOf(j)
			r.Quota = quotas[j.Sweep]
			if !yield(r) {
				return
			}
		}
	}
	placed := Place(queue, states, host, smallest.Estimate)
	for _, p := range placed {
		e.start(snap.Job(p.Job), p.Cards, len(running)+len(placed))
	}
	return nil
}

// cardStates is the packer's view of the cards for a round, drained cards offering no
// slot, and each limited sweep's quota on them.
func (e *Engine) cardStates(snap Snapshot, running []*Attempt) ([]CardState, map[string]*Quota) {
	reserved := append(running, e.settling()...)
	states := CardStates(e.cards, e.cfg.Slots, e.cfg.Headroom, reserved, e.ours(running))
	if drained := snap.Drained(); len(drained) > 0 {
		for i := range states {
			if drained[states[i].Index] {
				states[i].Slots = 0
			}
		}
	}
	if len(e.limits) == 0 {
		return states, nil
	}
	quotas := make(map[string]*Quota, len(e.limits))
	for sweep, l := range e.limits {
		q := &Quota{Slots: make([]int, len(states)), Free: make([]int, len(states))}
		for i, c := range states {
			q.Slots[i] = l[c.Index]
			q.Free[i] = l[c.Index]
		}
		quotas[sweep] = q
	}
	for _, a := range running {
		if q := quotas[SweepOf(a.Job)]; q != nil {
			for _, g := range a.GPUs {
				if i, ok := e.cardPos[g]; ok {
					q.Free[i]--
				}
			}
		}
	}
	return states, quotas
}

// SweepOf is the sweep of a job id, "<sweep>.<n>".
func SweepOf(job string) string {
	if i := strings.LastIndexByte(job, '.'); i >= 0 {
		return job[:i]
	}
	return job
}

// waitsForProbe says whether a queued job of memory: probe waits for its shape to be
// measured: the first of each shape runs alone (requestOf makes it exclusive) and the
// others wait for it. probing collects the shapes offered this round.
func waitsForProbe(snap Snapshot, j *Job, probing map[string]bool) bool {
	if !j.Probe || j.Estimate > 0 {
		return false
	}
	if l := snap.Shape(j.Shape); l != nil && l.Probe != "" || probing[j.Shape] {
		return true
	}
	probing[j.Shape] = true
	return false
}

// hostState reads the machine's RAM for the packer.
func (e *Engine) hostState(running []*Attempt) (HostState, error) {
	if e.cfg.Host == nil {
		return HostState{}, nil
	}
	total, avail, err := e.cfg.Host()
	if err != nil {
		return HostState{}, fmt.Errorf("host memory: %w", err)
	}
	h := HostState{Total: total, Used: total - avail, Reserve: e.cfg.HostReserve.Of(total)}
	for _, a := range running {
		h.Reserved += a.HostReserve
		h.Ours += e.hostNow[a.Leader]
	}
	return h, nil
}

// failTooLarge deals with the queued jobs no card could hold even when idle, so that
// nothing waits forever. A job whose shape ran out of memory at its tier (another job of
// the shape proved it needs more than any card) steps down its ladder without an
// attempt of its own; any other fails.
func (e *Engine) failTooLarge() {
	room := e.largestRoom()
	for j := range e.store.Snapshot().Largest() {
		if j.Estimate <= room {
			return
		}
		c := *j
		if l := e.store.Snapshot().Shape(j.Shape); l != nil && l.Floor > room {
			if msg, ok := e.stepDown(&c, e.sweeps[j.Sweep], j.Declared, false); ok {
				e.put(&c)
				e.events(Event{Time: e.clock.Now(), Job: j.ID, Kind: "requeued", Message: fmt.Sprintf(
					"skips tier %d, where its shape needs at least %s, more than any card: %s", j.Pos.Tier, plans.FormatSize(l.Floor), msg)})
				continue
			}
		}
		c.State = JobFailed
		c.Reason = fmt.Sprintf("its estimate %s is larger than every card (%s at most, after headroom)",
			plans.FormatSize(j.Estimate), plans.FormatSize(room))
		e.put(&c)
		e.events(Event{Time: e.clock.Now(), Job: j.ID, Kind: "failed", Message: c.Reason})
	}
}

// ours tells the processes of running attempts from foreign ones.
func (e *Engine) ours(running []*Attempt) func(int) bool {
	leaders := map[int]bool{}
	for _, a := range running {
		leaders[a.Leader] = true
	}
	for _, g := range e.ghosts {
		leaders[g.attempt.Leader] = true
	}
	return func(pid int) bool {
		l, ok := e.owner(pid)
		return ok && leaders[l]
	}
}

// resolveOwners asks the runner, once per round and process, whose each process on the
// cards is. A pid the runner no longer knows keeps last round's owner, since NVML can show
// a dead process's memory for a moment after /proc has forgotten it; a pid on no card is
// forgotten, so the map stays as small as the cards' process lists.
func (e *Engine) resolveOwners() {
	next := make(map[int]int, len(e.owners))
	for _, c := range e.cards {
		for _, p := range c.Processes {
			if l, ok := e.runner.Owner(p.PID); ok {
				next[p.PID] = l
			} else if l, ok := e.owners[p.PID]; ok {
				next[p.PID] = l
			}
		}
	}
	e.owners = next
}

func (e *Engine) owner(pid int) (int, bool) {
	l, ok := e.owners[pid]
	return l, ok
}

// learnPeaks keeps, for each running attempt, the most its processes held on a card and
// of host RAM; an attempt that has run LearnAfter speaks for its shape.
func (e *Engine) learnPeaks(running []*Attempt) {
	if m, ok := e.runner.(HostMeter); ok && len(running) > 0 {
		leaders := make([]int, len(running))
		for i, a := range running {
			leaders[i] = a.Leader
		}
		e.hostNow = m.HostMemory(leaders)
	}
	var changed []any
	now, last := e.clock.Now(), e.lastRound
	e.lastRound = now
	for _, a := range running {
		peak, unknown := e.measure(a)
		host := e.hostNow[a.Leader]
		grew := peak > a.Peak || host > a.HostPeak
		if grew || unknown && !a.PeakUnknown {
			c := *a
			c.Peak, c.HostPeak, c.PeakUnknown = max(peak, a.Peak), max(host, a.HostPeak), a.PeakUnknown || unknown
			changed = append(changed, &c)
			a = &c
		}
		// What an attempt teaches changes only when it comes of age or its peak grows.
		if of := a.Started.Add(e.cfg.LearnAfter); !now.Before(of) && (grew || last.Before(of)) {
			e.learn(a.Shape, a)
		}
	}
	if len(changed) > 0 {
		e.put(changed...)
	}
}

// measure is the most an attempt's processes hold on one of its cards now, and whether
// NVML could not tell some of them: such a reading is a floor, not a peak.
func (e *Engine) measure(a *Attempt) (most int64, unknown bool) {
	for _, idx := range a.GPUs {
		i, ok := e.cardPos[idx]
		if !ok {
			continue
		}
		var sum int64
		for _, p := range e.cards[i].Processes {
			if l, ok := e.owner(p.PID); !ok || l != a.Leader {
				continue
			}
			if p.Used == gpu.Unknown {
				unknown = true
			} else {
				sum += p.Used
			}
		}
		most = max(most, sum)
	}
	return most, unknown
}

// learn takes an attempt's measured peaks as its shape's, if they say more than what is
// known, and re-estimates the shape's jobs.
func (e *Engine) learn(shape string, a *Attempt) {
	e.changeShape(shape, func(l *Shape) {
		if !a.PeakUnknown {
			l.Peak = max(l.Peak, a.Peak)
		}
		l.Host = max(l.Host, a.HostPeak)
	})
}

// changeShape changes what is known of a shape and, if that changed, re-estimates the
// shape's jobs.
func (e *Engine) changeShape(name string, change func(*Shape)) {
	l := Shape{Name: name}
	if old := e.store.Snapshot().Shape(name); old != nil {
		l = *old
	}
	before := l
	change(&l)
	if l == before {
		return
	}
	e.put(&l)
	if l.Peak != before.Peak || l.Host != before.Host || l.Floor != before.Floor {
		e.reestimate(name)
	}
}

// estimate is what the packer reserves for a job, given what is known of its shape
// (nil: nothing): once the shape's peak is measured,
// that peak, in both directions from the declared estimate; and never less than an
// out-of-memory end proved the shape needs. No margin is added: NVML's per-process
// figure includes the CUDA context, and the card's headroom is the margin for
// fragmentation and for a seed that peaks a little higher, as for a declared estimate
// (a 10% margin on top cost the 100,000-job trace 12% of its makespan).
func estimate(j *Job, l *Shape) (gpuBytes, host int64) {
	gpuBytes, host = j.Declared, j.HostMemory
	if l == nil {
		return gpuBytes, host
	}
	if l.Peak > 0 {
		gpuBytes = l.Peak
	}
	if l.Host > 0 {
		host = l.Host
	}
	return max(gpuBytes, l.Floor), host
}

// reestimate applies what is known of a shape to its queued jobs and to the
// reservations of its running attempts.
func (e *Engine) reestimate(shape string) {
	snap := e.store.Snapshot()
	l := snap.Shape(shape)
	var changed []any
	for j := range snap.QueuedOfShape(shape) {
		c := *j
		c.Estimate, c.HostEstimate = estimate(j, l)
		if c.Estimate != j.Estimate || c.HostEstimate != j.HostEstimate {
			changed = append(changed, &c)
		}
	}
	for _, a := range snap.Running() {
		if a.Shape != shape {
			continue
		}
		est, host := estimate(snap.Job(a.Job), l)
		// A running attempt holds at least what it was measured at.
		if r, h := max(est, a.Peak), max(host, a.HostPeak); r != a.Reserve || h != a.HostReserve {
			c := *a
			c.Reserve, c.HostReserve = r, h
			changed = append(changed, &c)
		}
	}
	if len(changed) > 0 {
		e.put(changed...)
	}
}

// settling returns the ended attempts whose memory NVML still shows on their cards, so
// that their estimates stay reserved: the next job must not OOM on a ghost. Each waits
// at most cfg.Settle.
func (e *Engine) settling() []*Attempt {
	now := e.clock.Now()
	kept := e.ghosts[:0]
	var out []*Attempt
	for _, g := range e.ghosts {
		// A process NVML cannot read is still there.
		if used, unknown := e.measure(g.attempt); now.Before(g.until) && (used > 0 || unknown) {
			kept = append(kept, g)
			out = append(out, g.attempt)
		}
	}
	e.ghosts = kept
	return out
}

func (e *Engine) start(j *Job, cardIdx []int, sharing int) {
	sw := e.sweeps[j.Sweep]
	job := *j
	job.Attempts++
	job.State = JobRunning
	a := &Attempt{ID: AttemptID(j.ID, job.Attempts), Job: j.ID, Shape: j.Shape, N: job.Attempts, GPUs: cardIdx,
		Tier: j.Pos.Tier, Params: j.Current, Estimate: j.Estimate, Reserve: j.Estimate, HostReserve: j.HostEstimate,
		Started: e.clock.Now()}
	if j.Probe && j.Estimate == 0 {
		e.changeShape(j.Shape, func(l *Shape) { l.Probe = j.ID })
	}
	var cards []gpu.Card
	for _, c := range e.cards {
		if slices.Contains(cardIdx, c.Index) {
			cards = append(cards, c)
		}
	}
	// Journaled before it starts: a daemon that dies in between finds an attempt it
	// never heard from and requeues the job, rather than starting it twice. Without a
	// journal there is nothing to survive, and one write per start is what a
	// simulation of 100,000 jobs can afford.
	if e.store.Journaled() && !e.put(&job, a) {
		return
	}
	st, err := e.runner.Start(Launch{Attempt: a, Job: &job, Sweep: sw, Cards: cards, Sharing: sharing})
	if err != nil {
		if !e.store.Journaled() {
			e.put(&job, a)
		}
		e.Apply(Exit{Attempt: a.ID, Outcome: plans.Lost, Detail: err.Error()})
		return
	}
	// The runner reports the attempt's end on Exits, read only after this round.
	started := *a
	started.Leader, started.Log = st.Leader, st.Log
	if e.store.Journaled() {
		e.put(&started)
	} else {
		e.put(&job, &started)
	}
	e.events(Event{Time: a.Started, Job: j.ID, Attempt: a.N, Kind: "started",
		Message: fmt.Sprintf("on GPU %v, tier %d, estimate %s", cardIdx, a.Tier, plans.FormatSize(a.Estimate))})
}

// Apply records how an attempt ended and decides what becomes of its job. Run applies
// what arrives on Exits; a driver of its own calls it directly.
func (e *Engine) Apply(x Exit) {
	snap := e.store.Snapshot()
	a := snap.Attempt(x.Attempt)
	if a == nil || !a.Running() {
		return
	}
	ended := *a
	ended.Outcome, ended.OOM, ended.Ended = x.Outcome, x.OOM, e.clock.Now()
	peak, unknown := e.measure(a)
	ended.Peak, ended.PeakUnknown = max(ended.Peak, peak), ended.PeakUnknown || unknown
	e.ghosts = append(e.ghosts, ghost{attempt: &ended, until: ended.Ended.Add(e.cfg.Settle)})
	job := *snap.Job(a.Job)
	sw := e.sweeps[job.Sweep]
	if job.Probe {
		e.changeShape(job.Shape, func(l *Shape) {
			if l.Probe == job.ID {
				l.Probe = ""
			}
		})
	}
	kind, msg := string(x.Outcome), x.Detail
	switch {
	case x.Unstarted:
		// It does not count against oom.max_attempts.
		job.State, job.Since, kind = JobQueued, job.Since+1, "requeued"
	case x.Outcome == plans.Success:
		job.State, kind = JobSucceeded, "succeeded"
		e.learn(job.Shape, &ended)
	case x.Outcome == plans.Cancelled:
		job.State, job.Reason = JobCancelled, "cancelled while running"
	case x.Outcome == plans.GPUOOM, x.Outcome == plans.HostOOM:
		msg = e.degrade(&job, &ended, sw)
		kind = string(x.Outcome)
	default:
		job.State, job.Reason = JobFailed, fmt.Sprintf("attempt %d %s: %s", a.N, x.Outcome, x.Detail)
		msg = job.Reason
	}
	if job.State == JobQueued && job.Attempts-job.Since >= sw.OOM.MaxAttempts {
		job.State = JobFailed
		job.Reason = fmt.Sprintf("out of memory on each of %d attempts (oom.max_attempts)", job.Attempts-job.Since)
		msg += "; " + job.Reason
	}
	e.put(&job, &ended)
	e.events(Event{Time: ended.Ended, Job: job.ID, Attempt: a.N, Kind: kind, Message: msg})
	if job.State == JobFailed && x.Outcome != plans.Failed && x.Outcome != plans.Lost {
		e.events(Event{Time: ended.Ended, Job: job.ID, Kind: "failed", Message: job.Reason})
	}
}

// degrade reacts to an out-of-memory end: it learns a lower bound on the job's need,
// then retries it as it was when it was crowded out, or steps down the ladder.
func (e *Engine) degrade(job *Job, a *Attempt, sw *plans.Sweep) string {
	room := e.room(a)
	before := job.Estimate
	if a.Outcome == plans.GPUOOM {
		// What the attempt held plus what it asked for is a lower bound on its need at
		// this tier; and never trust an estimate that was just proven short.
		used := a.Peak
		if a.OOM != nil && a.OOM.ProcessBytes > 0 {
			used = a.OOM.ProcessBytes
		}
		need := used
		if a.OOM != nil {
			need += a.OOM.TriedBytes
		}
		raised := max(need, int64(math.Ceil(float64(before)*1.2)))
		others := a.OOM != nil && a.OOM.OthersBytes() > 0
		if !others {
			others = e.sharedCard(a)
		}
		// Whatever becomes of this job, its shape needs that much at this tier.
		defer e.changeShape(job.Shape, func(l *Shape) { l.Floor = max(l.Floor, need) })
		if need > 0 && need <= room && raised <= room && others && !job.Retried {
			job.Estimate, job.Retried, job.State = raised, true, JobQueued
			return fmt.Sprintf("crowded out: needs at least %s, which fits the card alone; retrying at tier %d with that estimate",
				plans.FormatSize(raised), job.Pos.Tier)
		}
	}
	msg, ok := e.stepDown(job, sw, before, a.Outcome == plans.HostOOM)
	if !ok {
		job.State = JobFailed
		job.Reason = fmt.Sprintf("%s at tier %d, the last rung of its ladder", a.Outcome, job.Pos.Tier)
		return job.Reason
	}
	return msg
}

// stepDown requeues a job at the next rung of its ladder, or reports that it has none.
func (e *Engine) stepDown(job *Job, sw *plans.Sweep, before int64, hostOOM bool) (string, bool) {
	next, pos, changed, _, ok := plans.Step(job.Current, job.Ladder, job.Pos, hostOOM)
	if !ok {
		return "", false
	}
	// A new rung is a new shape. Its estimate is the model's at the new parameters, or
	// the one the failed attempt started with (not what the failure raised it to); and
	// what was learned of the new shape, if another job got there first.
	job.Current, job.Pos, job.Retried, job.State = next, pos, false, JobQueued
	job.Shape = sw.ShapeOf(next)
	if job.Model != nil {
		job.Declared = job.MemoryAt(next)
	} else {
		job.Declared = before
	}
	job.Estimate, job.HostEstimate = estimate(job, e.store.Snapshot().Shape(job.Shape))
	var parts []string
	for _, k := range changed {
		v, _ := next.Get(k)
		parts = append(parts, fmt.Sprintf("%s=%s", k, plans.FormatValue(v)))
	}
	msg := fmt.Sprintf("requeued at tier %d: %v", pos.Tier, parts)
	if eb, ok := plans.EffectiveBatch(next); ok {
		msg += fmt.Sprintf(", effective batch %d", eb)
	}
	if pos.Exclusive {
		msg += ", alone on a card"
	}
	return msg, true
}

// room is the memory the attempt's card offers with nothing else on it.
func (e *Engine) room(a *Attempt) int64 {
	room := int64(math.MaxInt64)
	for _, c := range e.cards {
		if slices.Contains(a.GPUs, c.Index) {
			total := c.Total
			if a.OOM != nil && a.OOM.TotalBytes > 0 {
				total = a.OOM.TotalBytes
			}
			room = min(room, total-e.cfg.Headroom.Of(total))
		}
	}
	return room
}

func (e *Engine) largestRoom() int64 {
	var most int64
	for _, c := range e.cards {
		most = max(most, c.Total-e.cfg.Headroom.Of(c.Total))
	}
	return most
}

// sharedCard reports whether another attempt ran on one of a's cards when it ended.
func (e *Engine) sharedCard(a *Attempt) bool {
	for _, r := range e.store.Snapshot().Running() {
		if r.ID != a.ID {
			for _, g := range r.GPUs {
				if slices.Contains(a.GPUs, g) {
					return true
				}
			}
		}
	}
	return false
}
