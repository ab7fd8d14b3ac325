package state

import (
	"fmt"
	"testing"

	"github.com/gpuq/gpuq/plans"
)

// BenchmarkRegroup measures a write of a shape that changes its jobs' estimates while
// they wait: a shape of n queued jobs learns its peak (learned: every job moves to one
// new group, as when a fleet's attempts come of age), or a floor that lifts some of
// its jobs' declared estimates (floor: jobs of four groups, two of them moving into a
// third). Each op is one such write; the next undoes it.
//
//	go test -run '^$' -bench Regroup -count 6 ./scheduler/state/
func BenchmarkRegroup(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprintf("learned/jobs=%d", n), func(b *testing.B) {
			benchRegroup(b, n, func(i int) *Shape {
				return &Shape{Peak: int64(10+i%2) * gib, Host: gib}
			})
		})
		b.Run(fmt.Sprintf("floor/jobs=%d", n), func(b *testing.B) {
			benchRegroup(b, n, func(i int) *Shape {
				return &Shape{Floor: int64(i%2) * 5 * gib}
			})
		})
	}
}

// benchRegroup puts n queued jobs of one shape, declared 2, 4, 6 and 8 GiB in turn,
// and times writes of shape(i) at revision i+1.
func benchRegroup(b *testing.B, n int, shape func(i int) *Shape) {
	st, err := NewStore()
	if err != nil {
		b.Fatal(err)
	}
	const name = "s\x00"
	jobs := make([]*Job, n)
	for i := range jobs {
		declared := int64(2+2*(i%4)) * gib
		jobs[i] = &Job{Job: &plans.Job{ID: fmt.Sprintf("s.%d", i+1)}, Sweep: "s", Seq: uint64(i + 1),
			Status: Status{State: JobQueued, Shape: name, Declared: declared, Estimate: declared}}
	}
	if err := st.Put(Change{Jobs: jobs}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := range b.N {
		l := shape(i)
		l.Name, l.Rev = name, uint64(i+1)
		if err := st.Put(Change{Shapes: []*Shape{l}}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if st.Queue().Len() != n {
		b.Fatalf("%d jobs wait, want %d", st.Queue().Len(), n)
	}
}
