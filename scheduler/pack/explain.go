package pack

// Explanations: why each job that does not start waits, built once for the jobs that
// wait alike.

import (
	"fmt"
	"iter"
	"math"
	"strings"
	"time"

	"github.com/gpuq/gpuq/plans"
)

// Reason says why a queued job waits. The packer returns one for every job it does not
// place, so that `plan` and `why` can say it.
type Reason string

// Reasons a job waits.
const (
	// NoSlot: every card the job could use has its plan's slots taken.
	NoSlot Reason = "no-slot"
	// NoMemory: cards have free slots, but none has room for the estimate now.
	NoMemory Reason = "no-memory"
	// Reserved: cards with room are reserved for the job at the head of the queue,
	// which needs more, and this job would keep it waiting: it is not expected to end
	// before they are due, nor to leave the head its room. (A person's hold on a job is
	// another thing: that job is "held".)
	Reserved Reason = "reserved"
	// NeedsIdle: the job runs alone (an exclusive rung, a probe, a shape that ran at more
	// than any card's room) and no card is idle.
	NeedsIdle Reason = "needs-idle"
	// NoHostMemory: the machine's RAM, less its reserve, has no room for the job's
	// host_memory now.
	NoHostMemory Reason = "no-host-memory"
	// TooLarge: even with none of gpuq's jobs running, no card (or not enough cards)
	// would have room, because of other processes or the plan.
	TooLarge Reason = "too-large"
	// NoCard: there is no card at all: a daemon with no cards of its own (--gpus
	// none) none of whose workers is linked.
	NoCard Reason = "no-card"
	// WouldSlow: cards have a slot and room, but the jobs on them already ask so much
	// of their compute that with this one they would pass the sharing target, and each
	// would run slower than alone (see Speed).
	WouldSlow Reason = "would-slow"
	// Unmeasured: the job's shape has not been measured yet, so it counts as
	// compute-bound, or as its sweep's busiest measured shape, and no card offers room
	// for that now, or each that does already runs a job not measured yet (a card takes
	// one guess at a time).
	Unmeasured Reason = "unmeasured"
)

// Wait is a job the packer did not place, and why.
type Wait struct {
	Job    string
	Reason Reason
	Detail string
}

// Waits are the jobs a Pack did not place, in queue order. Jobs that wait alike share
// one explanation: it is built once, and each job only refers to it by a small number,
// so a queue of 10,000 jobs costs no 10,000 copies of a reason (nor the garbage
// collector's scanning of them, nor a collection as often). It reads the queue given to
// Pack, which must not change while it is read.
type Waits struct {
	queue []Request
	why   whyOf
	whys  []Wait // by position in why; Job is not set, and whys[placed] is none
	n     int
}

// placed is the position in whys of a job that does not wait.
const placed = 0

// whyOf is, by queue position, the position in whys of why the job waits (or placed):
// a byte each while there are fewer than 256 explanations, as nearly always, four when
// there are more. It holds no pointer, so that the collector need not look inside it.
type whyOf struct {
	narrow []uint8 // nil once wide
	wide   []int32
}

func (w *whyOf) set(i int, why int32) {
	if w.wide == nil && why <= math.MaxUint8 {
		w.narrow[i] = uint8(why)
		return
	}
	if w.wide == nil {
		w.wide = make([]int32, len(w.narrow))
		for j, k := range w.narrow {
			w.wide[j] = int32(k)
		}
		w.narrow = nil
	}
	w.wide[i] = why
}

func (w *whyOf) get(i int) int32 {
	if w.wide == nil {
		return int32(w.narrow[i])
	}
	return w.wide[i]
}

// Len is how many jobs wait.
func (ws Waits) Len() int { return ws.n }

// All yields the jobs that wait, in queue order.
func (ws Waits) All() iter.Seq[Wait] {
	return func(yield func(Wait) bool) {
		for i := range ws.queue {
			k := ws.why.get(i)
			if k == placed {
				continue
			}
			w := ws.whys[k]
			w.Job = ws.queue[i].Job
			if !yield(w) {
				return
			}
		}
	}
}

