package scheduler

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkPack measures one packing decision over a queue of jobs of a few shapes (as a
// sweep's are) on a machine whose cards are partly busy.
func BenchmarkPack(b *testing.B) {
	for _, jobs := range []int{1_000, 10_000, 100_000} {
		for _, cards := range []int{8, 64, 512} {
			b.Run(fmt.Sprintf("jobs=%d/cards=%d", jobs, cards), func(b *testing.B) {
				r := rand.New(rand.NewPCG(1, 2))
				cs := make([]CardState, cards)
				for i := range cs {
					cs[i] = CardState{Index: i, Total: 24 * gib, Headroom: gib, Slots: 2, Running: r.IntN(2), Reserved: int64(r.IntN(12)) * gib}
				}
				q := make([]Request, jobs)
				for i := range q {
					q[i] = Request{Job: fmt.Sprintf("j%d", i), Memory: int64(6+2*r.IntN(4)) * gib, GPUs: 1}
				}
				b.ResetTimer()
				for range b.N {
					Pack(q, cs)
				}
			})
		}
	}
}
