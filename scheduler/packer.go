package scheduler

import (
	"cmp"
	"fmt"
	"iter"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/gpuq/gpuq/plans"
)

// Request is a queued job as the packer sees it.
type Request struct {
	Job        string
	Memory     int64 // per card; 0 = unknown, slots alone decide
	GPUsPerJob int   // distinct cards needed at once
	Exclusive  bool  // needs idle cards and keeps them to itself
	Host       int64 // host RAM; 0 = unknown
	// Quota, when not nil, limits the job to its sweep's cards and plan; the requests
	// of one sweep share it.
	Quota *Quota
	// Duration is how long the job is expected to run: its shape's learned duration,
	// or its timeout, which bounds it; 0 = unknown. A card whose machine has less time
	// left (CardState.Left) does not take it, and it backfills reserved cards only if it
	// ends before they are due.
	Duration time.Duration
	// Waited is how long the job has waited at the head of the queue with cards
	// reserved for it (see DueAfter); 0 for any other job.
	Waited time.Duration
}

// Quota is what a sweep's own gpus and gpu_plan leave its jobs when several sweeps
// share the machine: on cards[i], Slots[i] is the sweep's plan (0 where it may not
// run) and Free[i] how many more of its jobs may start. Sweeps held to one plan
// together share one Free (see Engine.quotas). Placing a request takes from it, so a
// packer changes the quotas it is given.
type Quota struct {
	Slots []int
	Free  []int
	// OnePerCard: the plan is the default of one job per card, which the sweeps that
	// take it share.
	OnePerCard bool
}

// full reports whether the quota lets no more jobs start on cards[i].
func (q *Quota) full(i int) bool { return q != nil && (q.Free[i] <= 0 || q.Slots[i] <= 0) }

// Hosts is the RAM of each machine the cards are on, by worker ("" for this machine).
// A machine without an entry, as every machine of a nil Hosts, leaves host memory out
// of the decision.
type Hosts map[string]HostState

// HostState is a machine's RAM as the packer sees it, read and reserved like a card's
// memory. A zero Total leaves host memory out of the decision.
type HostState struct {
	Total    int64
	Used     int64 // what the kernel says is in use (total - available)
	Reserved int64 // running attempts' host estimates
	Ours     int64 // what running attempts' processes hold, measured
	Headroom int64 // kept for the system, like a card's headroom
}

// Free is the RAM a new job may count on, as CardState.Free: foreign use is what is in
// use beyond gpuq's own processes.
func (h HostState) Free() int64 {
	if h.Total == 0 {
		return math.MaxInt64
	}
	foreign := max(h.Used-h.Ours, 0)
	return h.Total - max(h.Used, h.Reserved+foreign) - h.Headroom
}

// CardState is one card as the packer sees it.
type CardState struct {
	// Worker is the machine the card is on ("" for this one); a card is known by its
	// worker and index, and a job's cards are all on one machine.
	Worker    string
	Index     int
	Total     int64
	Used      int64 // what NVML says is in use
	Reserved  int64 // running attempts' estimates
	Foreign   int64 // memory of processes that are not gpuq's
	Headroom  int64
	Slots     int  // the plan's limit
	Running   int  // attempts on the card
	Exclusive bool // a running attempt holds the card alone
	// Ends are the attempts on the card as they are expected to end, soonest first.
	Ends []Release
	// Left is how long the card's machine has left (a worker whose allocation ends);
	// 0: no end.
	Left time.Duration
}

// Release is a running attempt on a card as the packer sees it: when it is expected to
// end, and what it frees then.
type Release struct {
	In        time.Duration // from now; Unknown when nothing says
	Memory    int64
	Exclusive bool
}

// Unknown is an end nothing foretells: no duration learned and no timeout, or a run
// already longer than expected.
const Unknown = time.Duration(math.MaxInt64)

// DueAfter is how long the job at the head of the queue waits before the reservation of
// its cards is due, when nothing says when they free up (what runs there has no learned
// duration and no timeout). Until then any job may start on them, as if there were no
// reservation; after, only jobs that leave the head its room. Where ends are known no
// grace is needed: a job starts there only if it ends in time.
const DueAfter = 10 * time.Minute

