package scheduler

import (
	"slices"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/gpu"
)

// Whose each process on the cards is. A round resolves it once, in the order the cards
// list their processes, so that measuring an attempt or telling foreign memory reads a
// card's own list: a round of 64 cards and hundreds of attempts would otherwise hash
// every process several times.

// ownership is whose each process on the cards was at a round's reading of them.
type ownership struct {
	// workers are the cards' machines; procs every card's processes, card after card,
	// with their owners: card i's are procs[from[i]:from[i+1]].
	workers []string
	from    []int
	procs   []owned
	// faults says which cards NVML could not read, and read is the reading of the
	// cards' list (Engine.cardsRead) they were resolved at: what the next round
	// compares its cards with (see resolveOwners).
	faults []bool
	read   uint64
	// strangers are the positions of the cards that list a process of no attempt
	// that this PID namespace sees (another user's, another gpuq's), in order: the
	// only cards where processes that are not gpuq's may keep a card busy (see
	// foreignOn), which a fleet's round, every process on its thousands of cards its
	// own, need not look through.
	strangers []int
	// byProc is whose each process is, made when first asked (see find).
	byProc  map[proc]string
	indexed bool
}

// owned is a process on a card, and its attempt: "" where nobody can tell; and what
// NVML read of its memory.
type owned struct {
	pid     int
	attempt string
	used    int64
	hidden  bool
}

// reset empties o, keeping its arrays.
func (o *ownership) reset() {
	o.workers, o.from, o.procs, o.faults, o.strangers, o.indexed = o.workers[:0], o.from[:0], o.procs[:0], o.faults[:0], o.strangers[:0], false
}

// card is the processes of the card at position i, with their owners.
func (o *ownership) card(i int) []owned { return o.procs[o.from[i]:o.from[i+1]] }

// find is whose process k was; "" where nobody could tell, or k was on no card.
func (o *ownership) find(k proc) string {
	if !o.indexed {
		if o.byProc == nil {
			o.byProc = map[proc]string{}
		}
		clear(o.byProc)
		for i, w := range o.workers {
			for _, p := range o.card(i) {
				if p.attempt != "" {
					o.byProc[proc{w, p.pid}] = p.attempt
				}
			}
		}
		o.indexed = true
	}
	return o.byProc[k]
}

// resolveOwners asks the runner, once per round and process, whose each process on the
// cards is, unless the machine that read the card has said (a worker). A pid no longer
// known keeps last round's owner, since NVML can show a dead process's memory for a
// moment after /proc has forgotten it; a pid on no card is forgotten, so that what is
// kept stays as small as the cards' process lists. It also notes which cards read
// otherwise than at the last resolution (see changedSince).
func (e *Engine) resolveOwners() {
	was, next := e.owners, e.ownersWere
	next.reset()
	e.resolved++
	n := len(e.cards)
	e.changedAt = slices.Grow(e.changedAt[:0], n)[:n]
	// The same list of cards (cardsRead counts the lists) is compared card by card;
	// another changes them all.
	same := was.read == e.cardsRead && len(was.faults) == n
	for i, c := range e.cards {
		next.workers = append(next.workers, c.Worker)
		next.from = append(next.from, len(next.procs))
		next.faults = append(next.faults, c.Fault != "")
		for _, p := range c.Processes {
			a := p.Attempt
			if a == "" && c.Worker == "" {
				if o, ok := e.runner.Owner(p.PID); ok {
					a = o
				}
			}
			if a == "" {
				a = was.find(proc{c.Worker, p.PID})
			}
			next.procs = append(next.procs, owned{p.PID, a, p.Used, p.Hidden})
			if a == "" && !p.Hidden && (len(next.strangers) == 0 || next.strangers[len(next.strangers)-1] != i) {
				next.strangers = append(next.strangers, i)
			}
		}
		if !same || was.faults[i] != next.faults[i] || !slices.Equal(was.card(i), next.procs[next.from[i]:]) {
			e.changedAt[i] = e.resolved
		}
	}
	next.from = append(next.from, len(next.procs))
	next.read = e.cardsRead
	e.owners, e.ownersWere = next, was
}

