package scheduler

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/gpu"
	"github.com/gpuq/gpuq/scheduler/pack"
	"github.com/gpuq/gpuq/scheduler/state"
)

// cardStates combines what NVML reads, the plan, and gpuq's attempts into the packer's
// view of each card. slots is the plan fitted to the cards; a card out of service offers
// none. A process of none of attempts (nor of a ghost, see ours) is foreign, and its
// memory counts against free, but for one this PID namespace cannot see: whose it is
// cannot be told, and NVML's total use still counts it.
func (e *Engine) cardStates(dst []pack.CardState, slots []int, attempts []*state.Attempt) []pack.CardState {
	return e.cardStatesOf(dst, slots, e.holdings(attempts, nil))
}

// holding is an attempt as a round counts it on its cards: whether it runs, and its
// end as the packer expects it (what it holds and asks of their compute, whether that
// is measured, and when it frees them); and where its cards are among the round's.
// The cards' states, their ends and whose their processes are all read it, found once
// for each of a fleet's tens of thousands of attempts: read from the attempts, all
// over memory, pass after pass, it was most of a round.
type holding struct {
	id      string
	running bool
	end     pack.Release
	at      []int // positions in the round's cards
	// sweep is its sweep, and planned what it counts at beside another sweep's jobs
	// where its sweep's plan has it count as nothing (see utilCounts).
	sweep   string
	planned float64
}

// holdingBufs are arrays a round's holdings may be kept in (see packViewBufs).
type holdingBufs struct {
	held []holding
	at   []int
}

// holdings finds the holding of each attempt, in buf's arrays where buf is not nil.
func (e *Engine) holdings(attempts []*state.Attempt, buf *holdingBufs) []holding {
	if buf == nil {
		buf = &holdingBufs{}
	}
	held, at := buf.held[:0], buf.at[:0]
	now := e.clock.Now()
	for k, c := range e.followed(attempts) {
		a := attempts[k]
		// A ghost (see settling) holds memory, computes nothing and is about to free it.
		h := holding{id: a.ID, running: a.Running(), end: pack.Release{Memory: a.Holds(), Exclusive: a.Alone}}
		if h.running {
			var known bool
			h.end.Util, known, h.planned = e.attemptUtil(a, c)
			h.sweep, _, _ = strings.Cut(a.Shape, "\x00")
			h.end.Blind = !known
			h.end.In = e.left(a, now)
		}
		from := len(at)
		at = e.appendCards(at, a, c)
		h.at = at[from:] // for its length: at may move as it grows
		held = append(held, h)
	}
	for i, n := 0, 0; i < len(held); i++ {
		k := len(held[i].at)
		held[i].at = at[n : n+k : n+k]
		n += k
	}
	buf.held, buf.at = held, at
	return held
}

// cardStatesOf is cardStates of the attempts' holdings.
func (e *Engine) cardStatesOf(dst []pack.CardState, slots []int, held []holding) []pack.CardState {
	headroom, target := e.cfg.Headroom, e.target()
	out := slices.Grow(dst[:0], len(e.cards))[:len(e.cards)]
	for i, c := range e.cards {
		out[i] = pack.CardState{Worker: c.Worker, Index: c.Index, Total: c.Total, Used: c.Used, Headroom: headroom.Of(c.Total), Slots: slots[i], Target: target}
		if c.Fault != "" {
			out[i].Slots = 0
		}
	}
	for _, h := range held {
		for _, i := range h.at {
			out[i].Reserved += h.end.Memory
			out[i].Running++
			out[i].Exclusive = out[i].Exclusive || h.end.Exclusive && h.running
			out[i].Util += h.end.Util
			if h.end.Blind {
				out[i].Blind++
				out[i].BlindUtil += h.end.Util
			}
			if h.running {
				out[i].AddSweep(h.sweep)
			}
			if h.planned > 0 {
				out[i].Planned += h.planned
				out[i].PlannedJobs++
			}
		}
	}
	e.idleUse(out)
	ours := e.ours(held)
	for i, c := range e.cards {
		strangers := false
		for j, o := range e.ownersOf(i) {
			if p := c.Processes[j]; !p.Hidden && !ours.is(i, o.attempt) {
				if p.Used != gpu.Unknown {
					out[i].Foreign += p.Used
					if e.passing(c.Worker, o) {
						out[i].Passing += p.Used
					}
				}
				if o.attempt == "" {
					strangers = true
				} else {
					// An attempt's trainer the round no longer holds (one that ended,
					// still stopping) computes by its own figure, while it does.
					out[i].Util += float64(max(p.Util, 0)) / 100
				}
			}
		}
		if strangers {
			e.othersOn(&out[i], i)
		}
	}
	return out
}

