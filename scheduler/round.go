package scheduler

// One scheduling round: the cards read, owners resolved, peaks learned, the queue packed
// and the placements started.

import (
	"errors"
	"fmt"
	"iter"
	"math"
	"slices"
	"time"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/gpu"
)

// Schedule is one round: it samples the cards, learns peaks, and starts what the packer
// places. Run calls it after every event and poll; a driver of its own (a simulation in
// virtual time) calls it, with Apply, instead of Run.
func (e *Engine) Schedule() error {
	if err := e.readCards(); err != nil {
		return err
	}
	e.watchCards()
	e.resolveOwners()
	writes := e.paused == nil || e.resume()
	e.expire(e.store.Snapshot().Running())
	// Read again: expire may have changed some, and learnPeaks writes copies.
	e.learnPeaks(e.store.Snapshot().Running())
	e.failTooLarge()
	snap := e.store.Snapshot()
	smallest := snap.Smallest()
	if smallest == nil || !writes {
		return nil
	}
	running := snap.Running()
	v, err := e.view(snap, running, nil)
	if err != nil {
		return err
	}
	placed := Place(v.queue, v.cards, v.hosts, smallest.Estimate)
	// How many trainers share each machine once the round's have started.
	sharing := map[string]int{}
	for _, a := range running {
		sharing[a.Worker]++
	}
	for _, p := range placed {
		sharing[p.Worker]++
	}
	for _, p := range placed {
		if e.paused != nil {
			break
		}
		e.start(snap, snap.Job(p.Job), p, sharing[p.Worker])
	}
	return nil
}

// Preview is the decision a round would take now, with every waiting job's reason, and
// the cards as the packer sees them; it starts nothing. gpuq plan shows it.
func (e *Engine) Preview() (Decision, []CardState, error) {
	if err := e.readCards(); err != nil {
		return Decision{}, nil, err
	}
	snap := e.store.Snapshot()
	v, err := e.view(snap, snap.Running(), nil)
	if err != nil {
		return Decision{}, nil, err
	}
	return Pack(slices.Collect(v.queue), v.cards, v.hosts), v.cards, nil
}

// readCards reads the cards for a round.
func (e *Engine) readCards() error {
	cards, err := e.inv.Snapshot()
	if err != nil {
		return err
	}
	e.cards = cards
	clear(e.cardPos)
	for i, c := range cards {
		e.cardPos[idOf(c)] = i
	}
	return nil
}

// slots is the plan's limit on each card of the round, in order: the cluster's, or the
// machine's plan.
func (e *Engine) slots() []int {
	cl, ok := e.inv.(Cluster)
	if !ok {
		return e.cfg.Slots
	}
	out := make([]int, len(e.cards))
	for i, c := range e.cards {
		out[i] = cl.Slots(c)
	}
	return out
}

// timeLeft gives each card the time its machine has left, where it ends.
func (e *Engine) timeLeft(cards []CardState) {
	cl, ok := e.inv.(Cluster)
	if !ok {
		return
	}
	now := e.clock.Now()
	for i := range cards {
		if end := cl.Ends(cards[i].Worker); !end.IsZero() {
			// A machine past its end has no time left at all, not no limit.
			cards[i].Left = max(end.Sub(now), time.Nanosecond)
		}
	}
}

// view is what the packer sees of a round. Schedule, Preview and Why all build it here,
// so that they agree.
type view struct {
	cards []CardState
	hosts Hosts
	// queue yields the queued jobs in order, each with its sweep's quota, less those
	// that wait for their shape's probe.
	queue iter.Seq[Request]
}

// view builds a round's view from a snapshot: the cards (drained ones offering no slot),
// the machine's RAM, and the queue. probing, if not nil, is told of each job the queue
// passes over because it waits for its shape's probe.
func (e *Engine) view(snap Snapshot, running []*Attempt, probing func(*Job)) (view, error) {
	hosts, err := e.hosts(running)
	if err != nil {
		return view{}, err
	}
	reserved := append(running, e.settling()...)
	cards := cardStates(e.cards, e.slots(), e.cfg.Headroom, reserved, e.ours(running))
	e.timeLeft(cards)
	if drained := snap.Drained(); len(drained) > 0 {
		for i := range cards {
			if drained[CardID{cards[i].Worker, cards[i].Index}] {
				cards[i].Slots = 0
			}
		}
	}
	quota := e.quotas(snap, cards, running)
	queue := func(yield func(Request) bool) {
		probed := map[string]bool{}
		for j := range snap.Queued() {
			if waitsForProbe(snap, j, probed) {
				if probing != nil {
					probing(j)
				}
				continue
			}
			r := requestOf(j)
			r.Quota = quota(j.Sweep)
			if e.cfg.Durations != nil {
				r.Duration = e.cfg.Durations(j)
			}
			if !yield(r) {
				return
			}
		}
	}
	return view{cards: cards, hosts: hosts, queue: queue}, nil
}