// Free is the memory a new job may count on: what neither NVML nor gpuq's own
// reservations claim, less headroom. Taking the larger of the two guards against both
// races: a trainer that has not allocated yet, and memory NVML still shows after exit.
func (c CardState) Free() int64 {
	return c.Total - max(c.Used, c.Reserved+c.Foreign) - c.Headroom
}

// room is what the card offers jobs: its capacity less headroom.
func (c CardState) room() int64 { return c.Total - c.Headroom }

// idleRoom is what the card would offer with none of gpuq's jobs on it.
func (c CardState) idleRoom() int64 { return c.room() - c.Foreign }

// open reports whether the card has a slot for another job.
func (c CardState) open() bool { return c.Running < c.Slots && !c.Exclusive }

// Placement starts a job on cards.
type Placement struct {
	Job    string
	Worker string // the machine of its cards
	Cards  []int  // card indices on it
}

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
	// NeedsIdle: the job runs alone (an exclusive rung) and no card is idle.
	NeedsIdle Reason = "needs-idle"
	// NoHostMemory: the machine's RAM, less its reserve, has no room for the job's
	// host_memory now.
	NoHostMemory Reason = "no-host-memory"
	// TooLarge: even with none of gpuq's jobs running, no card (or not enough cards)
	// would have room, because of other processes or the plan.
	TooLarge Reason = "too-large"
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

// Decision is the packer's answer for one round.
type Decision struct {
	Placements []Placement
	Waiting    Waits // only from Pack
	// Reservation is what is kept for the first job in the queue that waits; nil when
	// no job waits for cards.
	Reservation *Reservation
}

// Reservation is cards kept for the job at the head of the queue that waits, as
// Slurm's backfill scheduler keeps nodes (EASY backfilling): at In they are expected to
// have room for it, by the learned durations of what runs there. A later job may start
// on them only if it is expected to end by then, or leaves the head its room then.
type Reservation struct {
	Job    string
	Worker string        // the machine of its cards
	Cards  []int         // card indices on it
	In     time.Duration // from now; Unknown when what runs there has no known end
	// Due: a later job starts on the cards only if it ends before In or leaves the head
	// its room: In is known, or the head has waited DueAfter.
	Due bool
}

// Queue is the waiting jobs as Place reads them, in order.
type Queue interface {
	// Next returns the next job that asks at most room bytes per card, or false when
	// none is left. Jobs that ask more may be passed over with the others of their
	// group (as Pass passes): room only shrinks as a round places jobs.
	Next(room int64) (Request, bool)
	// Pass passes over the jobs alike to the one Next returned last (same memory,
	// cards, host memory, exclusivity, quota and duration) that come after it: it
	// waits, and they would too, since placements only take room away.
	Pass()
}

// Pack decides which queued jobs start now and on which cards, and says why each of
// the others waits. It is pure and deterministic: the same queue and cards give the
// same decision.
//
// Jobs are taken in queue order (see the store's queue: priority, then largest first or
// submission order). Each goes to the cards where it fits that it fills most tightly
// (best fit over memory and slots, see leftover), so large holes stay open for large
// jobs; ties go to the lower index. A job that does not fit does not stop smaller jobs
// behind it from starting elsewhere (backfill), but the first that waits and would fit
// on an idle machine gets a reservation (see reserve): the cards that are expected to
// have room for it soonest. A later job starts on those only if it is expected to end
// before they are due, or leaves the head its room when they are, so the head starts
// when the jobs that ran there end, however many smaller jobs arrive behind it. Jobs of
// higher priority may still overtake it, by design.
func Pack(queue []Request, cards []CardState, hosts Hosts) Decision {
	p := newPacker(slices.Clone(cards), maps.Clone(hosts), true)
	d := Decision{Waiting: Waits{queue: queue, why: whyOf{narrow: make([]uint8, len(queue))}}}
	for i := range queue {
		r := &queue[i]
		// Most of a long queue waits as a job before it did: the quick answer, without
		// a call that returns a placement too.
		why, ok := p.waits(r)
		if !ok {
			var pl Placement
			if pl, why, ok = p.decide(r); ok {
				d.Placements = append(d.Placements, pl)
				continue
			}
		}
		d.Waiting.why.set(i, why)
		d.Waiting.n++
	}
	d.Waiting.whys = p.whys
	d.Reservation = p.reservation()
	return d
}

