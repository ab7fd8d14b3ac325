package state

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/gpuq/gpuq/plans"
)

// BenchmarkRegroup measures a write of a shape that changes its jobs' estimates while
// they wait: a shape of n queued jobs, all declared alike, learns its peak (learned:
// every job moves to one new group, as when a fleet's attempts come of age), or jobs
// declared 2, 4, 6 and 8 GiB in turn learn a floor of 5 GiB and lose it (floor: two
// groups merge into a third, then it splits in two again), one write an op.
//
//	go test -run '^$' -bench Regroup -count 6 ./scheduler/state/
func BenchmarkRegroup(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprintf("learned/jobs=%d", n), func(b *testing.B) {
			benchRegroup(b, n, 1, func(i int) *Shape {
				return &Shape{Peak: int64(10+i%2) * gib, Host: gib}
			})
		})
		b.Run(fmt.Sprintf("floor/jobs=%d", n), func(b *testing.B) {
			benchRegroup(b, n, 4, func(i int) *Shape {
				return &Shape{Floor: int64(1-i%2) * 5 * gib}
			})
		})
	}
}

// benchRegroup puts n queued jobs of one shape, declared 2, 4, ... GiB in turn up to
// 2*declared GiB, and times writes of shape(i) at revision i+1.
func benchRegroup(b *testing.B, n, declared int, shape func(i int) *Shape) {
	st, err := NewStore()
	if err != nil {
		b.Fatal(err)
	}
	const name = "s\x00"
	jobs := make([]*Job, n)
	for i := range jobs {
		est := int64(2+2*(i%declared)) * gib
		jobs[i] = &Job{Job: &plans.Job{ID: fmt.Sprintf("s.%d", i+1)}, Sweep: "s", Seq: uint64(i + 1),
			Status: Status{State: JobQueued, Shape: name, Declared: est, Estimate: est}}
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

// BenchmarkRunningStarts measures the running set taking a fleet's round of starts,
// as the store's writes put them in: 8,000 attempts started, read, then their ends,
// read; alone, and while the collector marks (as it does a fleet's 1.1 GB heap for
// 0.7 s, see the README), when every pointer a write moves goes through its barrier.
//
//	go test -run '^$' -bench RunningStarts -count 6 ./scheduler/state/
func BenchmarkRunningStarts(b *testing.B) {
	const n = 8000
	started, ended := make([]*Attempt, n), make([]*Attempt, n)
	for i := range started {
		job := fmt.Sprintf("s.%d", i+1)
		started[i] = &Attempt{ID: AttemptID(job, 1), Job: job, N: 1, GPUs: []int{i % 8}}
		e := *started[i]
		e.Outcome = plans.Success
		ended[i] = &e
	}
	for _, collecting := range []bool{false, true} {
		b.Run(fmt.Sprintf("collecting=%v", collecting), func(b *testing.B) {
			st, err := NewStore()
			if err != nil {
				b.Fatal(err)
			}
			if collecting {
				stop := keepCollecting()
				defer stop()
			}
			b.ResetTimer()
			for range b.N {
				for _, as := range [][]*Attempt{started, ended} {
					for _, a := range as {
						st.running.put(a)
					}
					st.RunningLen()
				}
			}
		})
	}
}

// keepCollecting keeps the collector marking a heap of a million pointers until stopped.
func keepCollecting() (stop func()) {
	heap := make([]*int, 1<<20)
	for i := range heap {
		heap[i] = new(int)
	}
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			select {
			case <-done:
				return
			default:
				runtime.GC()
			}
		}
	}()
	return func() {
		close(done)
		<-stopped
		runtime.KeepAlive(heap)
	}
}
