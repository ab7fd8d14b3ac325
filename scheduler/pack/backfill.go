package pack

// Backfill: the cards kept for the job at the head of the queue that waits, and which
// later jobs may still start on them.

import (
	"cmp"
	"math"
	"slices"
	"time"
)

// DueAfter is how long the job at the head of the queue waits before the reservation of
// its cards is due, when nothing says when they free up (what runs there has no learned
// duration and no timeout). Until then any job may start on them, as if there were no
// reservation; after, only jobs that leave the head its room. Where ends are known no
// grace is needed: a job starts there only if it ends in time.
const DueAfter = 10 * time.Minute

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

// reservation is a Reservation as the packer keeps it while it places later jobs.
type reservation struct {
	Reservation
	// on are the reserved cards, the few of one machine the head needs: not an array
	// by position of every card, which was 200 KB a round for a fleet's 8,000.
	on   []reserved
	head Request
}

// reserved is a reserved card and what it has beside the head.
type reserved struct {
	i int // the card's position
	// room and slots are what the card will have beyond the head's need at In, less
	// what the jobs started on it since that may run past In take.
	room  int64
	slots int
	// util is what of the card's sharing target is left beside the head at In.
	util float64
}

// of is card i as reserved; nil where it is not.
func (res *reservation) of(i int) *reserved {
	for k := range res.on {
		if res.on[k].i == i {
			return &res.on[k]
		}
	}
	return nil
}

// mayUse reports whether r may start on card i as far as the reservation goes: the card
// is not reserved, or r ends before the reservation is due, or it is not due yet, or r
// leaves the head its room.
func (p *packer) mayUse(i int, r *Request) bool {
	res := p.res
	if res == nil {
		return true
	}
	c := res.of(i)
	if c == nil || p.endsBefore(r) || !res.Due {
		return true
	}
	return !r.Exclusive && !res.head.Exclusive && c.room >= r.Memory && c.slots > 0 && c.util >= p.asksBeside(i, r)-slack
}

// asksBeside is what r asks of reserved card i's compute beside the head and the
// card's jobs: its guess where it is a planned sweep's job not measured yet and the head
// or a job there is of another sweep (see apart); and where the head is such a job, of
// a sweep other than r's, what the head asks more beside r than the reservation counted
// it at beside its own sweep's jobs (see reserve): r there would keep the head, a guess
// beside another sweep's job, waiting as long as r runs.
func (p *packer) asksBeside(i int, r *Request) float64 {
	head := &p.res.head
	if r.Sweep == head.Sweep {
		return p.cards[i].asks(r)
	}
	more := 0.0
	if head.UtilPlanned && !p.cards[i].apart(head) {
		more = head.guess() - head.util()
	}
	if r.UtilPlanned {
		return r.guess() + more
	}
	return p.cards[i].asks(r) + more
}

// endsBefore reports whether r is expected to end before the reservation is due.
func (p *packer) endsBefore(r *Request) bool {
	return p.res.In != UnknownEnd && r.Duration > 0 && r.Duration <= p.res.In
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
	order := func(a, b cand) int {
		return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.room, b.room), cmp.Compare(a.i, b.i))
	}
	// The first need in that order, found without sorting a fleet's thousands: the
	// cards reserved where they are on one machine, as nearly always.
	need := max(r.GPUsPerJob, 1)
	leastFirst(cands, need, order)
	if len(cands) < need || slices.ContainsFunc(cands[:need], func(c cand) bool { return p.cards[c.i].Worker != p.cards[cands[0].i].Worker }) {
		slices.SortFunc(cands, order)
		pos := make([]int, len(cands))
		for k, c := range cands {
			pos[k] = c.i
		}
		one := p.onOneMachine(pos, need)
		cands = slices.DeleteFunc(cands, func(c cand) bool { return !slices.Contains(one, c.i) })
	} else {
		cands = cands[:need]
	}
	res := &reservation{Reservation: Reservation{Job: r.Job}, on: make([]reserved, len(cands)), head: r}
	for _, c := range cands {
		res.In = max(res.In, c.at)
	}
	res.Due = res.In != UnknownEnd || r.Waited >= DueAfter
	for k, c := range cands {
		on := &res.on[k]
		on.i = c.i
		res.Worker = p.cards[c.i].Worker
		res.Cards = append(res.Cards, p.cards[c.i].Index)
		if c.at == UnknownEnd {
			// Which of the attempts on it end first, and so what is left beside r
			// when they have, cannot be told: nothing may count on room there.
			continue
		}
		// What the card has at In: the attempts that free it for r have ended, and so
		// have those expected to end by In, if In is known.
		ends := c.ends
		if res.In != UnknownEnd {
			for ends < len(p.cards[c.i].Ends) && p.cards[c.i].Ends[ends].In <= res.In {
				ends++
			}
		}
		free, running := p.after(c.i, ends)
		on.room, on.slots = free-r.Memory, p.cards[c.i].Slots-running-1
		on.util = math.Inf(1)
		if card := &p.cards[c.i]; card.Target > 0 {
			on.util = card.Target - p.measuredAfter(c.i, ends) - card.asks(&r)
		}
	}
	slices.Sort(res.Cards)
	p.res = res
	p.gen++
}

// leastFirst moves the k least of s by order (fewer if s is shorter) to its front, in
// that order: for a k of a few, fewer comparisons than a sort of s.
func leastFirst[T any](s []T, k int, order func(a, b T) int) {
	for n := 0; n < k && n < len(s); n++ {
		least := n
		for j := n + 1; j < len(s); j++ {
			if order(s[j], s[least]) < 0 {
				least = j
			}
		}
		s[n], s[least] = s[least], s[n]
	}
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
		// Beside another sweep's jobs, a planned job not measured yet asks its guess
		// (see apart): whether they are among those that end first is not told, and
		// it is counted so until the card is idle.
		shares := c.Target == 0 || running == 0 || p.measuredAfter(i, n)+c.asks(&r) <= c.Target+slack
		return free >= r.Memory && running < c.Slots && !excl && (!r.Exclusive || running == 0) && shares
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
	return UnknownEnd, len(c.Ends), true
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

// measuredAfter is what the measured jobs on card i ask of its compute once its first n
// attempts to end have. A job not measured yet will be within minutes, long before it
// ends: when a card will have room for compute is told by what is measured there.
func (p *packer) measuredAfter(i, n int) float64 {
	c := &p.cards[i]
	u, blind := c.Util, c.BlindUtil
	for _, e := range c.Ends[:n] {
		u -= e.Util
		if e.Blind {
			blind -= e.Util
		}
	}
	return max(u-max(blind, 0), 0)
}

// reservation is the Reservation made this round, for the decision.
func (p *packer) reservation() *Reservation {
	if p.res == nil {
		return nil
	}
	r := p.res.Reservation
	return &r
}
