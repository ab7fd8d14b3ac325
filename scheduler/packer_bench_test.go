package scheduler

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/gpuq/gpuq/scheduler/pack"
)

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
			queue := queueOf(q)
			benchDecisions(b, func() {
				pack.Place(offers{c: queue.cursor(nil), request: func(g *group, m member) pack.Request {
					return pack.Request{Job: m.id, Memory: g.key.estimate, GPUsPerJob: g.key.gpus}
				}}, slices.Clone(cs), nil, smallest) // Place changes the cards it is given

			})
		})
	}
}

// queueOf is the store's queue of jobs that ask what the requests ask, in their order
// (of one priority, in fifo order).
func queueOf(rs []pack.Request) *queue {
	q := newQueue()
	q.fifo["s"] = true
	for i, r := range rs {
		k := groupKey{shape: fmt.Sprint(r.Memory), estimate: r.Memory, gpus: max(r.GPUsPerJob, 1)}
		q.add(k, "s", member{uint64(i + 1), r.Job})
	}
	return q
}