// Place makes Pack's placements and reservation, the same ones, for a scheduler's
// round. It says nothing of the jobs that wait and builds no reasons; it passes over
// the rest of a group of jobs alike once one waits (Queue.Pass), and stops reading the
// queue as soon as no later job could start, because no card has a free slot and room
// for the smallest estimate queued (smallest), and the reservation is made. So a round
// costs what it places and the groups it reads, not the length of the queue.
func Place(q Queue, cards []CardState, hosts Hosts, smallest int64) Decision {
	return place(q, slices.Clone(cards), maps.Clone(hosts), smallest)
}

// place is Place on cards and hosts it may change: a round's own, which it reads no
// more.
func place(q Queue, cards []CardState, hosts Hosts, smallest int64) Decision {
	p := newPacker(cards, hosts, false)
	var d Decision
	// Past the point where nothing more can start, it reads on until a job is given the
	// reservation, which tells the engine who heads the queue.
	for full := p.full(smallest); !full || p.res == nil; {
		// Once the reservation is made, a job larger than any free room is only read
		// to be passed over.
		room := int64(math.MaxInt64)
		if p.res != nil {
			room = p.roomiest
		}
		r, more := q.Next(room)
		if !more {
			break
		}
		reserved := p.res != nil
		pl, ok := p.offer(&r)
		if ok {
			d.Placements = append(d.Placements, pl)
		} else {
			q.Pass()
		}
		if ok || !reserved && p.res != nil {
			full = p.full(smallest)
		}
	}
	d.Reservation = p.reservation()
	return d
}

// newPacker packs on cards and hosts, which it changes as it places jobs.
func newPacker(cards []CardState, hosts Hosts, explain bool) *packer {
	p := &packer{cards: cards, failed: map[int64]int32{}, hosts: hosts, explain: explain,
		whys: []Wait{placed: {}, noSlot: {Reason: NoSlot, Detail: "every card's slots are taken"}}}
	for i := range p.cards {
		p.machines = p.machines || p.cards[i].Worker != p.cards[0].Worker
	}
	p.measure()
	return p
}

// measure finds the most memory free on a card with a free slot.
func (p *packer) measure() {
	p.roomiest = math.MinInt64
	for i := range p.cards {
		if c := &p.cards[i]; c.open() {
			p.roomiest = max(p.roomiest, c.Free())
		}
	}
}

