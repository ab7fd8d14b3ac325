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
	// Duration is how long the job is expected to run; 0 = unknown. A card whose
	// machine has less time left (CardState.Left) does not take it.
	Duration time.Duration
	// Quota, when not nil, limits the job to its sweep's cards and plan; the requests
	// of one sweep share it.
	Quota *Quota
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
	// Left is how long the card's machine has left (a worker whose allocation ends);
	// 0: no end.
	Left time.Duration
}

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
	// Reserved: cards with room are kept for a job ahead in the queue that needs more, so
	// that it is not starved by smaller ones.
	// (A person's hold on a job is another thing: that job is "held".)
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

// Decision is the packer's answer for one round.
type Decision struct {
	Placements []Placement
	Waiting    []Wait
	// Reserved is the job the cards are reserved for, if one is; "" otherwise.
	Reserved string
}

// Pack decides which queued jobs start now and on which cards. It is pure and
// deterministic: the same queue and cards give the same decision.
//
// Jobs are taken in queue order (priority, then submission). Each goes to the cards
// where it fits that it fills most tightly (best fit over memory and slots, see
// leftover), so large holes stay open for large jobs; ties go to the lower index. A job that does not fit does not stop
// smaller jobs behind it from starting elsewhere (backfill), with one guard against
// starvation: the first job in the queue that waits but would fit on an idle machine
// reserves cards (see reserve), and no later job starts on them. Those cards only drain,
// so the job starts once the jobs running there end, however many smaller jobs arrive
// behind it. Jobs of higher priority may still overtake it, by design.
func Pack(queue []Request, cards []CardState, hosts Hosts) Decision {
	p := newPacker(cards, hosts)
	d := Decision{Waiting: make([]Wait, 0, len(queue))}
	for _, r := range queue {
		if pl, w, ok := p.offer(r); ok {
			d.Placements = append(d.Placements, pl)
		} else {
			d.Waiting = append(d.Waiting, w)
		}
	}
	d.Reserved = p.reservedFor
	return d
}

// Place makes Pack's placements, the same ones, for a scheduler's round: it says
// nothing of the jobs that wait, and stops reading the queue as soon as no later job
// could start, because no card that may take a job has a free slot and room for the
// smallest estimate queued (smallest). So a round costs what it places, not the length
// of the queue, when slots or memory are what bind.
func Place(queue iter.Seq[Request], cards []CardState, hosts Hosts, smallest int64) []Placement {
	p := newPacker(cards, hosts)
	var out []Placement
	full := p.full(smallest)
	for r := range queue {
		if full {
			break
		}
		pl, _, ok := p.offer(r)
		if ok {
			out = append(out, pl)
		}
		if ok || p.reservedFor == r.Job {
			full = p.full(smallest)
		}
	}
	return out
}

func newPacker(cards []CardState, hosts Hosts) *packer {
	p := &packer{cards: slices.Clone(cards), reserved: make([]bool, len(cards)), failed: map[fit]Wait{}, hosts: maps.Clone(hosts)}
	for i := range p.cards {
		if p.cards[i].Running < p.cards[i].Slots && !p.cards[i].Exclusive {
			p.openSlots++
		}
		p.machines = p.machines || p.cards[i].Worker != p.cards[0].Worker
	}
	return p
}

// offer places r, or says why it waits.
func (p *packer) offer(r Request) (Placement, Wait, bool) {
	if p.openSlots == 0 {
		w := Wait{Job: r.Job, Reason: NoSlot, Detail: "every card's slots are taken"}
		if p.reservedOpen > 0 {
			w = Wait{Job: r.Job, Reason: Reserved, Detail: p.reservedWhy}
		}
		return Placement{}, w, false
	}
	if w, ok := p.failed[fitOf(r)]; ok {
		w.Job = r.Job
		return Placement{}, w, false
	}
	// Host memory is checked before the cards, and a job that waits for it reserves
	// no cards: RAM frees as jobs end anywhere on a machine, not on particular cards.
	if free := p.mostHostFree(r); r.Host > free {
		return Placement{}, Wait{Job: r.Job, Reason: NoHostMemory, Detail: fmt.Sprintf("needs %s of host RAM; %s is free after the reserve",
			plans.FormatSize(r.Host), plans.FormatSize(max(free, 0)))}, false
	}
	if picked := p.pick(r); picked != nil {
		return p.place(r, picked), Wait{}, true
	}
	w, reserves := p.why(r)
	if p.reservedFor == "" && reserves {
		p.reserve(r)
		clear(p.failed) // a reservation changes why later jobs wait
	}
	p.failed[fitOf(r)] = w
	return Placement{}, w, false
}

