package pack

// Placement: where a job fits, and of the cards where it does, those it fills most
// tightly.

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/gpuq/gpuq/plans"
)

// full reports whether the quota lets no more jobs start on cards[i].
func (q *Quota) full(i int) bool { return q != nil && (q.Free[i] <= 0 || q.Slots[i] <= 0 || q.spent()) }

// spent reports whether the sweep runs as many jobs as its max_running allows.
func (q *Quota) spent() bool { return q != nil && q.Left != nil && *q.Left <= 0 }

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

func (p *packer) fits(i int, r *Request) bool {
	c := &p.cards[i]
	// What most cards fail on first: pick asks every card for each job it places.
	if !c.open() || c.Free() < r.Memory {
		return false
	}
	if r.Quota.full(i) {
		return false
	}
	if r.Exclusive && c.Running > 0 || !c.shares(r) {
		return false
	}
	return p.inTime(i, r) && (r.Host <= 0 || p.hostFree(c.Worker) >= r.Host)
}

// pick returns the positions of the cards r should start on, or nil.
func (p *packer) pick(r *Request) []int {
	if r.GPUsPerJob <= 1 && !p.noAlike {
		if i := p.pickOne(r); i >= 0 {
			return []int{i}
		}
		return nil
	}
	cands := p.scratch[:0]
	for i, free := range p.free {
		// free < r.Memory is what fits finds first on most cards.
		if free >= r.Memory && p.fits(i, r) && p.mayUse(i, r) {
			cands = append(cands, i)
		}
	}
	need := max(r.GPUsPerJob, 1)
	if len(cands) < need {
		return nil
	}
	p.scratch = cands
	if need == 1 { // the common case: the single best card, no sort
		best := cands[0]
		for _, i := range cands[1:] {
			if p.better(i, best, r) {
				best = i
			}
		}
		return []int{best}
	}
	slices.SortStableFunc(cands, func(a, b int) int {
		switch {
		case p.better(a, b, r):
			return -1
		case p.better(b, a, r):
			return 1
		}
		return 0
	})
	picked := slices.Clone(p.onOneMachine(cands, need))
	slices.Sort(picked)
	return picked
}

func (p *packer) place(r Request, picked []int) Placement {
	p.gen++
	pl := Placement{Job: r.Job, Worker: p.cards[picked[0]].Worker}
	if h, ok := p.hosts[pl.Worker]; ok {
		h.Reserved += r.Host
		h.Used += r.Host
		h.Ours += r.Host
		p.hosts[pl.Worker] = h
	}
	end := Release{In: UnknownEnd, Memory: r.Memory, Exclusive: r.Exclusive, Util: r.util(), Blind: r.UtilUnknown}
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
		c.Util += r.util()
		if r.UtilUnknown {
			c.Blind++
			c.BlindUtil += r.util()
		}
		if r.UtilPlanned {
			c.Planned += r.guess()
			c.PlannedJobs++
			p.planned = true
		}
		c.AddSweep(r.Sweep)
		p.freeOn(i)
		// The caller's slice is not ours to append to.
		at, _ := slices.BinarySearchFunc(c.Ends, end.In, func(e Release, in time.Duration) int { return cmp.Compare(e.In, in) })
		c.Ends = slices.Insert(slices.Clip(c.Ends), at, end)
		if res := p.res; res != nil && !p.endsBefore(&r) {
			if on := res.of(i); on != nil {
				on.room -= r.Memory
				on.slots--
				on.util -= p.asksBeside(i, &r)
			}
		}
		pl.Cards = append(pl.Cards, c.Index)
	}
	if r.Quota != nil && r.Quota.Left != nil {
		*r.Quota.Left--
		r.Quota.Placed++
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
func (p *packer) couldTake(i int, r Request) bool { return p.couldHold(i, r, 0) && p.inTime(i, &r) }

// couldHold reports whether card i could take r were none of gpuq's jobs on it, and
// more of it free (passing: what other gpuqs' trainers hold there, to tell whether it
// could once they end), and its machine's time no limit. An idle card offers what it
// has free now: a real one counts some memory used with no process on it (0.6 GiB of
// an idle H200), which its room does not, and a job asking for more than that would
// hold a reservation there for ever.
func (p *packer) couldHold(i int, r Request, passing int64) bool {
	c := &p.cards[i]
	return c.offersIdle()+passing >= r.Memory && c.Slots > 0 && quotaAllows(r, i)
}

// offersIdle is what the card would offer a job were none of gpuq's jobs on it (see
// couldHold).
func (c *CardState) offersIdle() int64 {
	room := c.idleRoom()
	if c.Running == 0 && c.Reserved == 0 {
		room = min(room, c.Free())
	}
	return room
}

// drainedFor names the drained cards (CardState.Drained) among need cards of one
// machine that could take r once they are undrained: r waits for them, not as too
// large; none where there are no such cards.
func (p *packer) drainedFor(r Request, need int) []string {
	drained := func(i int) bool {
		c := &p.cards[i]
		return c.Drained && c.offersIdle() >= r.Memory && quotaAllows(r, i) && p.inTime(i, &r)
	}
	var names []string
	for _, i := range p.oneMachine(need, func(i int) bool { return drained(i) || p.couldTake(i, r) }, drained) {
		if drained(i) {
			names = append(names, p.cards[i].ID().String())
		}
	}
	return names
}

// oneMachine is need cards of one machine, by position, each of which could (a job),
// one of them at least marked; nil where no machine has them.
func (p *packer) oneMachine(need int, could, marked func(i int) bool) []int {
	of := map[string][]int{}
	for i := range p.cards {
		if !could(i) {
			continue
		}
		w := p.cards[i].Worker
		of[w] = append(of[w], i)
		// The card just found made them enough, or is the one marked: it is among
		// the last need of them, with one marked.
		if cs := of[w]; len(cs) >= need && slices.ContainsFunc(cs[len(cs)-need:], marked) {
			return cs[len(cs)-need:]
		}
	}
	return nil
}

// inTime reports whether r is expected to end before card i's machine does.
func (p *packer) inTime(i int, r *Request) bool {
	c := &p.cards[i]
	return c.Left == 0 || r.Duration <= c.Left
}