// waits reports whether r waits for what a job before it waited for, without looking at
// the cards, and, in Pack, why (a position in whys).
func (p *packer) waits(r *Request) (int32, bool) {
	if p.res != nil && r.Memory > p.roomiest {
		// No card has room for it, and the reservation is made: Place needs no
		// reason, and where no card has a slot, Pack's is the same for every job.
		if p.roomiest == math.MinInt64 || !p.explain {
			return noSlot, true
		}
	}
	if !p.explain {
		return 0, false
	}
	p.planned = p.planned || r.UtilPlanned
	seen := &p.seen[uint64(r.Memory)*0x9e3779b97f4a7c15>>(64-seenBits)]
	if !seen.fit.of(r) || p.planned && seen.fit.sweep != r.Sweep {
		f := p.fitFor(r)
		why, ok := p.failedFor(&f)
		if !ok {
			return 0, false
		}
		*seen = failure{fit: f, why: why}
	}
	return seen.why, true
}

// failedFor finds the fit among those that waited this round, and why they did.
func (p *packer) failedFor(f *fit) (int32, bool) {
	k, ok := p.failed[f.memory]
	for ; ok && k >= 0; k = p.fails[k].next {
		if p.fails[k].fit == *f {
			return p.fails[k].why, true
		}
	}
	return 0, false
}

// fail notes that requests of fit f wait, and why.
func (p *packer) fail(f fit, why int32) {
	next, ok := p.failed[f.memory]
	if !ok {
		next = -1
	}
	p.failed[f.memory] = int32(len(p.fails))
	p.fails = append(p.fails, failure{f, why, next})
}

// explained keeps w among whys, and returns its position there.
func (p *packer) explained(w Wait) int32 {
	w.Job = ""
	p.whys = append(p.whys, w)
	return int32(len(p.whys) - 1)
}

// fit is what decides whether a request fits: requests alike in it that come later in a
// round fit no better, because placements only take room away. (A job's shape is
// another thing: the parameters that what is learned of memory is shared by.)
type fit struct {
	memory, host int64
	duration     time.Duration
	quota        *Quota
	util         float64 // Request.Util, which with blind and planned tells what it counts at
	gpus         int32
	exclusive    int32   // 1: exclusive
	blind        int32   // 1: not measured yet (a card takes one such: see secondGuess)
	assumed      int32   // 1: the whole card, for want of a measurement (its reason says so)
	measured     float32 // Request.UtilMeasured (its reason says it)
	// planned is 1 where its plan has it count as nothing (UtilPlanned); sweep is
	// Request.Sweep: beside a planned sweep's jobs not measured yet, a job of it and a
	// job of another wait differently (see apart).
	planned int32
	sweep   string
}

// of reports whether r is of fit f, as *f == p.fitFor(r) but without building r's fit, and
// stopping at memory, where fits that differ mostly differ: Pack asks it for every job of
// a long queue. It leaves out the sweep, which decides nothing where no planned job
// counts (see packer.planned).
func (f *fit) of(r *Request) bool {
	return f.memory == r.Memory && f.host == r.Host && f.duration == r.Duration && f.quota == r.Quota &&
		f.util == r.Util && f.gpus == int32(max(r.GPUsPerJob, 1)) && (f.exclusive == 1) == r.Exclusive &&
		(f.blind == 1) == r.UtilUnknown && (f.assumed == 1) == r.UtilAssumed && f.measured == r.UtilMeasured &&
		(f.planned == 1) == r.UtilPlanned
}

// fitFor is r's fit as the packer tells fits apart: its sweep left out where it
// decides nothing (no planned sweep's job not measured yet counts: see
// packer.planned), so that jobs of sweeps without a plan that ask alike are told why
// they wait once, not once a sweep.
func (p *packer) fitFor(r *Request) fit {
	f := fitOf(r)
	if !p.planned {
		f.sweep = ""
	}
	return f
}

func fitOf(r *Request) fit {
	f := fit{r.Memory, r.Host, r.Duration, r.Quota, r.Util, int32(max(r.GPUsPerJob, 1)), 0, 0, 0, r.UtilMeasured, 0, r.Sweep}
	if r.Exclusive {
		f.exclusive = 1
	}
	if r.UtilUnknown {
		f.blind = 1
	}
	if r.UtilAssumed {
		f.assumed = 1
	}
	if r.UtilPlanned {
		f.planned = 1
	}
	return f
}

// failure is a fit whose requests wait this round, and why; next is the position in
// packer.fails of another fit of the same memory, or -1.
type failure struct {
	fit  fit
	why  int32
	next int32
}

// seenBits sizes packer.seen: 16 fits.
const seenBits = 4

// noSlot is the position in packer.whys of the answer of waits when no card has a slot
// and the reservation is made: the same for every job.
const noSlot = 1