// full reports whether no job of at least smallest bytes per card could start on any
// card that is not reserved.
func (p *packer) full(smallest int64) bool {
	if p.openSlots == 0 {
		return true
	}
	for i := range p.cards {
		// By pointer: a round reads every card for every job it places.
		if c := &p.cards[i]; !p.reserved[i] && c.Running < c.Slots && !c.Exclusive && c.Free() >= smallest {
			return false
		}
	}
	return true
}

// fit is what decides whether a request fits: requests alike in it that come later in a
// round fit no better, because placements only take room away. (A job's shape is
// another thing: the parameters that what is learned of memory is shared by.)
type fit struct {
	memory    int64
	gpus      int
	exclusive bool
	quota     *Quota
	// host and duration decide which machines may take it.
	host     int64
	duration time.Duration
}

func fitOf(r Request) fit {
	return fit{r.Memory, max(r.GPUsPerJob, 1), r.Exclusive, r.Quota, r.Host, r.Duration}
}

type packer struct {
	cards        []CardState
	reserved     []bool
	reservedFor  string
	reservedWhy  string
	scratch      []int
	openSlots    int // cards not held with a free slot
	reservedOpen int // reserved cards with a free slot
	failed       map[fit]Wait
	hosts        Hosts
	// machines: the cards are on more than one machine.
	machines bool
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
	for _, c := range p.cards {
		most = max(most, p.hostFree(c.Worker))
	}
	return most
}

func (p *packer) fits(i int, r Request) bool {
	c := &p.cards[i]
	if r.Quota.full(i) {
		return false
	}
	if c.Running >= c.Slots || c.Exclusive {
		return false
	}
	if r.Exclusive && c.Running > 0 {
		return false
	}
	if c.Left > 0 && r.Duration > c.Left || r.Host > 0 && p.hostFree(c.Worker) < r.Host {
		return false
	}
	return c.Free() >= r.Memory
}