// offer places r, or reports that it waits. The first job that waits (but for host
// memory, a size no card could take, or its own sweep's slots) gets the reservation,
// even in a round in which every slot is taken: it has headed the queue since.
func (p *packer) offer(r *Request) (Placement, bool) {
	if _, ok := p.waits(r); ok {
		return Placement{}, false
	}
	pl, _, ok := p.decide(r)
	return pl, ok
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
	seen := &p.seen[uint64(r.Memory)*0x9e3779b97f4a7c15>>(64-seenBits)]
	if !seen.fit.of(r) {
		f := fitOf(r)
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

// decide places r, or says why it waits, from the cards: in Pack, a position in whys.
func (p *packer) decide(rp *Request) (Placement, int32, bool) {
	r := *rp
	// Host memory is checked before the cards, and a job that waits for it reserves
	// no cards: RAM frees as jobs end anywhere on a machine, not on particular cards.
	if free := p.mostHostFree(r); r.Host > free {
		if !p.explain {
			return Placement{}, 0, false
		}
		return Placement{}, p.explained(Wait{Reason: NoHostMemory, Detail: fmt.Sprintf("needs %s of host RAM; %s is free after the reserve",
			plans.FormatSize(r.Host), plans.FormatSize(max(free, 0)))}), false
	}
	if r.Memory <= p.roomiest {
		if picked := p.pick(&r); picked != nil {
			return p.place(r, picked), 0, true
		}
	}
	// Place needs no reason once the reservation is made.
	w, reserves := Wait{Job: r.Job}, false
	if p.explain || p.res == nil {
		w, reserves = p.why(r)
	}
	if p.res == nil && reserves {
		p.reserve(r)
		// A reservation changes why later jobs wait.
		clear(p.failed)
		p.fails = p.fails[:0]
		clear(p.seen[:])
	}
	if !p.explain {
		// Place reads no job alike to one that waits (Queue.Pass).
		return Placement{}, 0, false
	}
	why := p.explained(w)
	p.fail(fitOf(rp), why)
	return Placement{}, why, false
}

// full reports whether no job of at least smallest bytes per card could start on any
// card.
func (p *packer) full(smallest int64) bool { return p.roomiest < smallest }

// fit is what decides whether a request fits: requests alike in it that come later in a
// round fit no better, because placements only take room away. (A job's shape is
// another thing: the parameters that what is learned of memory is shared by.)
type fit struct {
	memory, host int64
	duration     time.Duration
	quota        *Quota
	gpus         int32
	exclusive    int32 // 1: exclusive
}

// of reports whether r is of fit f, as *f == fitOf(r) but without building r's fit, and
// stopping at memory, where fits that differ mostly differ: Pack asks it for every job of
// a long queue.
func (f *fit) of(r *Request) bool {
	return f.memory == r.Memory && f.host == r.Host && f.duration == r.Duration && f.quota == r.Quota &&
		f.gpus == int32(max(r.GPUsPerJob, 1)) && (f.exclusive == 1) == r.Exclusive
}

func fitOf(r *Request) fit {
	f := fit{r.Memory, r.Host, r.Duration, r.Quota, int32(max(r.GPUsPerJob, 1)), 0}
	if r.Exclusive {
		f.exclusive = 1
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

type packer struct {
	cards    []CardState
	res      *reservation
	scratch  []int
	roomiest int64 // the most free on a card with a free slot; MinInt64: no slot
	// whys are the explanations of this round's waits (Pack's), shared by the jobs
	// that wait alike.
	whys []Wait
	// failed finds the fits that waited this round in fails, by memory: a map keyed by
	// an integer is much cheaper to look up than one keyed by the whole fit.
	failed map[int64]int32
	fails  []failure
	// seen are fits found in failed lately, by a hash of their memory (Fibonacci
	// hashing): a queue offers jobs of a few fits, over and over, and a struct
	// compares faster than a map is read. The zero fit, which no request has, is none.
	seen  [1 << seenBits]failure
	hosts Hosts
	// machines: the cards are on more than one machine.
	machines bool
	explain  bool // build the details of reasons (Pack), or not (Place)
}

// hostFree is the RAM free on a machine; unbounded where its RAM is not known.
func (p *packer) hostFree(worker string) int64 {
	if h, ok := p.hosts[worker]; ok {
		return h.Free()
	}
	return math.MaxInt64
}

// mostHostFree is the most RAM free on a machine whose cards r could ever use.
func (p *packer) mostHostFree(r Request) int64 {
	if r.Host <= 0 {
		return math.MaxInt64
	}
	most := int64(math.MinInt64)
	for i := range p.cards {
		most = max(most, p.hostFree(p.cards[i].Worker))
	}
	return most
}

// reservation is a Reservation as the packer keeps it while it places later jobs.
type reservation struct {
	Reservation
	on []bool // by card position
	// room and slots are, by card position, what a reserved card will have beyond the
	// head's need at In, less what the jobs started on it since that may run past In
	// take.
	room  []int64
	slots []int
	head  Request
}

func (p *packer) fits(i int, r *Request) bool {
	c := &p.cards[i]
	// What most cards fail on first: pick asks every card for each job it places.
	if !c.open() || c.Free() < r.Memory {
		return false
	}
	if r.Quota.full(i) {
		return false
	}
	if r.Exclusive && c.Running > 0 {
		return false
	}
	return p.inTime(i, r) && (r.Host <= 0 || p.hostFree(c.Worker) >= r.Host)
}

// mayUse reports whether r may start on card i as far as the reservation goes: the card
// is not reserved, or r ends before the reservation is due, or it is not due yet, or r
// leaves the head its room.
func (p *packer) mayUse(i int, r *Request) bool {
	res := p.res
	if res == nil || !res.on[i] || p.endsBefore(r) || !res.Due {
		return true
	}
	return !r.Exclusive && !res.head.Exclusive && res.room[i] >= r.Memory && res.slots[i] > 0
}

// endsBefore reports whether r is expected to end before the reservation is due.
func (p *packer) endsBefore(r *Request) bool {
	return p.res.In != Unknown && r.Duration > 0 && r.Duration <= p.res.In
}

// pick returns the positions of the cards r should start on, or nil.
func (p *packer) pick(r *Request) []int {
	cands := p.scratch[:0]
	for i := range p.cards {
		if p.fits(i, r) && p.mayUse(i, r) {
			cands = append(cands, i)
		}
	}
	need := max(r.GPUsPerJob, 1)
	if len(cands) < need {
		return nil
	}
	p.scratch = cands
	if need == 1 { // the common case: the single best card, no sort
		best, bestScore := cands[0], p.leftover(cands[0], r)
		for _, i := range cands[1:] {
			if s := p.leftover(i, r); s < bestScore {
				best, bestScore = i, s
			}
		}
		return []int{best}
	}
	slices.SortStableFunc(cands, func(a, b int) int {
		return cmp.Compare(p.leftover(a, r), p.leftover(b, r))
	})
	picked := slices.Clone(p.onOneMachine(cands, need))
	slices.Sort(picked)
	return picked
}

func (p *packer) place(r Request, picked []int) Placement {
	pl := Placement{Job: r.Job, Worker: p.cards[picked[0]].Worker}
	if h, ok := p.hosts[pl.Worker]; ok {
		h.Reserved += r.Host
		h.Used += r.Host
		h.Ours += r.Host
		p.hosts[pl.Worker] = h
	}
	end := Release{In: Unknown, Memory: r.Memory, Exclusive: r.Exclusive}
	if r.Duration > 0 {
		end.In = r.Duration
	}
	// Placing takes room and slots away from the picked cards only: the most free on
	// a card with a slot changes only if one of them had it.
	roomiest := false
	for _, i := range picked {
		roomiest = roomiest || p.cards[i].open() && p.cards[i].Free() == p.roomiest
		if r.Quota != nil {
			r.Quota.Free[i]--
		}
		c := &p.cards[i]
		c.Running++
		// The new job's memory is in neither figure yet; it will be in both. Raising
		// only Reserved would leave Free unchanged whenever NVML's reading is the larger.
		c.Reserved += r.Memory
		c.Used += r.Memory
		c.Exclusive = c.Exclusive || r.Exclusive
		// The caller's slice is not ours to append to.
		at, _ := slices.BinarySearchFunc(c.Ends, end.In, func(e Release, in time.Duration) int { return cmp.Compare(e.In, in) })
		c.Ends = slices.Insert(slices.Clip(c.Ends), at, end)
		if res := p.res; res != nil && res.on[i] && !p.endsBefore(&r) {
			res.room[i] -= r.Memory
			res.slots[i]--
		}
		pl.Cards = append(pl.Cards, c.Index)
	}
	if roomiest {
		p.measure()
	}
	return pl
}

// leftover scores how much of card i would be left after placing r, in [0, 2]: the
// free memory and the free slots that would remain, each as a share of the card's
// capacity, squared and summed. Smaller is a tighter fit. This is best fit over both
// resources a card has (the norm-based greedy for vector bin packing: Panigrahy,
// Talwar, Uyeda and Wieder, "Heuristics for Vector Bin Packing", 2011). Memory alone
// would put a 14 GiB job on a two-slot 24 GiB card as readily as on a one-slot one,
// stranding the second slot beside 8 GiB that no 10 GiB job can use. With no slot limit
// it is plain best fit on memory: the card left with the least free memory.
func (p *packer) leftover(i int, r *Request) float64 {
	c := &p.cards[i]
	room := float64(max(c.room(), 1))
	mem := float64(c.Free()-r.Memory) / room
	score := mem * mem
	if limit, taken := p.slots(i, r); limit != plans.NoSlotLimit && limit > 0 {
		slots := float64(limit-taken-1) / float64(limit)
		score += slots * slots
	}
	return score
}

// slots is the slot limit that binds r on card i, and how many of its slots are taken:
// the machine's plan, or r's sweep's own where that leaves fewer free. So a sweep
// limited to its own plan on a machine with no slot limit (the daemon's default) is
// packed as it is alone on a machine with that plan (gpuq run).
func (p *packer) slots(i int, r *Request) (limit, taken int) {
	c := &p.cards[i]
	if q := r.Quota; q != nil && q.Free[i] < c.Slots-c.Running {
		return q.Slots[i], q.Slots[i] - q.Free[i]
	}
	return c.Slots, c.Running
}

// reserve reserves cards for r, the first job in the queue that waits: the cards
// expected to have room for it soonest (see freeAt), then those with the least room
// that would still fit it when idle, then the lowest index. It is due when they are:
// the latest of their times.
func (p *packer) reserve(r Request) {
	type cand struct {
		i    int
		at   time.Duration
		ends int // how many of the card's attempts must end first
		room int64
	}
	cands := make([]cand, 0, len(p.cards))
	for i := range p.cards {
		if at, ends, ok := p.freeAt(i, r); ok {
			cands = append(cands, cand{i, at, ends, p.cards[i].idleRoom()})
		}
	}
	slices.SortFunc(cands, func(a, b cand) int {
		return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.room, b.room), cmp.Compare(a.i, b.i))
	})
	pos := make([]int, len(cands))
	for k, c := range cands {
		pos[k] = c.i
	}
	one := p.onOneMachine(pos, max(r.GPUsPerJob, 1))
	cands = slices.DeleteFunc(cands, func(c cand) bool { return !slices.Contains(one, c.i) })
	res := &reservation{Reservation: Reservation{Job: r.Job}, on: make([]bool, len(p.cards)),
		room: make([]int64, len(p.cards)), slots: make([]int, len(p.cards)), head: r}
	for _, c := range cands {
		res.In = max(res.In, c.at)
	}
	res.Due = res.In != Unknown || r.Waited >= DueAfter
	for _, c := range cands {
		res.on[c.i] = true
		res.Worker = p.cards[c.i].Worker
		res.Cards = append(res.Cards, p.cards[c.i].Index)
		if c.at == Unknown {
			// Which of the attempts on it end first, and so what is left beside r
			// when they have, cannot be told: nothing may count on room there.
			continue
		}
		// What the card has at In: the attempts that free it for r have ended, and so
		// have those expected to end by In, if In is known.
		ends := c.ends
		if res.In != Unknown {
			for ends < len(p.cards[c.i].Ends) && p.cards[c.i].Ends[ends].In <= res.In {
				ends++
			}
		}
		free, running := p.after(c.i, ends)
		res.room[c.i], res.slots[c.i] = free-r.Memory, p.cards[c.i].Slots-running-1
	}
	slices.Sort(res.Cards)
	p.res = res
}

// freeAt is when card i is expected to have room for r, from now (Unknown when an
// attempt that must end first has no known end), and how many of the attempts on it
// must end by then. ok is false for a card that could never take r.
func (p *packer) freeAt(i int, r Request) (at time.Duration, ends int, ok bool) {
	if !p.couldTake(i, r) {
		return 0, 0, false
	}
	c := &p.cards[i]
	fitsAfter := func(n int) bool {
		free, running := p.after(i, n)
		excl := c.Exclusive && !slices.ContainsFunc(c.Ends[:n], func(e Release) bool { return e.Exclusive })
		return free >= r.Memory && running < c.Slots && !excl && (!r.Exclusive || running == 0)
	}
	for n := 0; n <= len(c.Ends); n++ {
		if fitsAfter(n) {
			if n == 0 {
				return 0, 0, true
			}
			return c.Ends[n-1].In, n, true
		}
	}
	// What holds the card is not gpuq's attempts (NVML's reading), and nothing says
	// when it goes.
	return Unknown, len(c.Ends), true
}

// after is the free memory and the attempts on card i once its first n attempts to end
// have.
func (p *packer) after(i, n int) (free int64, running int) {
	c := &p.cards[i]
	free = c.Free()
	for _, e := range c.Ends[:n] {
		free += e.Memory
	}
	return min(free, c.idleRoom()), c.Running - n
}

// reservation is the Reservation made this round, for the decision.
func (p *packer) reservation() *Reservation {
	if p.res == nil {
		return nil
	}
	r := p.res.Reservation
	return &r
}

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
		if f := c.Free(); f > bestFree {
			bestFree, bestCard = f, plans.CardID{Worker: c.Worker, Index: c.Index}.String()
		}
	}
	reserves = true
	switch {
	case idleFits < need:
		w.Reason, reserves = TooLarge, false
	case reservedFits > 0:
		w.Reason = Reserved
	case r.Exclusive:
		w.Reason = NeedsIdle
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
		w.Detail = fmt.Sprintf("needs %s with %s free, but only %d could ever offer that, given other processes, headroom and the plan", cards, plans.FormatSize(r.Memory), idleFits)
	case Reserved:
		w.Detail = p.reservedWhy(r)
	case NeedsIdle:
		w.Detail = fmt.Sprintf("runs alone after an OOM and needs %s with no other job", cards)
	case NoMemory:
		w.Detail = fmt.Sprintf("needs %s per card; the most free on a card with a free slot is %s (GPU %s)", plans.FormatSize(r.Memory), plans.FormatSize(max(bestFree, 0)), bestCard)
	default:
		switch {
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

// reservedWhy says why r may not start on the cards reserved for the head of the
// queue.
func (p *packer) reservedWhy(r Request) string {
	res := p.res
	cards := plans.CardsOn(res.Worker, res.Cards)
	if res.In == Unknown {
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

// quotaAllows reports whether r's sweep may ever use cards[i]. A card on which the
// sweep's plan allows jobs but jobs run now still counts: they end.
func quotaAllows(r Request, i int) bool {
	return r.Quota == nil || r.Quota.Slots[i] > 0
}

// onOneMachine returns the first need of cands (positions in p.cards, best first) that
// are on one machine: the machine whose need-th best card comes first; nil when no
// machine has need of them. A job's cards must share a machine: its processes talk
// over NVLink or PCIe, not the network, and a worker starts it as one trainer.
func (p *packer) onOneMachine(cands []int, need int) []int {
	if len(cands) < need {
		return nil
	}
	worker := p.cards[cands[0]].Worker
	if !slices.ContainsFunc(cands[:need], func(i int) bool { return p.cards[i].Worker != worker }) {
		return cands[:need] // one machine, as nearly always
	}
	seen := map[string][]int{}
	for _, i := range cands {
		w := p.cards[i].Worker
		if seen[w] = append(seen[w], i); len(seen[w]) == need {
			return seen[w]
		}
	}
	return nil
}

// machineCount counts cards by machine; on one machine, as nearly always, without a map.
type machineCount struct {
	one int
	by  map[string]int
}

func (p *packer) perMachine() machineCount {
	if !p.machines {
		return machineCount{}
	}
	return machineCount{by: map[string]int{}}
}

// add counts a card of worker's and returns that machine's count.
func (m *machineCount) add(worker string) int {
	if m.by == nil {
		m.one++
		return m.one
	}
	m.by[worker]++
	return m.by[worker]
}

// couldTake reports whether card i could take r were none of gpuq's jobs on it.
func (p *packer) couldTake(i int, r Request) bool { return p.couldHold(i, r) && p.inTime(i, &r) }

// couldHold reports whether card i could take r were none of gpuq's jobs on it and
// its machine's time no limit.
func (p *packer) couldHold(i int, r Request) bool {
	c := &p.cards[i]
	return c.idleRoom() >= r.Memory && c.Slots > 0 && quotaAllows(r, i)
}

// inTime reports whether r is expected to end before card i's machine does.
func (p *packer) inTime(i int, r *Request) bool {
	c := &p.cards[i]
	return c.Left == 0 || r.Duration <= c.Left
}

// tooLong reports whether r waits for a machine with more time left: need cards of
// one machine could take it, but none that has the time.
func (p *packer) tooLong(r Request, need int) bool {
	m := p.perMachine()
	for i := range p.cards {
		if p.couldHold(i, r) && m.add(p.cards[i].Worker) >= need {
			return true
		}
	}
	return false
}
