package pack

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/gpuq/gpuq/plans"
)

// randomCards are up to eight cards on one to three machines, each numbering its own
// from 0.
func randomCards(r *rand.Rand) []CardState {
	n := 1 + r.IntN(8)
	cards := make([]CardState, n)
	machines := 1 + r.IntN(3)
	next := map[string]int{}
	for i := range cards {
		total := []int64{12, 24, 40, 80}[r.IntN(4)] * gib
		worker := []string{"", "a", "b"}[r.IntN(machines)]
		c := CardState{Worker: worker, Index: next[worker], Total: total, Slots: r.IntN(4), Headroom: total / 20}
		next[worker]++
		c.Running = r.IntN(c.Slots + 1)
		c.Reserved = int64(c.Running) * int64(r.IntN(8)) * gib
		c.Foreign = int64(r.IntN(3)) * gib
		c.Used = r.Int64N(c.Total)
		c.Exclusive = c.Running == 1 && r.IntN(4) == 0
		cards[i] = c
	}
	return cards
}

func randomQueue(r *rand.Rand, n int) []Request {
	q := make([]Request, n)
	for i := range q {
		q[i] = Request{
			Job:        fmt.Sprintf("j%d", i),
			Memory:     int64(r.IntN(30)) * gib,
			GPUsPerJob: 1 + r.IntN(2)*r.IntN(3),
			Exclusive:  r.IntN(10) == 0,
		}
	}
	return q
}

// withCompute gives half the cases a sharing target, what runs on the cards a
// utilization, and the jobs theirs, some not measured yet.
func withCompute(r *rand.Rand, cards []CardState, queue []Request) {
	if r.IntN(2) == 0 {
		return
	}
	for i := range cards {
		cards[i].Target = []float64{DefaultTarget, 1.5}[r.IntN(2)]
		for range cards[i].Running {
			if r.IntN(4) == 0 {
				cards[i].Util++
				cards[i].Blind++
			} else {
				cards[i].Util += float64(r.IntN(11)) / 10
			}
		}
	}
	for i := range queue {
		queue[i].Util = float64(r.IntN(11)) / 10
		queue[i].UtilUnknown = r.IntN(4) == 0
	}
}

// withPlans gives the jobs sweeps, some of them a's, which writes a gpu_plan: some of
// its jobs on the cards and in the queue are not measured yet (see apart).
func withPlans(r *rand.Rand, cards []CardState, queue []Request) {
	sweeps := []string{"a", "x", "b"}
	for i := range cards {
		c := &cards[i]
		if c.Running == 0 {
			continue
		}
		switch k := r.IntN(4); k {
		case 3:
			c.Mixed = true
		default:
			c.Sweep = sweeps[k]
		}
		if c.Sweep == "a" || c.Mixed {
			c.PlannedJobs = r.IntN(c.Running + 1)
			c.Planned = float64(c.PlannedJobs) * float64(1+r.IntN(10)) / 10
		}
	}
	for i := range queue {
		q := &queue[i]
		q.Sweep = sweeps[r.IntN(3)]
		if q.Sweep == "a" && r.IntN(2) == 0 {
			q.Util, q.UtilUnknown, q.UtilPlanned = float64(r.IntN(11))/10, false, true
		}
	}
}

