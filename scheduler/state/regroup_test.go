package state

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/gpuq/gpuq/plans"
)

// TestRegroupMovesAsOneByOne: after a shape's change, the queue holds its jobs in the
// groups, and the order, that moving them one by one gives (as regroup did before it
// moved whole groups, the reference below): with jobs alike or not in what their
// estimates are made of (declared, host memory, an estimate of their own made at some
// revision, probe), other shapes' jobs beside them, changes of jobs between the shape's,
// and peaks, host peaks and floors learned, grown, or lost.
func TestRegroupMovesAsOneByOne(t *testing.T) {
	renamed := 0
	for seed := range uint64(300) {
		r := rand.New(rand.NewPCG(seed, 29))
		pick := func(vs ...int64) int64 { return vs[r.IntN(len(vs))] }
		shapes := []string{"s\x00a", "s\x00b"}
		jobs := map[string]*Job{}
		var all []*Job
		for i := range 20 + r.IntN(200) {
			j := &Job{Job: &plans.Job{ID: fmt.Sprintf("s.%d", i+1), Probe: r.IntN(4) == 0, HostMemory: pick(0, gib),
				GPUsPerJob: 1 + r.IntN(2)*r.IntN(2), Priority: r.IntN(2) * r.IntN(2)},
				Sweep: "s", Seq: uint64(i + 1),
				Status: Status{State: JobQueued, Shape: shapes[r.IntN(4)/3], Declared: pick(0, 2*gib, 4*gib, 6*gib)}}
			j.Estimate, j.HostEstimate = j.Declared, j.HostMemory
			if r.IntN(8) == 0 { // an estimate of its own, made at some revision
				j.Estimate, j.HostEstimate, j.EstimatedAt = pick(3*gib, 5*gib), pick(0, 2*gib), uint64(r.IntN(4))
			}
			jobs[j.ID] = j
			all = append(all, j)
		}
		known := map[string]*Shape{}
		key := func(j *Job) GroupKey { return keyOf(j, known[j.Shape]) }
		q, ref := newQueue(), newQueue()
		q.changeAll(all, key)
		ref.changeAll(all, key)
		for rev := range uint64(4) {
			// Some jobs change, in what their estimates are made of or in whether they wait.
			for range r.IntN(6) {
				c := *all[r.IntN(len(all))]
				switch r.IntN(3) {
				case 0:
					c.Held = !c.Held
				case 1:
					c.Declared = pick(0, 2*gib, 4*gib, 6*gib)
				case 2:
					c.EstimatedAt = rev + 1
				}
				jobs[c.ID] = &c
				q.change(&c, key)
				ref.change(&c, key)
			}
			l := &Shape{Name: shapes[0], Rev: rev + 1, Peak: pick(0, 0, 3*gib, 5*gib), Host: pick(0, gib, 3*gib),
				Floor: pick(0, 0, 4*gib, 5*gib)}
			known[l.Name] = l
			for _, g := range slices.Collect(maps.Values(q.groups)) {
				g.ran = time.Hour // as RanFor leaves it: a group made by the moves has 0
			}
			for _, g := range slices.Collect(maps.Values(ref.groups)) {
				g.ran = time.Hour
			}
			was := map[*Group]GroupKey{}
			for k, g := range q.groups {
				was[g] = k
			}
			q.learned(l)
			ref.learned(l)
			q.regroup(l)
			regroupOneByOne(ref, l.Name, func(id string) GroupKey { return keyOf(jobs[id], l) })
			if got, want := queueState(q), queueState(ref); !reflect.DeepEqual(got, want) {
				t.Fatalf("seed %d, revision %d: regroup left\n%v\nwant, as one by one,\n%v", seed, rev+1, got, want)
			}
			for k, g := range q.groups {
				if w, ok := was[g]; ok && w != k {
					renamed++
				}
			}
		}
	}
	if renamed < 100 {
		t.Errorf("%d groups renamed, want the test to try more", renamed)
	}
	t.Logf("%d groups renamed", renamed)
}

// regroupOneByOne is regroup as it was, the reference: every job whose key changed
// leaves its group and joins its new one, one by one in submission order.
func regroupOneByOne(q *Queue, shape string, key func(id string) GroupKey) {
	var moves []jobMove
	for _, g := range q.shapes[shape] {
		for _, m := range g.jobs[g.off:] {
			if k := key(m.ID); k != g.Key {
				moves = append(moves, jobMove{g, k, m})
			}
		}
	}
	q.moveOneByOne(moves)
}

// queueState is what a queue shows of its jobs: each group's, with what orders it,
// each job's group, and the order a cursor reads them in.
func queueState(q *Queue) map[string]any {
	type group struct {
		IDs       []string
		Ran, Took time.Duration
		Fifo      bool
	}
	groups := map[GroupKey]group{}
	for k, g := range q.groups {
		gr := group{Ran: g.ran, Took: g.took, Fifo: g.fifo}
		for _, m := range g.jobs[g.off:] {
			gr.IDs = append(gr.IDs, m.ID)
		}
		groups[k] = gr
	}
	at := map[string]GroupKey{}
	for id, g := range q.at {
		at[id] = g.Key
	}
	shapes := map[string]int{}
	for s, gs := range q.shapes {
		shapes[s] = len(gs)
	}
	var order []string
	c := q.Cursor(nil)
	for _, m, ok := c.Next(); ok; _, m, ok = c.Next() {
		order = append(order, m.ID)
	}
	small, large, _ := q.Extremes()
	return map[string]any{"groups": groups, "at": at, "shapes": shapes, "order": order, "n": q.n,
		"sweeps": maps.Clone(q.sweeps), "extremes": [2]int64{small, large}}
}

// TestLikesOfJobsGoneAreForgotten: the likes no waiting job points to are forgotten
// once they are twice as many as were in use, so that jobs that waited alike in few
// ways but differently in many over time do not hold the queue's memory.
func TestLikesOfJobsGoneAreForgotten(t *testing.T) {
	q := newQueue()
	key := func(j *Job) GroupKey { return keyOf(j, nil) }
	job := func(i int) *Job {
		return &Job{Job: &plans.Job{ID: fmt.Sprintf("s.%d", i)}, Sweep: "s", Seq: uint64(i),
			Status: Status{State: JobQueued, Shape: "s\x00", Declared: int64(i) * gib, Estimate: int64(i) * gib}}
	}
	for i := range 1500 { // each its own like
		q.change(job(i+1), key)
	}
	for i := range 1500 {
		j := job(i + 1)
		j.Held = true
		q.change(j, key)
	}
	for i := range 600 {
		q.change(job(1501+i), key)
	}
	if n := len(q.likes); n > 1024 {
		t.Errorf("%d likes kept for 600 waiting jobs", n)
	}
	for _, g := range q.groups {
		for _, m := range g.jobs[g.off:] {
			if m.like.Declared != g.Key.Estimate {
				t.Fatalf("job %s declared %d points to a like declared %d", m.ID, g.Key.Estimate, m.like.Declared)
			}
		}
	}
}