// pick returns the positions of the cards r should start on, or nil.
func (p *packer) pick(r Request) []int {
	cands := p.scratch[:0]
	for i := range p.cards {
		if !p.reserved[i] && p.fits(i, r) {
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

func (p *packer) place(r Request, picked []int) Placement {
	pl := Placement{Job: r.Job}
	pl.Worker = p.cards[picked[0]].Worker
	if h, ok := p.hosts[pl.Worker]; ok {
		h.Reserved += r.Host
		h.Used += r.Host
		h.Ours += r.Host
		p.hosts[pl.Worker] = h
	}
	for _, i := range picked {
		if r.Quota != nil {
			r.Quota.Free[i]--
		}
		c := &p.cards[i]
		wasOpen := c.Running < c.Slots && !c.Exclusive
		c.Running++
		// The new job's memory is in neither figure yet; it will be in both. Raising
		// only Reserved would leave Free unchanged whenever NVML's reading is the larger.
		c.Reserved += r.Memory
		c.Used += r.Memory
		c.Exclusive = c.Exclusive || r.Exclusive
		if wasOpen && (c.Running >= c.Slots || c.Exclusive) {
			p.openSlots--
		}
		pl.Cards = append(pl.Cards, c.Index)
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
func (p *packer) leftover(i int, r Request) float64 {
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
func (p *packer) slots(i int, r Request) (limit, taken int) {
	c := &p.cards[i]
	if q := r.Quota; q != nil && q.Free[i] < c.Slots-c.Running {
		return q.Slots[i], q.Slots[i] - q.Free[i]
	}
	return c.Slots, c.Running
}

// reserve holds cards for r. The choice rests only on what does not change from round
// to round (capacity, foreign use, headroom, the plan): the cards with the least room
// that would still fit r when idle, then the lowest index. So a reservation never moves
// while r heads the queue, its cards only drain, and r starts once the jobs that were
// running there have ended.
func (p *packer) reserve(r Request) {
	var cands []int
	for i := range p.cards {
		if p.couldTake(i, r) {
			cands = append(cands, i)
		}
	}
	slices.SortStableFunc(cands, func(a, b int) int {
		return cmp.Compare(p.cards[a].idleRoom(), p.cards[b].idleRoom())
	})
	for _, i := range p.onOneMachine(cands, max(r.GPUsPerJob, 1)) {
		p.reserved[i] = true
		if c := p.cards[i]; c.Running < c.Slots && !c.Exclusive {
			p.openSlots--
			p.reservedOpen++
		}
	}
	p.reservedFor = r.Job
	p.reservedWhy = fmt.Sprintf("the cards with room are reserved for %s, ahead in the queue, so that smaller jobs do not starve it", r.Job)
}

// why explains why r found no cards. It looks at every card, ignoring reservations
// first, so that the most useful reason wins: reserved, then needs an idle card, then
// memory, then slots. reserves says whether cards should be reserved for r: not when
// no card could ever take it, nor when what it waits for is its own sweep's slots,
// which no other job takes.
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
	for i, c := range p.cards {
		if p.couldTake(i, r) {
			idleFits = max(idleFits, idle.add(c.Worker))
		}
		if c.Running >= c.Slots || c.Exclusive {
			continue
		}
		if r.Quota.full(i) {
			quotaFull++
			continue
		}
		withSlot = max(withSlot, slotted.add(c.Worker))
		if p.reserved[i] && p.fits(i, r) {
			reservedFits++
		}
		if f := c.Free(); f > bestFree {
			bestFree, bestCard = f, CardID{c.Worker, c.Index}.String()
		}
	}
	cards := "a card"
	if need > 1 {
		cards = fmt.Sprintf("%d cards", need)
	}
	switch {
	case idleFits < need:
		w.Reason = TooLarge
		w.Detail = fmt.Sprintf("needs %s with %s free, but only %d could ever offer that, given other processes, headroom and the plan", cards, plans.FormatSize(r.Memory), idleFits)
		return w, false
	case reservedFits > 0:
		w.Reason, w.Detail = Reserved, p.reservedWhy
	case r.Exclusive:
		w.Reason = NeedsIdle
		w.Detail = fmt.Sprintf("runs alone after an OOM and needs %s with no other job", cards)
	case withSlot >= need:
		w.Reason = NoMemory
		w.Detail = fmt.Sprintf("needs %s per card; the most free on a card with a free slot is %s (GPU %s)", plans.FormatSize(r.Memory), plans.FormatSize(max(bestFree, 0)), bestCard)
	case quotaFull > 0 && withSlot == 0 && r.Quota.OnePerCard:
		w.Reason, w.Detail = NoSlot, "one job per card, the default for jobs without a memory estimate and sweeps without a gpu_plan: "+
			"every card it may use has one (memory: lets gpuq pack them by memory)"
		return w, false
	case quotaFull > 0 && withSlot == 0:
		w.Reason, w.Detail = NoSlot, "every slot of the sweep's gpu_plan is taken"
		return w, false
	case quotaFull > 0:
		w.Reason = NoSlot
		w.Detail = fmt.Sprintf("needs %s with a free slot; the sweep's gpus and gpu_plan leave it %d", cards, withSlot)
	default:
		w.Reason = NoSlot
		w.Detail = fmt.Sprintf("needs %s with a free slot; %d of the plan's cards have one", cards, withSlot)
	}
	return w, true
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
func (p *packer) couldTake(i int, r Request) bool {
	c := &p.cards[i]
	return c.idleRoom() >= r.Memory && c.Slots > 0 && quotaAllows(r, i) && (c.Left == 0 || r.Duration <= c.Left)
}

// quotaAllows reports whether r's sweep may ever use cards[i]. A card on which the
// sweep's plan allows jobs but jobs run now still counts: they end.
func quotaAllows(r Request, i int) bool {
	return r.Quota == nil || r.Quota.Slots[i] > 0
}