// TestPackProperties: over random inputs the packer never fills a card past its slots or
// its free memory, nor past its sharing target where jobs share it, never shares an
// exclusive card, gives a multi-card job distinct cards
// of one machine, accounts for every job exactly once, and decides the same way every
// time.
func TestPackProperties(t *testing.T) {
	for seed := range uint64(3000) {
		r := rand.New(rand.NewPCG(seed, 7))
		cards := randomCards(r)
		withEnds(r, cards)
		queue := randomQueue(r, r.IntN(20))
		for i := range queue {
			queue[i].Duration = time.Duration(r.IntN(4)) * 20 * time.Minute
			queue[i].Waited = time.Duration(r.IntN(2)) * DueAfter
		}
		withCompute(rand.New(rand.NewPCG(seed, 11)), cards, queue)
		withPlans(rand.New(rand.NewPCG(seed, 13)), cards, queue)
		d := Pack(queue, cards, nil)

		if again := Pack(queue, cards, nil); !reflect.DeepEqual(d, again) {
			t.Fatalf("seed %d: not deterministic", seed)
		}
		byJob := map[string]Request{}
		for _, q := range queue {
			byJob[q.Job] = q
		}
		seen := map[string]bool{}
		pos := map[plans.CardID]int{}
		for i, c := range cards {
			pos[plans.CardID{Worker: c.Worker, Index: c.Index}] = i
		}
		added := make([]int64, len(cards))
		// util and guessed are what the jobs placed on each card ask of it beside
		// their own sweep's jobs and beside another's, and sweeps whose they are.
		util, guessed := make([]float64, len(cards)), make([]float64, len(cards))
		sweeps := make([]map[string]bool, len(cards))
		count := make([]int, len(cards))
		excl := make([]bool, len(cards))
		for _, p := range d.Placements {
			q := byJob[p.Job]
			if seen[p.Job] {
				t.Fatalf("seed %d: %s placed twice", seed, p.Job)
			}
			seen[p.Job] = true
			if len(p.Cards) != max(q.GPUsPerJob, 1) {
				t.Fatalf("seed %d: %s got %d cards, needs %d", seed, p.Job, len(p.Cards), q.GPUsPerJob)
			}
			distinct := map[int]bool{}
			for _, ci := range p.Cards {
				if distinct[ci] {
					t.Fatalf("seed %d: %s got card %d twice", seed, p.Job, ci)
				}
				distinct[ci] = true
				i, ok := pos[plans.CardID{Worker: p.Worker, Index: ci}]
				if !ok {
					t.Fatalf("seed %d: %s got card %d of %q, which has none such", seed, p.Job, ci, p.Worker)
				}
				added[i] += q.Memory
				util[i] += q.util()
				guessed[i] += q.guess()
				if sweeps[i] == nil {
					sweeps[i] = map[string]bool{}
				}
				sweeps[i][q.Sweep] = true
				count[i]++
				if q.Exclusive {
					excl[i] = true
				}
			}
		}
		for i, c := range cards {
			if count[i] == 0 {
				continue
			}
			if c.Running+count[i] > c.Slots {
				t.Fatalf("seed %d: card %d over its slots: %d running + %d > %d", seed, i, c.Running, count[i], c.Slots)
			}
			if added[i] > c.Free() {
				t.Fatalf("seed %d: card %d over memory: %d placed > %d free", seed, i, added[i], c.Free())
			}
			if c.Exclusive || (excl[i] && (c.Running > 0 || count[i] > 1)) {
				t.Fatalf("seed %d: card %d shared with an exclusive job", seed, i)
			}
			// Jobs of several sweeps on a card count a planned sweep's not measured yet
			// at their guesses.
			load := c.Util + util[i]
			if c.Sweep != "" {
				sweeps[i][c.Sweep] = true
			}
			if c.Mixed || len(sweeps[i]) > 1 {
				load = c.Util + c.Planned + guessed[i]
			}
			if shared := c.Running > 0 || count[i] > 1; shared && c.Target > 0 && load > c.Target+slack {
				t.Fatalf("seed %d: card %d past its sharing target: %.2f > %.2f", seed, i, load, c.Target)
			}
		}
		for w := range d.Waiting.All() {
			if seen[w.Job] {
				t.Fatalf("seed %d: %s both placed and waiting", seed, w.Job)
			}
			seen[w.Job] = true
			if w.Reason == "" || w.Detail == "" {
				t.Fatalf("seed %d: %s waits without a reason", seed, w.Job)
			}
		}
		if len(seen) != len(queue) {
			t.Fatalf("seed %d: %d of %d jobs accounted for", seed, len(seen), len(queue))
		}
	}
}

// tick is a cluster's round, in time.
const tick = time.Minute

// cluster runs the packer round after round, as the engine does, with attempts that
// end after a random number of rounds. With known set, each job's duration is known
// when it is queued, as a learned one is, and the packer is told when each attempt
// ends; without, nothing is.
type cluster struct {
	cards       []CardState
	running     []running
	r           *rand.Rand
	maxDuration int
	known       bool
	// head is the job cards were reserved for, since round headSince.
	head      string
	headSince int
	now       int
	// fifo: the queue is offered job by job, as Pack reads it; otherwise as the store's
	// queue is, to Place.
	fifo bool
}

type running struct {
	req   Request
	cards []int
	left  int
}

// request is a new job of memory bytes, with its duration drawn now.
func (c *cluster) request(id string, memory int64) Request {
	r := Request{Job: id, Memory: memory}
	r.Duration = time.Duration(1+c.r.IntN(c.maxDuration)) * tick
	return r
}