// why explains why r found no cards. It looks at every card, ignoring the reservation
// first, so that the most useful reason wins: reserved for the head, then needs an idle
// card, then memory, then slots. reserves says whether r should be given the
// reservation if none is made yet: not when no card could ever take it, nor when what
// it waits for is its own sweep's slots, which no other job takes.
func (p *packer) why(r Request) (w Wait, reserves bool) {
	need := max(r.GPUsPerJob, 1)
	w.Job = r.Job
	reservedFits, quotaFull := 0, 0
	var bestFree int64 = -1 << 62
	bestCard := "none"
	// The cards r would fit but for what their jobs ask of their compute, and of them
	// the one that would slow least.
	busy, leastBusy := 0, -1
	// The most cards one machine could ever offer r, and has with a free slot now: a
	// job's cards are on one machine.
	idleFits, withSlot := 0, 0
	idle, slotted := p.perMachine(), p.perMachine()
	for i := range p.cards {
		c := &p.cards[i]
		if p.couldTake(i, r) {
			idleFits = max(idleFits, idle.add(c.Worker))
		}
		if !c.open() {
			continue
		}
		if r.Quota.full(i) {
			quotaFull++
			continue
		}
		withSlot = max(withSlot, slotted.add(c.Worker))
		if p.fits(i, &r) && !p.mayUse(i, &r) {
			reservedFits++
		}
		if !c.shares(&r) && p.fitsSharing(i, &r) {
			if busy++; leastBusy < 0 || c.load(&r) < p.cards[leastBusy].load(&r) {
				leastBusy = i
			}
		}
		if f := c.Free(); f > bestFree {
			bestFree, bestCard = f, c.ID().String()
		}
	}
	reserves = true
	// Told only where reasons are worded: a job too large keeps no card either way.
	var othersEnd, drained []string
	if idleFits < need && p.explain && p.passing {
		othersEnd = p.fitsOnceOthersEnd(r, need)
	}
	if idleFits < need && p.explain && len(othersEnd) == 0 {
		drained = p.drainedFor(r, need)
	}
	waitsForOthers := len(othersEnd) > 0
	switch {
	case waitsForOthers:
		// Memory other gpuqs' trainers hold: they end, but theirs start others there
		// as they do, so no reservation is kept for it (it might never come due).
		w.Reason, reserves = NoMemory, false
	case len(drained) > 0:
		// Cards a person drained: they offer no slot until undrained, and keep no
		// reservation meanwhile.
		w.Reason, reserves = NoSlot, false
	case len(p.cards) == 0:
		w.Reason, reserves = NoCard, false
	case idleFits < need:
		w.Reason, reserves = TooLarge, false
	case reservedFits > 0:
		w.Reason = Reserved
	case r.Exclusive:
		w.Reason = NeedsIdle
	case busy > 0 && (r.UtilUnknown || r.UtilPlanned && p.cards[leastBusy].apart(&r)):
		w.Reason = Unmeasured
	case busy > 0:
		w.Reason = WouldSlow
	case withSlot >= need:
		w.Reason = NoMemory
	default:
		w.Reason = NoSlot
		reserves = !(quotaFull > 0 && withSlot == 0)
	}
	if !p.explain {
		return w, reserves
	}
	cards := "a card"
	if need > 1 {
		cards = fmt.Sprintf("%d cards", need)
	}
	switch w.Reason {
	case TooLarge:
		if p.tooLong(r, need) {
			w.Detail = fmt.Sprintf("is expected to run %s, and no machine with %s that could take it has that long left",
				plans.FormatDuration(r.Duration), cards)
			break
		}
		could := "no card"
		if idleFits > 0 {
			could = fmt.Sprintf("only %d", idleFits) // of the cards one machine has: a job's are on one
		}
		w.Detail = fmt.Sprintf("needs %s with %s free, but %s could ever offer that, given other processes, what each card has in use idle, headroom and the plan",
			cards, plans.FormatSize(r.Memory), could)
	case NoCard:
		w.Detail = "no card is connected: the daemon has no cards of its own, and no worker is linked (gpuq gpus lists them)"
	case Reserved:
		w.Detail = p.reservedWhy(r)
	case NeedsIdle:
		w.Detail = fmt.Sprintf("runs alone and needs %s with no other job", cards)
	case Unmeasured, WouldSlow:
		w.Detail = p.busyWhy(r, leastBusy)
	case NoMemory:
		w.Detail = fmt.Sprintf("needs %s per card; the most free on a card with a free slot is %s (GPU %s)", plans.FormatSize(r.Memory), plans.FormatSize(max(bestFree, 0)), bestCard)
		if waitsForOthers {
			w.Detail += fmt.Sprintf("; it fits %s only once another gpuq's trainers there have ended", strings.Join(othersEnd, ", "))
		}
	default:
		switch {
		case len(drained) > 0 && need > 1:
			w.Detail = fmt.Sprintf("needs %s of one machine, and only with drained ones among them: GPU %s (gpuq undrain %s lets jobs start there again)",
				cards, strings.Join(drained, ", GPU "), drained[0])
		case len(drained) > 0:
			w.Detail = fmt.Sprintf("only drained cards could take it: GPU %s (gpuq undrain %s lets jobs start there again)",
				strings.Join(drained, ", GPU "), drained[0])
		case r.Quota.spent():
			w.Detail = maxRunningWhy(r.Quota)
		case quotaFull > 0 && withSlot == 0 && r.Quota.OnePerCard:
			w.Detail = "one job per card, the default for jobs without a memory estimate and sweeps without a gpu_plan: " +
				"every card it may use has one (memory: lets gpuq pack them by memory)"
		case quotaFull > 0 && withSlot == 0:
			w.Detail = "every slot of the sweep's gpu_plan is taken"
		case quotaFull > 0:
			w.Detail = fmt.Sprintf("needs %s with a free slot; the sweep's gpus and gpu_plan leave it %d", cards, withSlot)
		case withSlot == 0:
			w.Detail = "every card's slots are taken"
		default:
			w.Detail = fmt.Sprintf("needs %s with a free slot; %d of the plan's cards have one", cards, withSlot)
		}
	}
	return w, reserves
}