// quotas returns each sweep's quota for a round (nil for a sweep without a limit),
// made when the queue first asks for it: its limit on each card, less its attempts
// running there. The sweeps that take the default of one job per card (see
// Submission.OnePerCard) share theirs: one job per card of all of them, since what
// keeps two of one sweep's jobs apart, memory that nobody declared, keeps any two apart.
func (e *Engine) quotas(snap Snapshot, cards []CardState, running []*Attempt) func(sweep string) *Quota {
	made := map[string]*Quota{}
	var onePerCard []int
	// free is a plan on each card less the attempts running there of the sweeps in.
	free := func(plan func(i int) int, in func(sweep string) bool) []int {
		out := make([]int, len(cards))
		for i := range cards {
			out[i] = plan(i)
		}
		for _, a := range running {
			if j := snap.Job(a.Job); j == nil || !in(j.Sweep) {
				continue
			}
			for _, g := range a.GPUs {
				if i, ok := e.cardPos[CardID{a.Worker, g}]; ok {
					out[i]--
				}
			}
		}
		return out
	}
	return func(sweep string) *Quota {
		if q, ok := made[sweep]; ok {
			return q
		}
		var q *Quota
		if sub := snap.Submission(sweep); sub != nil && sub.Limit != nil {
			q = &Quota{Slots: make([]int, len(cards))}
			for i, c := range cards {
				q.Slots[i] = sub.Limit.On(c.Index)
			}
			if sub.OnePerCard() {
				q.OnePerCard = true
				if onePerCard == nil {
					onePerCard = free(func(int) int { return 1 }, func(s string) bool {
						other := snap.Submission(s)
						return other != nil && other.OnePerCard()
					})
				}
				q.Free = onePerCard
			} else {
				q.Free = free(func(i int) int { return q.Slots[i] }, func(s string) bool { return s == sweep })
			}
		}
		made[sweep] = q
		return q
	}
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

// hosts reads the RAM of each machine of the round's cards for the packer: the
// cluster's machines, or this one.
func (e *Engine) hosts(running []*Attempt) (Hosts, error) {
	read := map[string]func() (int64, int64, error){}
	if cl, ok := e.inv.(Cluster); ok {
		for _, c := range e.cards {
			read[c.Worker] = func() (int64, int64, error) { return cl.Host(c.Worker) }
		}
	} else if e.cfg.Host != nil {
		read[""] = e.cfg.Host
	}
	hosts := make(Hosts, len(read))
	for worker, host := range read {
		total, avail, err := host()
		if err != nil {
			if worker != "" {
				return nil, fmt.Errorf("host memory of worker %s: %w", worker, err)
			}
			return nil, fmt.Errorf("host memory: %w", err)
		}
		hosts[worker] = HostState{Total: total, Used: total - avail, Headroom: e.cfg.HostHeadroom.Of(total)}
	}
	for _, a := range running {
		if h, ok := hosts[a.Worker]; ok {
			h.Reserved += a.HostReserve
			h.Ours += e.hostNow[a.ID]
			hosts[a.Worker] = h
		}
	}
	return hosts, nil
}

// failTooLarge deals with the queued jobs no card could hold even when idle, so that
// nothing waits forever. A job whose shape ran out of memory at its tier (another job of
// the shape proved it needs more than any card) steps down its ladder without an
// attempt of its own; any other fails, but on a cluster, where a larger worker may yet
// come: there it waits, too large for the cards there are.
func (e *Engine) failTooLarge() {
	_, cluster := e.inv.(Cluster)
	room := e.largestRoom()
	for j := range e.store.Snapshot().Largest() {
		if j.Estimate <= room {
			return
		}
		c := *j
		if l := e.store.Snapshot().Shape(j.Shape); l != nil && l.Floor > room {
			if msg, ok := e.stepDown(&c, e.store.Snapshot().Sweep(j.Sweep), j.Declared, false); ok {
				if e.put(&c) != nil {
					return
				}
				e.events(Event{Time: e.clock.Now(), Job: j.ID, Kind: "requeued", Message: fmt.Sprintf(
					"skips tier %d, where its shape needs at least %s, more than any card: %s", j.Pos.Tier, plans.FormatSize(l.Floor), msg)})
				continue
			}
		}
		if cluster {
			continue
		}
		c.State = JobFailed
		c.Reason = fmt.Sprintf("its estimate %s is larger than every card (%s at most, after headroom)",
			plans.FormatSize(j.Estimate), plans.FormatSize(room))
		if e.put(&c) != nil {
			return
		}
		e.events(Event{Time: e.clock.Now(), Job: j.ID, Kind: "failed", Message: c.Reason})
	}
}

// ours tells the processes of running attempts from foreign ones.
func (e *Engine) ours(running []*Attempt) func(worker string, pid int) bool {
	attempts := map[string]bool{}
	for _, a := range running {
		attempts[a.ID] = true
	}
	for _, g := range e.ghosts {
		attempts[g.attempt.ID] = true
	}
	return func(worker string, pid int) bool {
		a, ok := e.owners[proc{worker, pid}]
		return ok && attempts[a]
	}
}

// resolveOwners asks the runner, once per round and process, whose each process on the
// cards is, unless the machine that read the card has said (a worker). A pid no longer
// known keeps last round's owner, since NVML can show a dead process's memory for a
// moment after /proc has forgotten it; a pid on no card is forgotten, so the map stays
// as small as the cards' process lists.
func (e *Engine) resolveOwners() {
	next := make(map[proc]string, len(e.owners))
	for _, c := range e.cards {
		for _, p := range c.Processes {
			k := proc{c.Worker, p.PID}
			if p.Attempt != "" {
				next[k] = p.Attempt
			} else if a, ok := e.runner.Owner(p.PID); ok && c.Worker == "" {
				next[k] = a
			} else if a, ok := e.owners[k]; ok {
				next[k] = a
			}
		}
	}
	e.owners = next
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

// start starts a job that the round's snapshot holds queued.
func (e *Engine) start(snap Snapshot, j *Job, p Placement, sharing int) {
	cardIdx := p.Cards
	sub := snap.Submission(j.Sweep)
	if !sub.AllocConfRefused.IsZero() {
		// An empty value turns PyTorch's allocator options off (see withoutAllocConf).
		plain, sw := *sub, *sub.Sweep
		sw.Env = append(slices.Clone(sw.Env), plans.EnvVar{Name: "PYTORCH_CUDA_ALLOC_CONF"})
		plain.Sweep = &sw
		sub = &plain
	}
	job := *j
	job.Attempts++
	job.State = JobRunning
	a := &Attempt{ID: AttemptID(j.ID, job.Attempts), Job: j.ID, Shape: j.Shape, N: job.Attempts, Worker: p.Worker, GPUs: cardIdx,
		Tier: j.Pos.Tier, Params: j.Current, Estimate: j.Estimate, Reserve: j.Estimate, HostReserve: j.HostEstimate,
		Started: e.clock.Now(), Timeout: j.Timeout.After}
	if j.Probe && j.Estimate == 0 {
		e.changeShape(j.Shape, func(l *Shape) { l.Probe = j.ID })
	}
	var cards []gpu.Card
	for _, c := range e.cards {
		if c.Worker == p.Worker && slices.Contains(cardIdx, c.Index) {
			cards = append(cards, c)
		}
	}
	// Journaled before it starts: a daemon that dies in between finds the attempt, and
	// its runner tells whether it started (see Adopter), rather than start the job
	// twice. Without a journal there is nothing to survive, and one write per start is
	// what a simulation of 100,000 jobs can afford.
	if e.store.Journaled() && e.put(&job, a) != nil {
		return
	}
	st, err := e.runner.Start(Launch{Attempt: a, Job: &job, Submission: sub, Cards: cards, Sharing: sharing})
	if err != nil {
		if !e.store.Journaled() {
			e.put(&job, a)
		}
		// Not the job's fault: it goes back to the queue as it was.
		var cw *CannotWrite
		unwritable := errors.As(err, &cw)
		if unwritable {
			e.pause(cw)
		}
		e.Apply(Exit{Attempt: a.ID, Outcome: plans.Lost, Unstarted: unwritable, Detail: err.Error()})
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
		Message: fmt.Sprintf("on %s, tier %d, estimate %s", a.Where(), a.Tier, plans.FormatSize(a.Estimate))})
}

// largestRoom is the most memory a job could have on one card; unbounded while a card
// that was never read is out of service, since how large it is cannot be known.
func (e *Engine) largestRoom() int64 {
	var most int64
	for _, c := range e.cards {
		if c.Fault != "" && c.Total == 0 {
			return math.MaxInt64
		}
		most = max(most, e.cfg.Headroom.Room(c.Total))
	}
	return most
}
