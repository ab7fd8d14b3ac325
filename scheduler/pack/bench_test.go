package pack_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/pack"
	"github.com/gpuq/gpuq/scheduler/state"
)

const gib = int64(1) << 30

// benchMachine is a queue of jobs of a few shapes (as a sweep's are) and a machine of
// two-slot 24 GiB cards, partly busy.
func benchMachine(jobs, cards int) ([]pack.Request, []pack.CardState, int64) {
	r := rand.New(rand.NewPCG(1, 2))
	cs := make([]pack.CardState, cards)
	for i := range cs {
		cs[i] = pack.CardState{Index: i, Total: 24 * gib, Headroom: gib, Slots: 2, Running: r.IntN(2), Reserved: int64(r.IntN(12)) * gib}
	}
	q := make([]pack.Request, jobs)
	smallest := int64(1 << 62)
	for i := range q {
		q[i] = pack.Request{Job: fmt.Sprintf("j%d", i), Memory: int64(6+2*r.IntN(4)) * gib, GPUsPerJob: 1}
		smallest = min(smallest, q[i].Memory)
	}
	return q, cs, smallest
}

// benchDecisions times each decision, and reports decisions per second and the 99th
// percentile of one decision's latency beside the mean.
func benchDecisions(b *testing.B, decide func()) {
	took := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		decide()
		took = append(took, time.Since(t0))
	}
	b.StopTimer()
	slices.Sort(took)
	var sum time.Duration
	for _, d := range took {
		sum += d
	}
	b.ReportMetric(float64(took[(len(took)*99)/100].Microseconds()), "p99-µs")
	b.ReportMetric(float64(len(took))/sum.Seconds(), "decisions/s")
}

var benchSizes = []struct{ jobs, cards int }{
	{1_000, 8}, {1_000, 64}, {1_000, 512},
	{10_000, 8}, {10_000, 64}, {10_000, 512},
	{100_000, 8}, {100_000, 64}, {100_000, 512},
}

// BenchmarkPack measures Pack, which explains why every queued job waits (gpuq plan).
func BenchmarkPack(b *testing.B) {
	for _, s := range benchSizes {
		b.Run(fmt.Sprintf("jobs=%d/cards=%d", s.jobs, s.cards), func(b *testing.B) {
			q, cs, _ := benchMachine(s.jobs, s.cards)
			benchDecisions(b, func() { pack.Pack(q, cs, nil) })
		})
	}
}

// BenchmarkPlace measures Place, the engine's decision in each round, reading the
// store's queue, on a copy of the cards, as a round's own.
func BenchmarkPlace(b *testing.B) {
	for _, s := range benchSizes {
		b.Run(fmt.Sprintf("jobs=%d/cards=%d", s.jobs, s.cards), func(b *testing.B) {
			q, cs, smallest := benchMachine(s.jobs, s.cards)
			queue := queueOf(b, q)
			benchDecisions(b, func() {
				pack.Place(offers{c: queue.Cursor(nil), request: func(g *state.Group, m state.Member) pack.Request {
					return pack.Request{Job: m.ID, Memory: g.Key.Estimate, GPUsPerJob: g.Key.GPUs}
				}}, slices.Clone(cs), nil, smallest) // Place changes the cards it is given
			})
		})
	}
}

// queueOf is the store's queue of jobs that ask what the requests ask, in their order
// (one fifo sweep, a shape for each size).
func queueOf(b *testing.B, rs []pack.Request) *state.Queue {
	sw := &plans.Sweep{Name: "s", Order: plans.FIFO}
	params := map[int64]*plans.Map{}
	for i, r := range rs {
		p, ok := params[r.Memory]
		if !ok {
			p = plans.NewMap()
			p.Set("memory", r.Memory)
			params[r.Memory] = p
		}
		sw.Jobs = append(sw.Jobs, plans.Job{Index: i + 1, ID: r.Job, Params: p, Memory: r.Memory, GPUsPerJob: max(r.GPUsPerJob, 1)})
	}
	st, err := state.NewStore()
	if err == nil {
		err = st.Submit(&state.Submission{Sweep: sw})
	}
	if err != nil {
		b.Fatal(err)
	}
	return st.Queue()
}

// offers is a store's queue as the engine offers it to Place.
type offers struct {
	c       *state.Cursor
	request func(*state.Group, state.Member) pack.Request
}

func (o offers) Next(room int64) (pack.Request, bool) {
	g, m, ok := o.c.NextUpTo(room)
	if !ok {
		return pack.Request{}, false
	}
	return o.request(g, m), true
}

func (o offers) Pass() { o.c.Pass() }
