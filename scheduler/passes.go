package scheduler

// A round's passes over the queue. What a shape not measured yet asks of a card's
// compute is not known, so a round measures before it shares: first the first job of
// each such shape, on the idle cards; then the queue in its order, less the other jobs
// of the shapes being measured; then those, on the idle cards left.

import (
	"math"
	"slices"

	"github.com/gpuq/gpuq/scheduler/pack"
	"github.com/gpuq/gpuq/scheduler/state"
)

// pass is one pass of a round over the queue.
type pass int

const (
	// measure offers the first job of each shape not measured yet and not running,
	// ahead of the queue's order: it only takes an idle card (or one whose jobs use no
	// compute), and is measured a minute later, which every later job of the shape
	// waits for. It makes no reservation.
	measure pass = iota
	// main offers the queue in its order, but for the other jobs of the shapes being
	// measured; the reservation is its.
	main
	// rest offers those, on what main left, outside its reservation: idle cards take
	// them, alone.
	rest
)

// passes is what a round's passes share: the shapes being measured (a job of the shape
// runs or was placed this round), the shapes with jobs held back for the rest pass,
// and the jobs placed.
type passes struct {
	measuring, held, placed map[string]bool
}

// reset empties ps for a round, and returns it.
func (ps *passes) reset() *passes {
	if ps.placed == nil {
		*ps = passes{measuring: map[string]bool{}, held: map[string]bool{}, placed: map[string]bool{}}
	}
	clear(ps.measuring)
	clear(ps.held)
	clear(ps.placed)
	return ps
}

// place runs a round's passes and returns their placements, and main's reservation.
func (e *Engine) place(v packView, smallest int64) pack.Decision {
	ps := e.roundPasses.reset()
	var d pack.Decision
	if e.target() > 0 && slices.ContainsFunc(v.cards, func(c pack.CardState) bool { return c.Running == 0 && c.Slots > 0 }) {
		d.Placements = e.placed(ps, pack.Place(e.offers(v, ps, measure), v.cards, v.hosts, smallest))
		for _, p := range d.Placements {
			ps.measuring[v.view.Job(p.Job).Shape] = true
		}
	}
	m := pack.Place(e.offers(v, ps, main), v.cards, v.hosts, smallest)
	d.Placements = append(d.Placements, e.placed(ps, m)...)
	d.Reservation = m.Reservation
	if len(ps.held) > 0 {
		e.outside(v.cards, m.Reservation)
		d.Placements = append(d.Placements, e.placed(ps, pack.Place(e.offers(v, ps, rest), v.cards, v.hosts, smallest))...)
	}
	return d
}

// placed notes a pass's placements, and returns them.
func (e *Engine) placed(ps *passes, d pack.Decision) []pack.Placement {
	for _, p := range d.Placements {
		ps.placed[p.Job] = true
	}
	return d.Placements
}

// offers is the store's queue as a round offers it to the packer (see pack.Queue).
type offers struct {
	c       *state.Cursor
	request func(*state.Group, state.Member) pack.Request
	// placed are jobs an earlier pass of the round placed, which a later skips.
	placed map[string]bool
}

func (o offers) Next(room int64) (pack.Request, bool) {
	for {
		g, m, ok := o.c.NextUpTo(room)
		if !ok {
			return pack.Request{}, false
		}
		if !o.placed[m.ID] {
			return o.request(g, m), true
		}
	}
}

func (o offers) Pass() { o.c.Pass() }

// offers is the queue for a pass, as Place reads it. Of a group of memory: probe jobs
// whose shape is not measured yet, the first is offered while no job measures the
// shape, and none while one does: the first of each shape runs alone, and the others
// wait for its peak. So with a shape whose utilization is not measured yet (see pass).
func (e *Engine) offers(v packView, ps *passes, p pass) offers {
	probing, offered := map[string]bool{}, map[string]bool{}
	admit := func(g *state.Group) int {
		shape := g.Key.Shape
		if g.Key.Probe && waitsForProbe(v.view, shape, probing) {
			return 0
		}
		switch p {
		case measure:
			if e.unmeasured(shape) && !offered[shape] {
				offered[shape] = true
				return 1
			}
			return 0
		case rest:
			if ps.held[shape] {
				return math.MaxInt
			}
			return 0
		}
		switch {
		case e.waitsForUtil(shape, ps):
			ps.held[shape] = true
			return 0
		case ps.measuring[shape]:
			ps.held[shape] = true
			return 1
		case g.Key.Probe:
			return 1
		}
		return math.MaxInt
	}
	return offers{c: e.store.Queue().Cursor(admit).Asking(v.asks), request: v.request, placed: ps.placed}
}

// unmeasured reports whether jobs of a shape wait for it to be measured (its
// utilization is not known, and the sharing target counts it), and none runs yet.
func (e *Engine) unmeasured(shape string) bool {
	if e.target() == 0 || e.crowds.running(shape) {
		return false
	}
	_, known := e.utilOf(shape)
	return !known
}

// waitsForUtil says whether a queued job of a shape waits for its shape's utilization
// to be measured: it is not known, and a job of the shape runs (its first, measuring
// it) or was placed or offered earlier this round, which ps.measuring notes. A sharing
// target of none measures nothing.
func (e *Engine) waitsForUtil(shape string, ps *passes) bool {
	if e.target() == 0 {
		return false
	}
	if _, known := e.utilOf(shape); known {
		return false
	}
	if e.crowds.running(shape) || ps.measuring[shape] {
		return true
	}
	ps.measuring[shape] = true
	return false
}

// outside takes the cards of a reservation out of a later pass's reach.
func (e *Engine) outside(cards []pack.CardState, r *pack.Reservation) {
	if r == nil {
		return
	}
	for i := range cards {
		if cards[i].Worker == r.Worker && slices.Contains(r.Cards, cards[i].Index) {
			cards[i].Slots = 0
		}
	}
}

// queue is the queue as Pack reads it, in the order a round's passes offer it: the
// first job of each shape not measured yet, then every job in order but those that wait
// for their shape's probe (probing, if not nil, is told of each of those) or for it to
// be measured, then those.
func (e *Engine) queue(v packView, probing func(*state.Job)) []pack.Request {
	// Made whole at once: grown by appends, it was twice the memory for 100,000 jobs.
	out := make([]pack.Request, 0, e.store.Queue().Len())
	var first, later []pack.Request
	probed, offered := map[string]bool{}, map[string]bool{}
	ps := &passes{measuring: map[string]bool{}}
	c := e.store.Queue().Cursor(nil)
	for g, m, ok := c.Next(); ok; g, m, ok = c.Next() {
		shape := g.Key.Shape
		switch {
		case g.Key.Probe && waitsForProbe(v.view, shape, probed):
			if probing != nil {
				probing(v.view.Job(m.ID))
			}
		case e.unmeasured(shape) && !offered[shape]:
			offered[shape], ps.measuring[shape] = true, true
			first = append(first, v.request(g, m))
		case e.waitsForUtil(shape, ps):
			later = append(later, v.request(g, m))
		default:
			out = append(out, v.request(g, m))
		}
	}
	if len(first)+len(later) == 0 {
		return out
	}
	return slices.Concat(first, out, later)
}