// othersOn counts on the packer's card s, at position i, what processes that are not
// gpuq's keep busy there, by the very figure the crowd counts (foreignAt): another
// user's trainer slows gpuq's jobs as much as one of gpuq's would, and is no job of a
// planned sweep's (see pack.CardState.Others). Where NVML gives no process there a
// figure of its own, that is the card's beyond what gpuq's attempts count at: read as
// nothing, a card another user kept 90% busy was an idle card to spread to, and a job
// that joined gpuq's there counted on compute it did not have.
func (e *Engine) othersOn(s *pack.CardState, i int) {
	if f := e.foreignAt(i); f.n > 0 {
		s.Util += f.util
		s.Others = true
	}
}

// passing reports whether a process on a card of worker that is no attempt the round
// holds, whose owner is o, is a trainer, which ends: one of the engine's own attempts'
// (one that ended, still stopping), or on this machine another gpuq's.
func (e *Engine) passing(worker string, o owned) bool {
	return o.attempt != "" || worker == "" && e.cfg.Trainer != nil && e.cfg.Trainer(o.pid)
}

// idleUse learns what NVML counts as used on each card with nothing on it (no attempt
// of gpuq's running or settling there, no process listed; 0.6 GiB of an idle H200,
// the driver's own): the least it has read there, as memory freed late reads more for
// a moment. The headroom is kept for that, so the packer counts it within the
// headroom, up to half of it (pack.CardState.IdleUse): else a job whose estimate is
// within a card's room but above what the card has free idle (22.7 GiB on a 24 GiB
// card with 1 GiB of headroom and 0.6 GiB in use idle) would fit no card, and wait for
// ever while cards were kept for it. What it learns the store keeps (see saveIdle).
func (e *Engine) idleUse(out []pack.CardState) {
	for i := range out {
		c := &e.cards[i]
		if out[i].Running == 0 && len(c.Processes) == 0 && c.Fault == "" && c.Used >= 0 && (e.idleAt[i] < 0 || c.Used < e.idleAt[i]) {
			e.idleAt[i] = c.Used
			u := state.IdleUse{Worker: c.Worker, GPU: c.Index, UUID: c.UUID, Total: c.Total, Used: c.Used, Seen: e.clock.Now()}
			e.idle[c.ID()] = u
			e.idleUnsaved = append(e.idleUnsaved, u)
		}
		out[i].IdleUse = max(e.idleAt[i], 0)
	}
}

// saveIdle writes what idleUse learned since it last did, so that a daemon started
// again counts each card's idle use at once: with every card busy, a job that fits a
// card only once its idle use is counted would wait until one happened to go idle.
// idleUse learns only what differs from what the engine knew (a card's first idle
// reading, a lower one), which is seldom, not each round; and placeCards, as the
// cards come and go, when a card left (leftIdle) and which to forget (forgetIdle).
func (e *Engine) saveIdle() {
	if len(e.idleUnsaved) == 0 && len(e.idleGone) == 0 {
		return
	}
	learned := make([]*state.IdleUse, len(e.idleUnsaved))
	for i := range e.idleUnsaved {
		learned[i] = &e.idleUnsaved[i]
	}
	if e.put(state.Change{IdleUses: learned, IdleUsesGone: e.idleGone}) == nil {
		e.idleUnsaved, e.idleGone = nil, nil // else tried again at the next round
	}
}

// idleAwayKept is how many cards away from the reading (their worker gone) keep their
// idle use in the store, those seen last (see pruneIdle): a worker that comes back
// (another allocation on the same node) counts it at once, and the table does not
// grow by the cards of every worker that ever linked. (A variable, so that a test
// need not make a thousand cards.)
var idleAwayKept = 1024

// idlePruneAfter is how long an engine runs before it forgets the idle use of cards
// away: a daemon started again reads its own cards first, its workers' as they link
// again, which they do within seconds.
const idlePruneAfter = 10 * time.Minute

// leftIdle notes when each card whose idle use the engine knew left its reading (was:
// the last reading's), for pruneIdle to keep the idle use of those seen last.
func (e *Engine) leftIdle(was map[plans.CardID]state.IdleUse) {
	from := len(e.idleUnsaved)
	for id, u := range was {
		if _, here := e.cardPos[id]; !here {
			e.idleUnsaved = append(e.idleUnsaved, u)
		}
	}
	if len(e.idleUnsaved) == from {
		return
	}
	now := e.clock.Now()
	for i := from; i < len(e.idleUnsaved); i++ {
		e.idleUnsaved[i].Seen = now
	}
	// In the order of the cards, not the map's.
	slices.SortFunc(e.idleUnsaved[from:], func(a, b state.IdleUse) int {
		return cmp.Or(cmp.Compare(a.Worker, b.Worker), cmp.Compare(a.GPU, b.GPU))
	})
}