// maxRunningWhy says why a job its sweep's max_running holds waits. What the sweep
// runs is its max_running less what it has left, less the jobs placed before this one
// (they fit now and start, but run not yet): more than the max_running where gpuq
// update lowered it below the jobs running.
func maxRunningWhy(q *Quota) string {
	const change = "(gpuq update --max-running changes it)"
	running := q.Max - *q.Left - q.Placed
	if q.Placed == 0 {
		return fmt.Sprintf("its sweep runs %s, at or past its max_running of %d %s", plans.Count(running, "job"), q.Max, change)
	}
	runs, more := "runs no job yet", plans.Count(q.Placed, "job")
	if running > 0 {
		runs, more = "runs "+plans.Count(running, "job"), fmt.Sprintf("%d more", q.Placed)
	}
	fit := "fit now and start"
	if q.Placed == 1 {
		fit = "fits now and starts"
	}
	return fmt.Sprintf("its sweep %s, and %s %s before it, which reaches its max_running of %d %s",
		runs, more, fit, q.Max, change)
}

// reservedWhy says why r may not start on the cards reserved for the head of the
// queue.
func (p *packer) reservedWhy(r Request) string {
	res := p.res
	cards := plans.CardsOn(res.Worker, res.Cards)
	if res.In == UnknownEnd {
		return fmt.Sprintf("%s is reserved for %s, first in the queue, which has waited %s for it; what runs there has no known end, and this job would not leave it room",
			cards, res.Job, plans.FormatDuration(res.head.Waited))
	}
	took := "its duration is not known yet"
	if r.Duration > 0 {
		took = "it is expected to take " + plans.FormatDuration(r.Duration)
	}
	return fmt.Sprintf("%s is reserved for %s, first in the queue, which is expected to have room there in %s; this job would not leave it room, and %s",
		cards, res.Job, plans.FormatDuration(res.In), took)
}

// fitsOnceOthersEnd is need cards of one machine, by name, that could take r once the
// trainers of other gpuqs on them have ended (see CardState.Passing), one of them at
// least holding some; none where there are no such cards.
func (p *packer) fitsOnceOthersEnd(r Request, need int) []string {
	var names []string
	for _, i := range p.oneMachine(need, func(i int) bool { return p.couldHold(i, r, p.cards[i].Passing) && p.inTime(i, &r) },
		func(i int) bool { return p.cards[i].Passing > 0 }) {
		names = append(names, "GPU "+p.cards[i].ID().String())
	}
	return names
}

// tooLong reports whether r waits for a machine with more time left: need cards of
// one machine could take it, but none that has the time.
func (p *packer) tooLong(r Request, need int) bool {
	m := p.perMachine()
	for i := range p.cards {
		if p.couldHold(i, r, 0) && m.add(p.cards[i].Worker) >= need {
			return true
		}
	}
	return false
}