func (c *cluster) round(queue []Request) (placed map[string]bool) {
	cards := slices.Clone(c.cards)
	for _, a := range c.running {
		end := Release{In: UnknownEnd, Memory: a.req.Memory, Exclusive: a.req.Exclusive}
		if c.known {
			end.In = time.Duration(a.left) * tick
		}
		for _, ci := range a.cards {
			cards[ci].Ends = append(cards[ci].Ends, end)
		}
	}
	for i := range cards {
		slices.SortFunc(cards[i].Ends, func(a, b Release) int { return cmp.Compare(a.In, b.In) })
	}
	offered := make([]Request, len(queue))
	for i, q := range queue {
		if !c.known {
			q.Duration = 0
		}
		if q.Job == c.head {
			q.Waited = time.Duration(c.now-c.headSince) * tick
		}
		offered[i] = q
	}
	var d Decision
	if c.fifo {
		d = Pack(offered, cards, nil)
	} else {
		d = Place(&grouped{q: offered}, cards, nil, 0)
	}
	// As the engine keeps its head (see scheduler.Engine.headed).
	switch r := d.Reservation; {
	case r != nil && r.Job != c.head:
		c.head, c.headSince = r.Job, c.now
	case slices.ContainsFunc(d.Placements, func(p Placement) bool { return p.Job == c.head }):
		c.head = ""
	}
	placed = map[string]bool{}
	byJob := map[string]Request{}
	for _, q := range queue {
		byJob[q.Job] = q
	}
	for _, p := range d.Placements {
		q := byJob[p.Job]
		for _, ci := range p.Cards {
			c.cards[ci].Running++
			c.cards[ci].Reserved += q.Memory
			c.cards[ci].Exclusive = c.cards[ci].Exclusive || q.Exclusive
		}
		c.running = append(c.running, running{req: q, cards: p.Cards, left: int(q.Duration / tick)})
		placed[p.Job] = true
	}
	kept := c.running[:0]
	for _, a := range c.running {
		if a.left--; a.left > 0 {
			kept = append(kept, a)
			continue
		}
		for _, ci := range a.cards {
			c.cards[ci].Running--
			c.cards[ci].Reserved -= a.req.Memory
			if a.req.Exclusive {
				c.cards[ci].Exclusive = false
			}
		}
	}
	c.running = kept
	c.now++
	return placed
}

// grouped is a Queue over requests in order that passes over the rest of a group of
// requests alike once one waits, as the store's queue does.
type grouped struct {
	q      []Request
	i      int
	passed map[fit]bool
	last   fit
}

func (g *grouped) Next(room int64) (Request, bool) {
	for g.i < len(g.q) {
		r := g.q[g.i]
		g.i++
		if !g.passed[fitOf(&r)] && r.Memory <= room {
			g.last = fitOf(&r)
			return r, true
		}
	}
	return Request{}, false
}

func (g *grouped) Pass() {
	if g.passed == nil {
		g.passed = map[fit]bool{}
	}
	g.passed[g.last] = true
}

// TestPackNoStarvation: a large job starts within a bounded number of rounds of reaching
// the head of the queue, even though small jobs keep arriving that would fit beside the
// running ones: without the reservation they would take every hole as it opens. Where
// durations are known, the bound is the longest job (the reservation admits only jobs
// that end before it is due); where they are not, DueAfter more, the grace before the
// reservation is due.
func TestPackNoStarvation(t *testing.T) {
	for _, known := range []bool{true, false} {
		for seed := range uint64(200) {
			r := rand.New(rand.NewPCG(seed, 11))
			c := &cluster{r: r, maxDuration: 20, known: known, fifo: seed%2 == 0}
			for i := range 1 + r.IntN(4) {
				c.cards = append(c.cards, CardState{Index: i, Total: 24 * gib, Slots: 2 + r.IntN(2), Headroom: gib})
			}
			var queue []Request
			next := 0
			const arrives = 10 // by then small jobs fill every card
			startedAt, headAt := -1, -1
			for round := 0; round < 500 && startedAt < 0; round++ {
				if round == arrives {
					queue = append(queue, c.request("big", 22*gib))
				}
				for range 3 + r.IntN(3) {
					queue = append(queue, c.request(fmt.Sprintf("s%d", next), int64(2+r.IntN(6))*gib))
					next++
				}
				if len(queue) > 0 && queue[0].Job == "big" && headAt < 0 {
					headAt = round
				}
				placed := c.round(queue)
				if placed["big"] {
					startedAt = round
				}
				kept := queue[:0]
				for _, q := range queue {
					if !placed[q.Job] {
						kept = append(kept, q)
					}
				}
				queue = kept
			}
			// Once it heads the queue, it holds the cards nearest to fitting; those only
			// drain, and attempts last at most maxDuration rounds.
			// (It may also start earlier, by backfill, before it heads the queue.)
			bound := c.maxDuration
			if !known {
				bound += int(DueAfter / tick)
			}
			if startedAt < 0 || headAt >= 0 && startedAt-headAt > bound {
				t.Fatalf("known %v, seed %d: the large job headed the queue at round %d and started at round %d (bound %d)", known, seed, headAt, startedAt, bound)
			}
		}
	}
}

