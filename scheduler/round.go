package scheduler

// One scheduling round: the cards read, owners resolved, peaks learned, the queue packed
// and the placements started.

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/gpu"
	"github.com/gpuq/gpuq/scheduler/pack"
	"github.com/gpuq/gpuq/scheduler/state"
)

// Round applies the ends of attempts that arrived together and then runs a round, as
// the loop does after every event and poll: a driver of its own (a simulation in
// virtual time) calls it instead of Run or Serve.
func (e *Engine) Round(exits []Exit) error {
	e.driving("Round")
	return e.round(exits)
}

// round applies the ends of attempts that arrived together (see apply) and then runs a
// round, all in one transaction: it samples the cards, learns peaks, and starts what
// the packer places. A round does not follow ends that could not be written.
func (e *Engine) round(exits []Exit) error {
	var err error
	berr := e.batch(func() {
		// What the round journals is synced together: before it starts attempts (see
		// startAll), and at its end, not at each record. A sync takes milliseconds,
		// and a loop that synced once an end, and twice a round that starts attempts,
		// heard of no end meanwhile.
		e.failed(e.store.Grouped(func() {
			for _, x := range exits {
				e.apply(x)
			}
			if err = e.err; err == nil {
				err = e.schedule()
			}
		}))
	})
	if berr != nil && e.err == nil {
		e.err = fmt.Errorf("state not saved, stopping: %w", berr)
	}
	if err == nil {
		err = berr
	}
	return err
}

func (e *Engine) schedule() error {
	if err := e.readCards(); err != nil {
		return err
	}
	e.watchCards()
	e.resolveOwners()
	writes := e.paused == nil || e.resume()
	running := e.roundRunningNow()
	if e.expire(running) {
		running = e.roundRunningNow()
	}
	e.crowdTrack(running, e.clock.Now())
	e.crowdForeign(e.clock.Now())
	if e.readMetrics(running) {
		running = e.roundRunningNow()
	}
	// learnPeaks puts its copies in running; what is learned of a shape may change
	// the reservations of others, which it names.
	rewritten := e.learnPeaks(running)
	e.failTooLarge()
	if writes {
		e.settleAfter()
		defer e.saveIdle() // what this round's packing learns too
	}
	view := e.store.Latest()
	smallest, _, ok := e.store.Queue().Extremes()
	if !ok || !writes {
		return nil
	}
	for _, id := range rewritten {
		if i := runningAt(running, id); i >= 0 {
			running[i] = e.measured(view.Attempt(id))
		}
	}
	v, err := e.packView(view, running, &e.roundBufs)
	if err != nil {
		return err
	}
	e.store.Queue().SetCards(e.largest, e.target())
	e.store.Queue().RanFor(running, e.clock.Now())
	d := e.place(v, smallest)
	e.headed(view, d)
	e.startAll(view, d.Placements, running)
	return nil
}

// runningAt is where attempt id is in running, which is in the order of their ids as
// the store yields them (-1: not there): found without a map of all of a fleet's
// thousands, made for each round that rewrote a few.
func runningAt(running []*state.Attempt, id string) int {
	i, found := slices.BinarySearchFunc(running, id, func(a *state.Attempt, id string) int { return strings.Compare(a.ID, id) })
	if !found {
		// Not in order after all: a look through them all.
		return slices.IndexFunc(running, func(a *state.Attempt) bool { return a.ID == id })
	}
	return i
}

// Preview is the decision a round would take now, with every waiting job's reason, and
// the cards as the packer sees them; it starts nothing. gpuq plan shows it, of an engine
// that never runs.
func (e *Engine) Preview() (pack.Decision, []pack.CardState, error) {
	e.driving("Preview")
	if err := e.readCards(); err != nil {
		return pack.Decision{}, nil, err
	}
	view := e.store.Latest()
	v, err := e.packView(view, e.runningNow(), nil)
	if err != nil {
		return pack.Decision{}, nil, err
	}
	return pack.Pack(e.queue(v, nil), v.cards, v.hosts), v.cards, nil
}