// fitsSharing reports whether r would fit card i were it not for what the jobs there
// ask of its compute.
func (p *packer) fitsSharing(i int, r *Request) bool {
	c := &p.cards[i]
	target := c.Target
	c.Target = 0
	ok := p.fits(i, r)
	c.Target = target
	return ok
}

// busyWhy says why r may not join the jobs on card i, the one it would slow least.
func (p *packer) busyWhy(r Request, i int) string {
	c := &p.cards[i]
	card := c.ID().String()
	load := fmt.Sprintf("with it the jobs there would ask %.0f%% of the card, past the sharing target of %.0f%%",
		100*c.load(&r), 100*c.Target)
	if c.apart(&r) && c.PlannedJobs > 0 {
		load += fmt.Sprintf("; GPU %s runs %s", card, plannedOn(c))
	}
	if planned := r.UtilPlanned && c.apart(&r); r.UtilUnknown || planned {
		guess, counts := r.guess(), "so it counts as"
		if planned {
			counts = "and its sweep's gpu_plan speaks only for its own jobs: beside another sweep's it counts as"
			if c.Others {
				counts = "and its sweep's gpu_plan speaks only for its own jobs: beside another sweep's or another user's process it counts as"
			}
		}
		as := "compute-bound"
		if guess < 1 {
			as = fmt.Sprintf("%.0f%% of a card", 100*guess)
		}
		head := fmt.Sprintf("its shape's utilization is not measured yet, %s %s until it is; no card it fits is idle, ", counts, as)
		if c.load(&r) <= c.Target+slack && c.secondGuess(&r) {
			other := "a job not measured yet"
			if c.Blind == 0 { // the guess there is a planned sweep's
				other = plannedOn(c)
			}
			return head + fmt.Sprintf("and GPU %s, the least busy with room for it, already runs %s: a card takes one such guess at a time", card, other)
		}
		if !slows(c, &r) {
			return head + fmt.Sprintf("and on GPU %s, the least busy with room for it, %s", card, load)
		}
		return head + fmt.Sprintf("and it would slow the jobs on GPU %s, the least busy with room for it, to %.0f%% of their speed: %s",
			card, 100*c.slowdown(&r), load)
	}
	keeps := fmt.Sprintf("it keeps %.0f%% of a card busy", 100*r.Util)
	switch {
	case r.UtilPlanned:
		keeps = "its shape's utilization is not measured yet, and its sweep's gpu_plan has it count as nothing beside its own jobs"
	case r.UtilAssumed:
		keeps = "its shape's utilization is not measured yet (none of its attempts could be), so it counts as the whole card"
	case r.UtilMeasured > 0 && float64(r.UtilMeasured) < r.Util:
		keeps = fmt.Sprintf("it counts as %.0f%% of a card (NVML measured %.0f%%, but its jobs ran slower beside others than that says)",
			100*r.Util, 100*float64(r.UtilMeasured))
	}
	if !slows(c, &r) {
		return fmt.Sprintf("would pass the sharing target on GPU %s: %s, and %s", card, keeps, load)
	}
	return fmt.Sprintf("would slow the jobs on GPU %s to %.0f%% of their speed: %s, and %s", card, 100*c.slowdown(&r), keeps, load)
}

// plannedOn says which jobs not measured yet of a planned sweep card c runs, what they
// count at beside another sweep's job (see apart), and why.
func plannedOn(c *CardState) string {
	jobs, count := "a job", "counts"
	if c.PlannedJobs > 1 {
		jobs, count = plans.Count(c.PlannedJobs, "job"), "count"
	}
	as := "compute-bound"
	if c.PlannedJobs > 1 || c.Planned < 1 {
		as = fmt.Sprintf("%.0f%% of a card", 100*c.Planned)
	}
	if c.Mixed {
		return fmt.Sprintf("jobs of several sweeps, among them %s not measured yet of a sweep with a gpu_plan, which %s as %s there: "+
			"a gpu_plan speaks only for its own sweep's jobs", jobs, count, as)
	}
	beside := "another sweep's"
	if c.Others {
		beside = "another sweep's or another user's busy process"
	}
	return fmt.Sprintf("%s of sweep %s not measured yet, which %s as %s beside %s: its gpu_plan speaks only for its own jobs",
		jobs, c.Sweep, count, as, beside)
}

// slows reports whether the jobs on card c would run slower were r to join them, as
// people read it (a whole percentage): below a target of the whole card, a job may pass
// the target where it would slow nobody, and "to 100% of their speed" told nothing.
func slows(c *CardState, r *Request) bool { return math.Round(100*c.slowdown(r)) < 100 }
