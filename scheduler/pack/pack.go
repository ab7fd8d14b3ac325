// Package pack is gpuq's packer: which queued jobs start on which cards, the
// reservation that keeps the head of the queue from starving (backfill), and why each
// job that does not start waits. It is pure and deterministic: no clock, no I/O, no
// state of its own between calls; it imports plans alone, so that the engine, the
// simulator and the tests run the same code on any machine, without cgo.
//
// One file per phase: model.go is what it reads and answers, pack.go the round, place.go
// where a job fits best (alike.go: the cards kept for a run of alike jobs), backfill.go
// the reservation, explain.go the reasons.
package pack

import (
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/gpuq/gpuq/plans"
)

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
	return packWith(queue, cards, hosts, false)
}

// packWith is Pack, looking at every card for each job where noAlike is set.
func packWith(queue []Request, cards []CardState, hosts Hosts, noAlike bool) Decision {
	// Every card with a slot is looked at: a look for the smallest job first would
	// read the whole queue, most of which waits as a job before it did.
	p := newPacker(slices.Clone(cards), maps.Clone(hosts), true, math.MinInt64)
	p.noAlike = noAlike
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
//
// Unlike Pack, Place takes cards and hosts as its own and changes them as it places
// jobs: a round's, which it reads no more, cost no copy. Pass copies to read them after.
func Place(q Queue, cards []CardState, hosts Hosts, smallest int64) Decision {
	return placeWith(q, cards, hosts, smallest, false)
}

// placeWith is Place, looking at every card for each job where noAlike is set.
func placeWith(q Queue, cards []CardState, hosts Hosts, smallest int64, noAlike bool) Decision {
	p := newPacker(cards, hosts, false, smallest)
	p.noAlike = noAlike
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

// newPacker packs on cards and hosts, which it changes as it places jobs, requests of
// at least smallest bytes a card (see roomy).
func newPacker(cards []CardState, hosts Hosts, explain bool, smallest int64) *packer {
	p := &packer{cards: cards, failed: map[int64]int32{}, hosts: hosts, explain: explain,
		whys: []Wait{placed: {}, noSlot: {Reason: NoSlot, Detail: "every card's slots are taken"}}}
	p.free = make([]int64, len(cards))
	for i := range p.cards {
		p.machines = p.machines || p.cards[i].Worker != p.cards[0].Worker
		p.passing = p.passing || p.cards[i].Passing > 0
		p.planned = p.planned || p.cards[i].PlannedJobs > 0
		p.freeOn(i)
	}
	p.keepRoomy(smallest)
	p.measure()
	return p
}

// keepRoomy makes roomy the cards with a free slot and at least floor free.
func (p *packer) keepRoomy(floor int64) {
	p.floor, p.roomy = floor, p.roomy[:0]
	for i, f := range p.free {
		if f != math.MinInt64 && f >= floor {
			p.roomy = append(p.roomy, i)
		}
	}
}

// roomyFor is the cards r may start on, as roomy keeps them: those that have filled
// below the floor since are let go (no request of the round fits them again), and a
// request below the floor (no caller passes one) lowers it first.
func (p *packer) roomyFor(r *Request) []int {
	if r.Memory < p.floor {
		p.keepRoomy(r.Memory)
	}
	p.roomy = slices.DeleteFunc(p.roomy, func(i int) bool { return p.free[i] < p.floor })
	return p.roomy
}

// freeOn notes what cards[i] has free now (see packer.free).
func (p *packer) freeOn(i int) {
	p.free[i] = math.MinInt64
	if c := &p.cards[i]; c.open() {
		p.free[i] = c.Free()
	}
}

// measure finds the most memory free on a card with a free slot.
func (p *packer) measure() {
	p.roomiest = math.MinInt64
	for _, f := range p.free {
		p.roomiest = max(p.roomiest, f)
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
	p.fail(p.fitFor(rp), why)
	return Placement{}, why, false
}

// full reports whether no job of at least smallest bytes per card could start on any
// card.
func (p *packer) full(smallest int64) bool { return p.roomiest < smallest }

type packer struct {
	cards []CardState
	// free is each card's Free while it has a slot, and MinInt64 once it has none:
	// what pick asks of every card for each job first, read from a slice of its own
	// rather than from cards, whose states are large (a fleet's thousands of cards).
	free []int64
	// roomy are the cards with a free slot and at least floor bytes free, in order:
	// floor is the smallest request's memory, so no request starts on another card,
	// and a look for the best card for a job reads these alone. A fleet's round
	// looked at each of its thousands of full cards for every fit that waited, 800
	// fits a round.
	roomy    []int
	floor    int64
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
	// passing: some card holds trainers of another gpuq (see CardState.Passing).
	passing bool
	// planned: some card holds a planned sweep's job not measured yet, or some
	// request seen or placed is one: a request's sweep may then decide where it may
	// start (see apart), and requests alike but for their sweeps are told apart.
	planned bool
	explain bool // build the details of reasons (Pack), or not (Place)
	// gen counts the changes of the cards (a placement, the reservation), and alike
	// keeps the cards a run of alike requests may start on (see pickOne); noAlike
	// looks at every card for each (a test's reference).
	gen     uint64
	alike   alike
	noAlike bool
}