// readCards reads the cards for a round.
func (e *Engine) readCards() error {
	cards, err := e.inv.Read()
	if err != nil {
		return err
	}
	// Compared with the engine's own list of the last reading's cards, not with that
	// reading: an inventory may fill the same array again (the simulator's machine
	// does), which would then be compared with itself.
	same := len(cards) == len(e.cardIDs)
	for i := 0; same && i < len(cards); i++ {
		same = cards[i].ID() == e.cardIDs[i]
	}
	e.cards = cards
	e.readings++
	if !same {
		e.placeCards()
	}
	return nil
}

// placeCards finds where each card is among the round's, and the largest's memory:
// again only when the list of cards changed, as a fleet's thousands do not each round.
// (A card NVML could not read at its first reading has no memory yet; until the list
// changes, the queue then weighs by what the others have, or by memory alone.)
func (e *Engine) placeCards() {
	clear(e.cardPos)
	clear(e.workerAt)
	e.cardIDs = e.cardIDs[:0]
	e.cardsRead++
	e.largest = 0
	e.idleAt = slices.Grow(e.idleAt[:0], len(e.cards))
	was := e.idle
	idle := make(map[plans.CardID]state.IdleUse, len(e.cards))
	var stored map[plans.CardID]*state.IdleUse // read once a card is not known here
	for i, c := range e.cards {
		e.largest = max(e.largest, c.Total)
		e.cardIDs = append(e.cardIDs, c.ID())
		e.cardPos[c.ID()] = i
		// What a card that went (a worker gone) read idle is forgotten here; what was
		// learned before the engine started (the daemon's last run) is in the store.
		// Either counts for the very card it was learned of alone: another put in its
		// place is read idle again, and what was learned of the card it replaced is
		// forgotten.
		u, ok := e.idle[c.ID()]
		if !ok {
			if stored == nil {
				stored = e.store.Latest().IdleUses()
			}
			if s := stored[c.ID()]; s != nil {
				u, ok = *s, true
			}
		}
		at := int64(-1)
		switch {
		case ok && u.Of(c.UUID, c.Total):
			idle[c.ID()], at = u, u.Used
		case ok && u.Replaced(c.UUID, c.Total):
			e.forgetIdle(c.ID())
		}
		e.idleAt = append(e.idleAt, at)
		if _, ok := e.workerAt[c.Worker]; !ok {
			e.workerAt[c.Worker] = i
		}
	}
	e.idle = idle
	e.leftIdle(was)
	if stored != nil {
		e.pruneIdle(stored)
	}
}

// slots is the plan's limit on each card of the round, in order: the cluster's, or the
// machine's plan. A cluster's are in an array of the engine's, filled again at each
// call (a fleet's 8,000 cards each round): read them before the next.
func (e *Engine) slots() []int {
	cl, ok := e.inv.(Cluster)
	if !ok {
		return e.cfg.Slots
	}
	e.slotsNow = slices.Grow(e.slotsNow[:0], len(e.cards))[:len(e.cards)]
	for i, c := range e.cards {
		e.slotsNow[i] = cl.Slots(c)
	}
	return e.slotsNow
}