// changedSince reports whether any card at positions at has read otherwise (its
// processes, whose they are, their memory, its fault) since the resolution of owners
// numbered gen (see Engine.resolved); gen 0, before any: yes.
func (e *Engine) changedSince(at []int, gen uint64) bool {
	if gen == 0 {
		return true
	}
	for _, i := range at {
		if i >= len(e.changedAt) || e.changedAt[i] > gen {
			return true
		}
	}
	return false
}

// ownersOf is whose each of the processes of the card at position i is, in the order
// the card lists them.
func (e *Engine) ownersOf(i int) []owned {
	c, o := &e.cards[i], e.owners
	if i < len(o.workers) && o.workers[i] == c.Worker {
		if procs := o.card(i); lists(procs, c.Processes) {
			return procs
		}
	}
	// The card lists other processes than the round resolved (Preview read it again):
	// the round's owners, by pid.
	out := make([]owned, len(c.Processes))
	for j, p := range c.Processes {
		out[j] = owned{p.PID, o.find(proc{c.Worker, p.PID}), p.Used, p.Hidden}
	}
	return out
}

// lists says whether procs are the processes listed, in order.
func lists(procs []owned, listed []gpu.Process) bool {
	if len(procs) != len(listed) {
		return false
	}
	for j, p := range listed {
		if procs[j].pid != p.PID {
			return false
		}
	}
	return true
}

// cardAt is the position in cards of a machine's card idx: found without a lookup where
// the cards are listed in index order, as a machine's own are, and by its machine's
// alone where that machine's cards are, as a fleet's workers' are: a round looks up
// the cards of each of a fleet's tens of thousands of attempts, and a card's key costs
// several times its machine's name to find.
func (e *Engine) cardAt(worker string, idx int) (int, bool) {
	if cardIs(e.cards, idx, worker, idx) {
		return idx, true
	}
	if first, ok := e.workerAt[worker]; ok && cardIs(e.cards, first+idx, worker, idx) {
		return first + idx, true
	}
	i, ok := e.cardPos[plans.CardID{Worker: worker, Index: idx}]
	return i, ok
}

// cardIs says whether the card at position i of cards is a machine's card idx.
func cardIs(cards []gpu.Card, i int, worker string, idx int) bool {
	return i >= 0 && i < len(cards) && cards[i].Index == idx && cards[i].Worker == worker
}

// ownSet tells the processes of the attempts a round holds, and of the ended ones whose
// memory may still show (ghosts), from any other's: a process of one of them is not
// foreign, on whichever card. Nearly every process is its attempt's on one of that
// attempt's cards, told by looking through the few held there; another is looked up in
// a set of them all, made when the round first needs it. Made every round, that set
// cost a map write for each running attempt.
type ownSet struct {
	held   []holding
	ghosts []ghost
	// The attempts held on the card at position i are ids[from[i]:from[i+1]]; next is
	// where the next of them goes while they are filled in.
	from, next []int
	ids        []string
	all        map[string]bool
	made       bool
}

// ours readies the round's ownSet for the attempts held on the cards, and returns it.
func (e *Engine) ours(held []holding) *ownSet {
	s := &e.own
	s.held, s.ghosts, s.made = held, e.ghosts, false
	n := len(e.cards)
	s.from = slices.Grow(s.from[:0], n+1)[:n+1]
	clear(s.from)
	for _, h := range held {
		for _, i := range h.at {
			s.from[i+1]++
		}
	}
	for i := range n {
		s.from[i+1] += s.from[i]
	}
	s.next = append(s.next[:0], s.from[:n]...)
	s.ids = slices.Grow(s.ids[:0], s.from[n])[:s.from[n]]
	for _, h := range held {
		for _, i := range h.at {
			s.ids[s.next[i]] = h.id
			s.next[i]++
		}
	}
	return s
}

// is reports whether a process of attempt on the card at position i is ours. A process
// of no attempt ("") is not: every attempt the store holds has an id.
func (s *ownSet) is(i int, attempt string) bool {
	if attempt == "" {
		return false
	}
	if slices.Contains(s.ids[s.from[i]:s.from[i+1]], attempt) {
		return true
	}
	if !s.made {
		if s.all == nil {
			s.all = map[string]bool{}
		}
		clear(s.all)
		for _, h := range s.held {
			s.all[h.id] = true
		}
		for _, g := range s.ghosts {
			s.all[g.attempt.ID] = true
		}
		s.made = true
	}
	return s.all[attempt]
}