// pruneIdle forgets the idle use of the cards away from the reading that were seen
// longest ago, beyond idleAwayKept of them, once the engine has run for
// idlePruneAfter. stored is the store's table, which placeCards reads only where the
// cards read changed and one has no idle use the engine knows, as one that joins has
// not: the table is pruned where it may grow, and never walked at a round that reads
// the cards of the last.
func (e *Engine) pruneIdle(stored map[plans.CardID]*state.IdleUse) {
	for _, u := range e.idleUnsaved { // what the store is yet to have
		stored[plans.CardID{Worker: u.Worker, Index: u.GPU}] = &u
	}
	var away []*state.IdleUse
	for id, u := range stored {
		if _, here := e.cardPos[id]; !here {
			away = append(away, u)
		}
	}
	if len(away) <= idleAwayKept || e.clock.Now().Sub(e.began) < idlePruneAfter {
		return
	}
	slices.SortFunc(away, func(a, b *state.IdleUse) int {
		return cmp.Or(a.Seen.Compare(b.Seen), cmp.Compare(a.Worker, b.Worker), cmp.Compare(a.GPU, b.GPU))
	})
	gone := make([]plans.CardID, len(away)-idleAwayKept)
	for i, u := range away[:len(gone)] {
		gone[i] = plans.CardID{Worker: u.Worker, Index: u.GPU}
	}
	e.forgetIdle(gone...)
}

// forgetIdle has saveIdle forget the idle use of cards, and not write what it was yet
// to write of them.
func (e *Engine) forgetIdle(cards ...plans.CardID) {
	gone := make(map[plans.CardID]bool, len(cards))
	for _, c := range cards {
		gone[c] = true
	}
	e.idleUnsaved = slices.DeleteFunc(e.idleUnsaved, func(u state.IdleUse) bool { return gone[plans.CardID{Worker: u.Worker, Index: u.GPU}] })
	e.idleGone = append(e.idleGone, cards...)
}

// requestOf is a queued job as the packer sees it. A job of memory: probe whose shape
// is not measured yet runs alone.
func requestOf(j *state.Job) pack.Request {
	return pack.Request{Job: j.ID, Memory: j.Estimate, GPUsPerJob: j.GPUsPerJob, Host: j.HostEstimate,
		Exclusive: j.Pos.Exclusive || j.Probe && j.Estimate == 0}
}

// watchCards tells people what changed in how the cards can be read: a card going out of
// service or coming back, and, once, that GPU memory cannot be attributed here.
func (e *Engine) watchCards() {
	hidden := map[proc]bool{}
	for _, c := range e.cards {
		name := func() string { return "GPU " + c.ID().String() }
		// Most rounds no card is out of service, or was: a fleet's thousands of cards
		// are not looked up.
		if c.Fault != "" || len(e.faults) > 0 {
			id := c.ID()
			was, known := e.faults[id]
			switch {
			case c.Fault != "" && c.Fault != was:
				e.events(Event{Time: e.clock.Now(), Job: name(), Kind: "out-of-service",
					Message: c.Fault + "; it takes no new job, its running jobs go on, and gpuq reads it again every poll"})
			case c.Fault == "" && known:
				e.events(Event{Time: e.clock.Now(), Job: name(), Kind: "in-service", Message: "NVML reads it again"})
			}
			if c.Fault != "" {
				e.faults[id] = c.Fault
			} else {
				delete(e.faults, id)
			}
		}
		for _, p := range c.Processes {
			if !p.Hidden {
				continue
			}
			// Twice in a row: a process can end between NVML's list and the look in /proc.
			k := proc{c.Worker, p.PID}
			if e.hidden[k] && !e.unattributed {
				e.unattributed = true
				e.events(Event{Time: e.clock.Now(), Job: name(), Kind: "unattributed", Message: fmt.Sprintf(
					"NVML lists process %d, which this PID namespace does not have (gpuq runs in a container?): gpuq cannot "+
						"attribute GPU memory on this machine, and packs by estimates alone", p.PID)})
			}
			hidden[k] = true
		}
	}
	e.hidden = hidden
}

// outOfService says which cards are out of service and why, for people; "" when none is.
func (e *Engine) outOfService() string {
	var parts []string
	for _, c := range e.cards {
		if c.Fault != "" {
			parts = append(parts, fmt.Sprintf("GPU %s is out of service (%s)", c.ID(), c.Fault))
		}
	}
	return strings.Join(parts, "; ")
}