// TestPackEventuallyPlacesEveryJob: in a finite queue, every job that fits on an idle
// machine starts.
func TestPackEventuallyPlacesEveryJob(t *testing.T) {
	for seed := range uint64(300) {
		r := rand.New(rand.NewPCG(seed, 13))
		c := &cluster{r: r, maxDuration: 6, known: seed%3 != 0, fifo: seed%2 == 0}
		for i := range 1 + r.IntN(6) {
			total := []int64{12, 24, 80}[r.IntN(3)] * gib
			c.cards = append(c.cards, CardState{Index: i, Total: total, Slots: 1 + r.IntN(3), Headroom: total / 20})
		}
		var queue []Request
		for _, q := range randomQueue(r, 1+r.IntN(40)) {
			q.Duration = time.Duration(1+r.IntN(c.maxDuration)) * tick
			if fitsIdleMachine(q, c.cards) {
				queue = append(queue, q)
			}
		}
		for round := 0; len(queue) > 0; round++ {
			if round > 40*len(queue)+50 {
				t.Fatalf("seed %d: %d jobs never placed, first %+v", seed, len(queue), queue[0])
			}
			placed := c.round(queue)
			kept := queue[:0]
			for _, q := range queue {
				if !placed[q.Job] {
					kept = append(kept, q)
				}
			}
			queue = kept
		}
	}
}

func fitsIdleMachine(q Request, cards []CardState) bool {
	n := 0
	for _, c := range cards {
		if c.idleRoom() >= q.Memory && c.Slots > 0 {
			n++
		}
	}
	return n >= max(q.GPUsPerJob, 1)
}

// TestPlaceMatchesPack: Place, which passes over the rest of a group whose job waits
// and stops reading the queue early, makes exactly the placements and the reservation
// Pack makes, over random queues and machines, with and without known ends.
func TestPlaceMatchesPack(t *testing.T) {
	for seed := range uint64(3000) {
		r := rand.New(rand.NewPCG(seed, 11))
		cards := randomCards(r)
		withEnds(r, cards)
		queue := randomQueue(r, r.IntN(40))
		smallest := int64(1 << 62)
		for i := range queue {
			smallest = min(smallest, queue[i].Memory)
			queue[i].Duration = time.Duration(r.IntN(4)) * 20 * time.Minute
			queue[i].Waited = time.Duration(r.IntN(2)) * DueAfter
		}
		withCompute(rand.New(rand.NewPCG(seed, 13)), cards, queue)
		withPlans(rand.New(rand.NewPCG(seed, 17)), cards, queue)
		want := Pack(queue, cards, nil)
		got := Place(&grouped{q: queue}, cards, nil, smallest)
		if !reflect.DeepEqual(got.Placements, want.Placements) || !reflect.DeepEqual(got.Reservation, want.Reservation) {
			t.Fatalf("seed %d: Place = %v %+v, Pack = %v %+v", seed, got.Placements, got.Reservation, want.Placements, want.Reservation)
		}
	}
}

// withEnds gives the attempts on random cards ends: some known, some not.
func withEnds(r *rand.Rand, cards []CardState) {
	for i := range cards {
		c := &cards[i]
		for n := range c.Running {
			end := Release{In: UnknownEnd, Memory: c.Reserved / int64(c.Running), Exclusive: c.Exclusive && n == 0}
			if r.IntN(3) > 0 {
				end.In = time.Duration(r.IntN(6)) * 15 * time.Minute
			}
			c.Ends = append(c.Ends, end)
		}
		slices.SortFunc(c.Ends, func(a, b Release) int { return cmp.Compare(a.In, b.In) })
	}
}
