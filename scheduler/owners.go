package scheduler

import (
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
	// byProc is whose each process is, made when first asked (see find).
	byProc  map[proc]string
	indexed bool
}

// owned is a process on a card, and its attempt: "" where nobody can tell.
type owned struct {
	pid     int
	attempt string
}

// reset empties o, keeping its arrays.
func (o *ownership) reset() {
	o.workers, o.from, o.procs, o.indexed = o.workers[:0], o.from[:0], o.procs[:0], false
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
// kept stays as small as the cards' process lists.
func (e *Engine) resolveOwners() {
	was, next := e.owners, e.ownersWere
	next.reset()
	for _, c := range e.cards {
		next.workers = append(next.workers, c.Worker)
		next.from = append(next.from, len(next.procs))
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
			next.procs = append(next.procs, owned{p.PID, a})
		}
	}
	next.from = append(next.from, len(next.procs))
	e.owners, e.ownersWere = next, was
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
		out[j] = owned{p.PID, o.find(proc{c.Worker, p.PID})}
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
// the cards are listed in index order, as a machine's own are.
func (e *Engine) cardAt(worker string, idx int) (int, bool) {
	if idx >= 0 && idx < len(e.cards) && e.cards[idx].Index == idx && e.cards[idx].Worker == worker {
		return idx, true
	}
	i, ok := e.cardPos[plans.CardID{Worker: worker, Index: idx}]
	return i, ok
}

// ours tells the attempts given, and the ended ones whose memory may still show
// (ghosts), from any other: a process of one of them is not foreign, on whichever card.
func (e *Engine) ours(held []holding) func(attempt string) bool {
	set := e.running
	clear(set)
	for _, h := range held {
		set[h.a.ID] = true
	}
	for _, g := range e.ghosts {
		set[g.attempt.ID] = true
	}
	return func(attempt string) bool { return set[attempt] }
}