// timeLeft gives each card the time its machine has left, where it ends.
func (e *Engine) timeLeft(cards []pack.CardState) {
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

// packView is what the packer sees of a round: the cards (drained ones offering no slot,
// each with when its attempts are expected to end and how long its machine has left),
// each machine's RAM, and how the queue's jobs are asked for. Round, Preview, Why
// and Waits all build it here, so that they agree.
type packView struct {
	view    state.View
	cards   []pack.CardState
	hosts   pack.Hosts
	request func(*state.Group, state.Member) pack.Request
	// asks is what each of a group's jobs asks of a card, as its requests say.
	asks func(*state.Group) int64
}

// packViewBufs are arrays a packView's cards and their ends, and the attempts' holdings
// they are made of, may be kept in.
type packViewBufs struct {
	cards []pack.CardState
	ends  []pack.Release
	held  holdingBufs
	// hosts is the machines' RAM, emptied and filled again: a fleet's thousand
	// machines made a map each round.
	hosts pack.Hosts
}

// packView builds what the packer sees from a view of the store. buf, if not nil,
// holds the arrays the cards are kept in, and is given the ones they are: a round's,
// which nothing keeps past it, reuses the round before's.
func (e *Engine) packView(view state.View, running []*state.Attempt, buf *packViewBufs) (packView, error) {
	if buf == nil {
		buf = &packViewBufs{}
	}
	if buf.hosts == nil {
		buf.hosts = pack.Hosts{}
	}
	hosts, err := e.hosts(buf.hosts, running)
	if err != nil {
		return packView{}, err
	}
	held := e.holdings(append(running, e.settling()...), &buf.held)
	cards := e.cardStatesOf(buf.cards, e.slots(), held)
	buf.cards = cards
	e.timeLeft(cards)
	e.addEnds(cards, held, &buf.ends)
	if drained := view.Drained(); len(drained) > 0 {
		for i := range cards {
			if drained[plans.CardID{Worker: cards[i].Worker, Index: cards[i].Index}] {
				// Drained, where the drain alone keeps jobs off it: undrained, a card
				// of no slot (its plan's, its worker's leaving) takes none either.
				cards[i].Drained = cards[i].Slots > 0
				cards[i].Slots = 0
			}
		}
	}
	fit := e.fitsOf(view, cards)
	return packView{view: view, cards: cards, hosts: hosts, request: e.requester(fit, e.quotas(view, cards, running)), asks: fit.asks}, nil
}

// requester turns the queue's jobs into the packer's requests: each with its sweep's
// quota, how long it is expected to run, and how long it has headed the queue.
func (e *Engine) requester(fit *fits, quota func(sweep string) *pack.Quota) func(*state.Group, state.Member) pack.Request {
	now := e.clock.Now()
	return func(g *state.Group, m state.Member) pack.Request {
		memory, alone := fit.ask(g.Key.Estimate, g.Key.Shape)
		r := pack.Request{Job: m.ID, Memory: memory, GPUsPerJob: g.Key.GPUs, Host: g.Key.Host,
			Exclusive: g.Key.Exclusive || g.Key.Probe || alone, Quota: quota(g.Sweep), Duration: cmp.Or(g.Took(), g.Key.Timeout)}
		l := e.store.KnownShape(g.Key.Shape)
		util, known, planned := e.utilCounts(g.Key.Shape, l)
		r.Util, r.UtilUnknown, r.Sweep = util, !known, g.Sweep
		if planned > 0 {
			r.Util, r.UtilPlanned = planned, true
		}
		r.UtilAssumed = known && l != nil && l.Unmeasured
		if known && l != nil && !l.Unmeasured && l.Util < util {
			r.UtilMeasured = float32(l.Util)
		}
		if m.Seq == e.head.seq {
			r.Waited = now.Sub(e.head.since)
		}
		return r
	}
}

// fits is what a round's queued jobs ask of a card: their estimates, but for a job whose
// shape ran at an estimate above every card's room (see ranAt), which runs alone on an
// idle card that has its estimate free, as that job did. Such a job asks for its
// estimate less the least margin (see pack.CardState.Margin) of the cards that could
// hold that much, exclusively: on each of them, the packer's free is then at least what
// it asks only where the card has the estimate free, by NVML's reading; one that keeps
// a larger margin must have more than the estimate free.
type fits struct {
	view        state.View
	room, total int64 // the most any card offers, and the largest card's memory
	cards       []pack.CardState
	// margin is the least margin of each size of card, by its memory, once asked.
	margin map[int64]int64
}

func (e *Engine) fitsOf(view state.View, cards []pack.CardState) *fits {
	return &fits{view: view, room: e.largestRoom(), total: e.largest, cards: cards}
}

// ask is what a queued job of shape with estimate est asks of a card, and whether it
// must have the card alone.
func (f *fits) ask(est int64, shape string) (int64, bool) {
	if est <= f.room || !ranAt(f.view.Shape(shape), est, f.room, f.total) {
		return est, false
	}
	if f.margin == nil {
		f.margin = map[int64]int64{}
		for _, c := range f.cards {
			if m, ok := f.margin[c.Total]; !ok || c.Margin() < m {
				f.margin[c.Total] = c.Margin()
			}
		}
	}
	kept := int64(math.MaxInt64) // the largest card holds est (see ranAt): one is found
	for total, m := range f.margin {
		if total >= est {
			kept = min(kept, m)
		}
	}
	return est - kept, true
}

// asks is what each of a group's jobs asks of a card (see ask).
func (f *fits) asks(g *state.Group) int64 {
	memory, _ := f.ask(g.Key.Estimate, g.Key.Shape)
	return memory
}

// ranAt reports whether est, above room, is the measured peak of shape l (a job of it
// ran at that much on a card, up to total, the largest card's memory) and no OOM of it
// proved it needs more than room: such a job fits a card alone, and is not too large.
func ranAt(l *state.Shape, est, room, total int64) bool {
	return l != nil && l.Peak >= est && l.Peak <= total && l.Floor <= room
}

// head is the job at the head of the queue that waits, cards reserved for it, and
// since when it has.
type head struct {
	job   string
	seq   uint64 // the job's
	since time.Time
}

// headed notes which job the round reserved cards for. A round that reserved none
// (the queue read no further) leaves the head as it was; it goes once it starts.
func (e *Engine) headed(view state.View, d pack.Decision) {
	switch r := d.Reservation; {
	case r != nil && r.Job != e.head.job:
		e.head = head{job: r.Job, seq: view.Job(r.Job).Seq, since: e.clock.Now()}
	case slices.ContainsFunc(d.Placements, func(p pack.Placement) bool { return p.Job == e.head.job }):
		e.head = head{}
	}
}

// addEnds tells the packer when each attempt on a card is expected to end, in buf's
// array (see packView).
func (e *Engine) addEnds(states []pack.CardState, held []holding, buf *[]pack.Release) {
	// One array for every card's, each card's part as long as its attempts.
	n := 0
	for _, c := range states {
		n += c.Running
	}
	if cap(*buf) < n {
		// With room to spare: the attempts running grow by a few most rounds.
		*buf = make([]pack.Release, 0, n+n/4)
	}
	ends := (*buf)[:0]
	for i := range states {
		ends = ends[len(ends):]
		states[i].Ends = ends[:0:states[i].Running]
		ends = ends[:states[i].Running]
	}
	for _, h := range held {
		for _, i := range h.at {
			states[i].Ends = insertEnd(states[i].Ends, h.end)
		}
	}
}

// insertEnd appends end to ends, which has room for it, in its place by In: after
// those that end no later. A card holds a few attempts, and a sort for each card and
// round cost more.
func insertEnd(ends []pack.Release, end pack.Release) []pack.Release {
	at := len(ends)
	for at > 0 && ends[at-1].In > end.In {
		at--
	}
	ends = append(ends, end)
	copy(ends[at+1:], ends[at:])
	ends[at] = end
	return ends
}

// left is how long an attempt is expected to run on: until its shape's learned
// duration is up, or else its timeout; Unknown when neither says, or it has run past
// both. An attempt that has ended (its memory not yet gone from the card) is about to
// free it.
func (e *Engine) left(a *state.Attempt, now time.Time) time.Duration {
	if !a.Running() {
		return 0
	}
	took := a.Expected
	if took == 0 {
		took = e.store.Queue().Took(a.Shape) // learned since it started
	}
	ran := now.Sub(a.Started)
	for _, d := range []time.Duration{took, a.Timeout} {
		if left := d - ran; d > 0 && left > 0 {
			return left
		}
	}
	return pack.UnknownEnd
}

// quotas returns each sweep's quota for a round (nil for a sweep without a limit),
// made when the queue first asks for it: its limit on each card, less its attempts
// running there. The sweeps that take the default of one job per card (see
// Submission.OnePerCard) share theirs: one job per card of all of them, since what
// keeps two of one sweep's jobs apart, memory that nobody declared, keeps any two apart.
func (e *Engine) quotas(view state.View, cards []pack.CardState, running []*state.Attempt) func(sweep string) *pack.Quota {
	made := map[string]*pack.Quota{}
	var onePerCard []int
	// free is a plan on each card less the attempts running there of the sweeps in.
	free := func(plan func(i int) int, in func(sweep string) bool) []int {
		out := make([]int, len(cards))
		for i := range cards {
			out[i] = plan(i)
		}
		for _, a := range running {
			if j := view.Job(a.Job); j == nil || !in(j.Sweep) {
				continue
			}
			for _, g := range a.GPUs {
				if i, ok := e.cardAt(a.Worker, g); ok {
					out[i]--
				}
			}
		}
		return out
	}
	return func(sweep string) *pack.Quota {
		if q, ok := made[sweep]; ok {
			return q
		}
		var q *pack.Quota
		if sub := view.Submission(sweep); sub != nil && (sub.Limit != nil || sub.MaxRunning() > 0) {
			q = &pack.Quota{Slots: make([]int, len(cards))}
			for i, c := range cards {
				q.Slots[i] = plans.NoSlotLimit
				if sub.Limit != nil {
					q.Slots[i] = sub.Limit.On(c.Index)
				}
			}
			if n := sub.MaxRunning(); n > 0 {
				q.Max, q.Left = n, maxRunningLeft(view, running, sweep, n)
			}
			if sub.OnePerCard() {
				q.OnePerCard = true
				if onePerCard == nil {
					onePerCard = free(func(int) int { return 1 }, func(s string) bool {
						other := view.Submission(s)
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

// maxRunningLeft is how many more of a sweep's jobs may start under its max_running
// of n: n less its attempts running.
func maxRunningLeft(view state.View, running []*state.Attempt, sweep string, n int) *int {
	left := n
	for _, a := range running {
		if j := view.Job(a.Job); j != nil && j.Sweep == sweep {
			left--
		}
	}
	return &left
}

// waitsForProbe says whether a queued job of memory: probe, of a shape not measured
// yet, waits for its shape to be: the first of each shape runs alone (requestOf makes
// it exclusive) and the others wait for it. probing collects the shapes offered this
// round.
func waitsForProbe(view state.View, shape string, probing map[string]bool) bool {
	if probeOf(view, shape) != "" || probing[shape] {
		return true
	}
	probing[shape] = true
	return false
}

// probeOf is the job that measures a shape now: the shape's probe while its job runs
// ("" when none). A probe whose job does not run holds nothing: the round that named
// it may not have recorded its attempt (a disk that filled in between: the engine
// pauses, and a restart may follow), and its shape would wait for it for ever.
func probeOf(view state.View, shape string) string {
	l := view.Shape(shape)
	if l == nil || l.Probe == "" {
		return ""
	}
	if j := view.Job(l.Probe); j == nil || j.State != state.JobRunning {
		return ""
	}
	return l.Probe
}

// hosts reads the RAM of each machine of the round's cards for the packer, into hosts
// emptied: the cluster's machines, or this one.
func (e *Engine) hosts(hosts pack.Hosts, running []*state.Attempt) (pack.Hosts, error) {
	clear(hosts)
	add := func(worker string, total, avail int64, err error) error {
		if err != nil {
			if worker != "" {
				return fmt.Errorf("host memory of worker %s: %w", worker, err)
			}
			return fmt.Errorf("host memory: %w", err)
		}
		hosts[worker] = pack.HostState{Total: total, Used: total - avail, Headroom: e.cfg.HostHeadroom.Of(total)}
		return nil
	}
	if cl, ok := e.inv.(Cluster); ok {
		// Each machine once, in the cards' order; a fleet's are thousands of cards.
		for i, c := range e.cards {
			if i > 0 && e.cards[i-1].Worker == c.Worker {
				continue
			}
			if _, read := hosts[c.Worker]; read {
				continue
			}
			total, avail, err := cl.Host(c.Worker)
			if err := add(c.Worker, total, avail, err); err != nil {
				return nil, err
			}
		}
	} else if e.cfg.Host != nil {
		total, avail, err := e.cfg.Host()
		if err := add("", total, avail, err); err != nil {
			return nil, err
		}
	}
	for _, a := range running {
		var ours int64
		if len(e.hostNow) > 0 {
			ours = e.hostNow[a.ID]
		}
		if a.HostReserve == 0 && ours == 0 {
			continue // nothing to add: a fleet's attempts mostly, where RAM is not read
		}
		if h, ok := hosts[a.Worker]; ok {
			h.Reserved += a.HostReserve
			h.Ours += ours
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
	if _, largest, ok := e.store.Queue().Extremes(); !ok || largest <= room {
		return
	}
	view := e.store.Latest()
	for _, id := range e.store.Queue().Larger(room) {
		j := view.Job(id)
		if est, _ := view.Estimate(j); ranAt(view.Shape(j.Shape), est, room, e.largest) {
			continue // a job of its shape ran at that: it waits for a card of its own (see fits)
		}
		c := *j
		l := view.Shape(j.Shape)
		if l != nil && l.Base > room && plans.BatchOnly(j.Ladder, view.Sweep(j.Sweep).OOM.Keys) {
			if cluster {
				continue
			}
			c.State = state.JobFailed
			c.Reason = fmt.Sprintf("a job of its shape ran out of memory loading its model, before any batch: it needs at least %s there, more than any card has room for (%s after headroom); %s",
				plans.FormatSize(l.Base), plans.FormatSize(room), unloadableAdvice)
			if e.put(state.Change{Jobs: []*state.Job{&c}}) != nil {
				return
			}
			e.events(Event{Time: e.clock.Now(), Job: j.ID, Kind: "failed", Message: c.Reason})
			continue
		}
		if l != nil && l.Floor > room {
			if msg, ok := e.stepDown(&c, view.Sweep(j.Sweep), j.Declared, false); ok {
				if e.put(state.Change{Jobs: []*state.Job{&c}}) != nil {
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
		c.State = state.JobFailed
		est, _ := view.Estimate(j)
		c.Reason = fmt.Sprintf("its estimate %s is larger than every card (%s at most, after headroom)",
			plans.FormatSize(est), plans.FormatSize(room))
		if e.put(state.Change{Jobs: []*state.Job{&c}}) != nil {
			return
		}
		e.events(Event{Time: e.clock.Now(), Job: j.ID, Kind: "failed", Message: c.Reason})
	}
}

// settling returns the ended attempts whose memory NVML still shows on their cards, so
// that their estimates stay reserved: the next job must not OOM on a ghost. Each waits
// at most cfg.Settle.
func (e *Engine) settling() []*state.Attempt {
	now := e.clock.Now()
	kept := e.ghosts[:0]
	var out []*state.Attempt
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

// startAll starts a round's placements, of jobs the round's view holds queued. The
// attempts are journaled before they start, all in one record: a daemon that dies in
// between finds them, and its runner tells whether each started (see Adopter), rather
// than start a job twice. What the runner says of each (its leader, its log) is written
// in one more. Without a journal there is nothing to survive, and one write a round is
// what a simulation of 100,000 jobs can afford. An attempt whose files cannot be
// written pauses the engine (see pause); it and those not started yet go back to the
// queue as they were: not the jobs' fault.
func (e *Engine) startAll(view state.View, placed []pack.Placement, running []*state.Attempt) {
	if len(placed) == 0 {
		return
	}
	sharing := e.sharing(placed, running)
	journaled := e.store.Journaled()
	launches := make([]Launch, len(placed))
	sweeps := launchSweeps{view: view, of: map[string]*state.Submission{}}
	for i, p := range placed {
		launches[i] = e.launch(&sweeps, view.Job(p.Job), p, sharing[p.Worker])
	}
	// Synced, with what the round journaled before them, before any starts.
	if journaled && e.put(launched(launches)) != nil {
		return
	}
	if err := e.failed(e.store.Sync()); err != nil {
		// Recorded, and not surely on the disk: none starts, and each goes back to the
		// queue as it was (the engine has paused, or stops).
		for _, l := range launches {
			e.apply(Exit{Attempt: l.Attempt.ID, Outcome: plans.Lost, Unstarted: true, Detail: err.Error()})
		}
		return
	}
	// What is written of them once they have started, in arrays as long as they end up.
	ran := state.Change{Attempts: make([]*state.Attempt, 0, len(launches))}
	if !journaled {
		ran.Jobs = make([]*state.Job, 0, len(launches))
	}
	var lost []Exit
	// The started, to tell of where someone listens: wording a fleet's thousands of
	// starts, which nobody hears, cost its rounds milliseconds.
	var started []*state.Attempt
	tried := e.startEach(launches, journaled)
	for i, l := range launches {
		if !journaled {
			ran.Jobs = append(ran.Jobs, l.Job)
		}
		st, err := tried[i].st, tried[i].err
		if err != nil {
			if !journaled {
				ran.Attempts = append(ran.Attempts, l.Attempt)
			}
			var cw *state.CannotWrite
			unwritable := errors.As(err, &cw)
			if unwritable {
				e.pause(cw)
			}
			lost = append(lost, Exit{Attempt: l.Attempt.ID, Outcome: plans.Lost, Unstarted: unwritable, Detail: err.Error()})
			continue
		}
		// The runner reports the attempt's end on Exits, read only after this round.
		// It started when its trainer did, not when the round did: a round that starts
		// many takes a while, and a short job's learned duration is not that queue.
		a := *l.Attempt
		a.Leader, a.Log, a.Command, a.Started = st.Leader, st.Log, st.Command, tried[i].at
		if !st.At.IsZero() {
			a.Started = st.At // the trainer's start, as its runner saw it
		}
		ran.Attempts = append(ran.Attempts, &a)
		if e.heard {
			started = append(started, &a)
		}
		e.crowdJoin(&a, a.Started, true)
	}
	if e.put(ran) != nil {
		return
	}
	for _, x := range lost {
		e.apply(x)
	}
	for _, a := range started {
		e.events(Event{Time: a.Started, Job: a.Job, Attempt: a.N, Kind: "started",
			Message: fmt.Sprintf("on %s, tier %d, %s", a.Where(), a.Tier, estimateWords(a.Estimate))})
	}
}

// launched is the change that records launches before they start.
func launched(launches []Launch) state.Change {
	c := state.Change{Jobs: make([]*state.Job, len(launches)), Attempts: make([]*state.Attempt, len(launches))}
	for i, l := range launches {
		c.Jobs[i], c.Attempts[i] = l.Job, l.Attempt
	}
	return c
}

// tried is what starting one launch came to.
type tried struct {
	st  Started
	at  time.Time // when its start returned
	err error
}

// sharing is how many trainers share each machine the round starts on once they have
// started: its placements, and the attempts running there, as followed (see crowds)
// where every running attempt is, else counted through them (a fleet's tens of
// thousands, which cost its round a millisecond).
func (e *Engine) sharing(placed []pack.Placement, running []*state.Attempt) map[string]int {
	out := map[string]int{}
	for _, p := range placed {
		out[p.Worker]++
	}
	if len(running) == len(e.crowds.of) {
		for w, n := range out {
			out[w] = n + e.crowds.workers[w]
		}
		return out
	}
	for _, a := range running {
		if n, ok := out[a.Worker]; ok {
			out[a.Worker] = n + 1
		}
	}
	return out
}

// startEach starts each launch once, as many at a time as the runner takes (see
// Concurrent; one where it says nothing), and returns what each came to, in order. A
// launch not begun while the engine is paused, or once a start of this round could not
// write the attempt's files (state.CannotWrite: the engine is about to pause), is not
// begun at all: it shares that error, and goes back to the queue unstarted. Where
// answer is set (the round's attempts are in the store as they start), requests that
// only read (why) are answered between the starts this goroutine makes, not kept
// waiting behind a round that starts many.
func (e *Engine) startEach(launches []Launch, answer bool) []tried {
	out := make([]tried, len(launches))
	var mu sync.Mutex
	next, halt := 0, e.pausedErr()
	// take is the next launch to begin, or the reason none may.
	take := func() (int, error) {
		mu.Lock()
		defer mu.Unlock()
		i := next
		next++
		return i, halt
	}
	work := func(loop bool) {
		for i, err := take(); i < len(launches); i, err = take() {
			if err == nil {
				out[i].st, err = e.runner.Start(launches[i])
				out[i].at = e.clock.Now()
				var cw *state.CannotWrite
				if errors.As(err, &cw) {
					mu.Lock()
					if halt == nil {
						halt = cw
					}
					mu.Unlock()
				}
			}
			out[i].err = err
			if loop && answer {
				e.answer()
			}
		}
	}
	at := 1
	if c, ok := e.runner.(Concurrent); ok {
		at = min(max(1, c.StartsAtOnce()), len(launches))
	}
	var wg sync.WaitGroup
	for range at - 1 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			work(false)
		}()
	}
	work(true) // the loop's own goroutine
	wg.Wait()
	return out
}

// pausedErr is why no attempt may start now: the engine is paused; nil when it is not.
func (e *Engine) pausedErr() error {
	if e.paused == nil {
		return nil
	}
	return e.paused
}

// launchSweeps is a round's view, and the sweeps its launches start jobs of as they
// start them, each read once: a fleet's round starts thousands of one sweep's.
type launchSweeps struct {
	view state.View
	of   map[string]*state.Submission
}

// submission is a sweep as its jobs start.
func (s *launchSweeps) submission(name string) *state.Submission {
	if sub, ok := s.of[name]; ok {
		return sub
	}
	sub := s.view.Submission(name)
	if !sub.AllocConfRefused.IsZero() {
		// An empty value turns PyTorch's allocator options off (see withoutAllocConf).
		plain, sw := *sub, *sub.Sweep
		sw.Env = append(slices.Clone(sw.Env), plans.EnvVar{Name: "PYTORCH_CUDA_ALLOC_CONF"})
		plain.Sweep = &sw
		sub = &plain
	}
	s.of[name] = sub
	return sub
}

// launch is what starting job j where p places it takes: the job as it runs and its
// attempt.
func (e *Engine) launch(sweeps *launchSweeps, j *state.Job, p pack.Placement, sharing int) Launch {
	cardIdx := p.Cards
	view, sub := sweeps.view, sweeps.submission(j.Sweep)
	job := *j
	job.Estimate, job.HostEstimate = view.Estimate(j) // what it starts with
	job.Attempts++
	job.State = state.JobRunning
	a := &state.Attempt{ID: state.AttemptID(j.ID, job.Attempts), Job: j.ID, Shape: j.Shape, N: job.Attempts, Worker: p.Worker, GPUs: cardIdx,
		Tier: j.Pos.Tier, Params: j.Current, Estimate: job.Estimate, Reserve: job.Estimate, HostReserve: job.HostEstimate,
		Started: e.clock.Now(), Timeout: j.Timeout.After, Alone: requestOf(&job).Exclusive, Expected: e.store.Queue().Took(j.Shape)}
	if j.Probe && job.Estimate == 0 {
		e.changeShape(j.Shape, func(l *state.Shape) { l.Probe = j.ID }, nil)
	}
	// Its cards in the inventory's order.
	at := make([]int, 0, len(cardIdx))
	for _, idx := range cardIdx {
		if i, ok := e.cardAt(p.Worker, idx); ok {
			at = append(at, i)
		}
	}
	slices.Sort(at)
	cards := make([]gpu.Card, len(at))
	for k, i := range at {
		cards[k] = e.cards[i]
	}
	return Launch{Attempt: a, Job: &job, Submission: sub, Cards: cards, Sharing: sharing}
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

// estimateWords says an attempt's estimate in an event: "estimate 9.00 GiB", or "no
// estimate" (never "0 B").
func estimateWords(b int64) string {
	if b <= 0 {
		return "no estimate"
	}
	return "estimate " + plans.FormatSize(b)
}
