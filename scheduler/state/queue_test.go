package state

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuq/gpuq/plans"
)

// TestQueueOrder: within a priority, the largest jobs first, by memory times learned
// duration, or by memory until durations are learned, a job that keeps a card's compute
// as busy as the sharing target counting as the whole card; a fifo sweep's jobs in
// submission order.
func TestQueueOrder(t *testing.T) {
	const sweep = "name: q\ncommand: [echo]\n"
	tests := []struct {
		name   string
		sweeps []string
		took   map[string]time.Duration // learned, by task
		util   map[string]float64       // learned, by task
		card   int64                    // the largest card's memory, told the queue
		want   string
	}{
		{
			name:   "priority first, then the largest memory",
			sweeps: []string{sweep + "jobs:\n- {task: a, memory: 10GiB}\n- {task: b, memory: 16GiB}\n- {task: c, memory: 4GiB, priority: 5}\n"},
			want:   "q.3 q.2 q.1",
		},
		{
			// a: 10 GiB x 2h = 20 GiB.h; b: 16 GiB x 30m = 8 GiB.h.
			name:   "then memory times learned duration",
			sweeps: []string{sweep + "jobs:\n- {task: a, memory: 10GiB}\n- {task: b, memory: 16GiB}\n"},
			took:   map[string]time.Duration{"a": 2 * time.Hour, "b": 30 * time.Minute},
			want:   "q.1 q.2",
		},
		{
			// c counts the mean of a's and b's, 2h: 24 GiB.h, between b's 48 and a's 10.
			name:   "a shape not learned yet counts the mean of those that are",
			sweeps: []string{sweep + "jobs:\n- {task: a, memory: 10GiB}\n- {task: b, memory: 16GiB}\n- {task: c, memory: 12GiB}\n"},
			took:   map[string]time.Duration{"a": time.Hour, "b": 3 * time.Hour},
			want:   "q.2 q.3 q.1",
		},
		{
			// a: 2 GiB x 3h = 6 GiB.h; b: 8 GiB x 1h = 8 GiB.h.
			name:   "without the cards told, memory counts, whatever the compute",
			sweeps: []string{sweep + "jobs:\n- {task: a, memory: 2GiB}\n- {task: b, memory: 8GiB}\n"},
			took:   map[string]time.Duration{"a": 3 * time.Hour, "b": time.Hour},
			util:   map[string]float64{"a": 1, "b": 1},
			want:   "q.2 q.1",
		},
		{
			// Each runs alone, by compute: a takes a card 3h, b 1h.
			name:   "a job that fills a card's compute takes the whole card",
			sweeps: []string{sweep + "jobs:\n- {task: a, memory: 2GiB}\n- {task: b, memory: 8GiB}\n"},
			took:   map[string]time.Duration{"a": 3 * time.Hour, "b": time.Hour},
			util:   map[string]float64{"a": 1, "b": 1},
			card:   24 << 30,
			want:   "q.1 q.2",
		},
		{
			name:   "a job that shares a card's compute counts its memory",
			sweeps: []string{sweep + "jobs:\n- {task: a, memory: 2GiB}\n- {task: b, memory: 8GiB}\n"},
			took:   map[string]time.Duration{"a": 3 * time.Hour, "b": time.Hour},
			util:   map[string]float64{"a": 0.6, "b": 0.6},
			card:   24 << 30,
			want:   "q.2 q.1",
		},
		{
			name:   "a job of two cards counts both",
			sweeps: []string{sweep + "jobs:\n- {task: a, memory: 12GiB}\n- {task: b, memory: 8GiB, gpus_per_job: 2}\n"},
			want:   "q.2 q.1",
		},
		{
			name:   "ties in submission order",
			sweeps: []string{sweep + "matrix: {seed: [1, 2, 3]}\nmemory: 8GiB\n"},
			want:   "q.1 q.2 q.3",
		},
		{
			name:   "fifo: submission order",
			sweeps: []string{sweep + "order: fifo\njobs:\n- {task: a, memory: 4GiB}\n- {task: b, memory: 16GiB}\n- {task: c, memory: 8GiB, priority: 1}\n"},
			want:   "q.3 q.1 q.2",
		},
		{
			name: "within a priority, a fifo sweep's jobs before the others",
			sweeps: []string{sweep + "jobs:\n- {task: a, memory: 16GiB}\n",
				"name: f\ncommand: [echo]\norder: fifo\njobs:\n- {task: b, memory: 4GiB}\n- {task: c, memory: 2GiB}\n"},
			want: "f.1 f.2 q.1",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, err := NewStore()
			must(t, err)
			for i, doc := range tt.sweeps {
				sw, err := plans.DecodeSweep(fmt.Sprintf("s%d.yaml", i), []byte(doc), plans.Overrides{})
				must(t, err)
				must(t, st.Submit(&Submission{Sweep: sw}))
			}
			if tt.card > 0 {
				st.Queue().SetCards(tt.card, 1)
			}
			for _, j := range st.View().Jobs() {
				task, _ := j.Params.Get("task")
				if d := tt.took[fmt.Sprint(task)]; d > 0 {
					l := &Shape{Name: j.Shape, Duration: d, Runs: 1}
					if u, ok := tt.util[fmt.Sprint(task)]; ok {
						l.Util, l.UtilRuns = u, 1
					}
					must(t, st.Put(Change{Shapes: []*Shape{l}}))
				}
			}
			if got := strings.Join(ids(st.Queued()), " "); got != tt.want {
				t.Errorf("queue %s, want %s", got, tt.want)
			}
		})
	}
}

// TestQueueCountsWhatRuns: a shape whose duration is not learned yet counts at least
// as long as its longest running attempt has run.
func TestQueueCountsWhatRuns(t *testing.T) {
	st, _ := NewStore()
	sw, err := plans.DecodeSweep("q.yaml", []byte("name: q\ncommand: [echo]\njobs:\n- {task: a, memory: 10GiB}\n- {task: c, memory: 8GiB}\n"), plans.Overrides{})
	must(t, err)
	must(t, st.Submit(&Submission{Sweep: sw}))
	view := st.View()
	a, c := view.Job("q.1"), view.Job("q.2")
	must(t, st.Put(Change{Shapes: []*Shape{{Name: a.Shape, Duration: time.Hour, Runs: 1}}}))
	now := time.Now()
	for _, tt := range []struct {
		ran  time.Duration
		want string
	}{
		{0, "q.1 q.2"},             // c counts the mean, 1h: 8 GiB.h, after a's 10
		{3 * time.Hour, "q.2 q.1"}, // a job of its shape has run 3h: 24 GiB.h
	} {
		var running []*Attempt
		if tt.ran > 0 {
			running = []*Attempt{{ID: "x/1", Shape: c.Shape, Started: now.Add(-tt.ran)}}
		}
		st.queue.RanFor(running, now)
		if got := strings.Join(ids(st.Queued()), " "); got != tt.want {
			t.Errorf("a copy of c running for %v: queue %s, want %s", tt.ran, got, tt.want)
		}
	}
}

func ids(jobs []*Job) []string {
	out := make([]string, len(jobs))
	for i, j := range jobs {
		out[i] = j.ID
	}
	return out
}

// TestQueueFollowsTheStore: after any sequence of changes to jobs and shapes, and of
// how long the running attempts have run, the queue holds exactly the jobs that wait,
// in the order their priority, sweep order, memory, duration and submission give,
// however many changes come between two reads; and a cursor that passes over groups
// yields a job only if no job alike came before it and was passed over.
func TestQueueFollowsTheStore(t *testing.T) {
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 3))
		st, _ := NewStore()
		var b strings.Builder
		b.WriteString("name: s\ncommand: [echo]\njobs:\n")
		// Jobs of two tasks, many a group; or of a hundred, most of them learned: a
		// change of one moves a few of many groups.
		jobs, tasks := 40, 2
		if seed%4 >= 2 {
			jobs, tasks = 100, 100
		}
		for i := range jobs {
			// seed is not in a shape: jobs of one task share theirs.
			fmt.Fprintf(&b, "- {seed: %d, task: t%d, memory: %dGiB, priority: %d, gpus_per_job: %d}\n", i, r.IntN(tasks), 2*(1+r.IntN(2)), r.IntN(2), 1+r.IntN(2))
		}
		doc := b.String()
		if seed%2 == 0 {
			doc = strings.Replace(doc, "jobs:", "order: fifo\njobs:", 1)
		}
		sw, err := plans.DecodeSweep("s.yaml", []byte(doc), plans.Overrides{})
		must(t, err)
		must(t, st.Submit(&Submission{Sweep: sw}))
		for _, j := range st.View().Jobs() {
			if tasks > 2 && r.IntN(10) > 0 {
				must(t, st.Put(Change{Shapes: []*Shape{{Name: j.Shape, Duration: time.Duration(1+r.IntN(3)) * time.Hour, Runs: 1}}}))
			}
		}
		for range 60 {
			view := st.View()
			jobs := view.Jobs()
			c := *jobs[r.IntN(len(jobs))]
			l := Shape{Name: c.Shape}
			if known := view.Shape(c.Shape); known != nil {
				l = *known
			}
			switch r.IntN(7) {
			case 6:
				// Many jobs in one write, as a sweep held or released: the queue
				// follows them together (changeAll).
				must(t, st.Put(Change{Jobs: bulk(r, jobs)}))
				continue
			case 0:
				c.State = []JobState{JobQueued, JobRunning, JobSucceeded}[r.IntN(3)]
			case 1:
				c.Held = !c.Held
			case 2:
				// An estimate made for the job alone (a crowded-out retry), or one its
				// shape's next revision makes again.
				c.Estimate = int64(2*(1+r.IntN(3))) * gib
				c.EstimatedAt = l.Rev + uint64(r.IntN(2))
			case 3:
				l.Duration = time.Duration(r.IntN(3)) * time.Hour
				must(t, st.Put(Change{Shapes: []*Shape{&l}}))
				continue
			case 4:
				// The shape learns a peak: its queued jobs are estimated by it.
				l.Peak, l.Rev = int64(1+r.IntN(4))*gib, l.Rev+1
				must(t, st.Put(Change{Shapes: []*Shape{&l}}))
				continue
			}
			must(t, st.Put(Change{Jobs: []*Job{&c}}))
			if r.IntN(3) > 0 {
				continue // more changes before the queue is read
			}
			ran := runFor(r, st)
			if got, want := ids(st.Queued()), brute(st, seed%2 == 0, ran); !slices.Equal(got, want) {
				t.Fatalf("seed %d: queue %v, want %v", seed, got, want)
			}
		}
		want := brute(st, seed%2 == 0, runFor(r, st))
		// Read with a room that shrinks now and then, and pass over a random half of
		// the jobs read: the cursor reads what the full order holds but the jobs after
		// one passed over in its group, and those larger than the room.
		view := st.View()
		key := func(j *Job) GroupKey { return keyOf(j, view.Shape(j.Shape)) }
		cur := st.queue.Cursor(nil)
		passed := map[GroupKey]bool{}
		room, i := int64(math.MaxInt64), 0
		for {
			if r.IntN(5) == 0 {
				room = min(room, int64(2*(1+r.IntN(2)))*gib)
			}
			for ; i < len(want); i++ {
				j := view.Job(want[i])
				est, _ := view.Estimate(j)
				if k := key(j); !passed[k] && est > room {
					passed[k] = true
				}
				if !passed[key(j)] {
					break
				}
			}
			_, m, ok := cur.NextUpTo(room)
			if ok != (i < len(want)) || ok && m.ID != want[i] {
				t.Fatalf("seed %d: read %s (%v), want the job at %d of %v", seed, m.ID, ok, i, want)
			}
			if !ok {
				break
			}
			if r.IntN(2) == 0 {
				passed[key(view.Job(m.ID))] = true
				cur.Pass()
			}
			i++
		}
	}
}

// bulk is a write of many of jobs, in any order, each held or released, queued or
// not, and now and then one of them twice: its last version counts.
func bulk(r *rand.Rand, jobs []*Job) []*Job {
	var out []*Job
	for _, i := range r.Perm(len(jobs))[:mergeAbove+1+r.IntN(len(jobs)-mergeAbove)] {
		c := *jobs[i]
		switch r.IntN(3) {
		case 0:
			c.Held = !c.Held
		case 1:
			c.State = []JobState{JobQueued, JobRunning, JobSucceeded}[r.IntN(3)]
		}
		out = append(out, &c)
		if r.IntN(10) == 0 {
			again := c
			again.Held = !again.Held
			out = append(out, &again)
		}
	}
	return out
}

// runFor tells the queue, as a round does before it reads it, of up to two attempts
// running, of random shapes, for random times, and returns how long the longest of each
// shape not learned yet has run.
func runFor(r *rand.Rand, st *Store) map[string]time.Duration {
	view := st.View()
	jobs := view.Jobs()
	now := time.Now()
	var running []*Attempt
	ran := map[string]time.Duration{}
	for range r.IntN(3) {
		a := &Attempt{Shape: jobs[r.IntN(len(jobs))].Shape, Started: now.Add(-time.Duration(r.IntN(6)) * time.Hour)}
		if r.IntN(4) == 0 {
			a.Expected = time.Hour // its shape's duration was learned when it started
		}
		running = append(running, a)
		if l := view.Shape(a.Shape); a.Expected == 0 && (l == nil || l.Duration == 0) {
			ran[a.Shape] = max(ran[a.Shape], now.Sub(a.Started))
		}
	}
	st.queue.RanFor(running, now)
	return ran
}

// brute is the queue's order worked out from every job in the store, and how long the
// running attempts of each shape not learned yet have run.
func brute(st *Store, fifo bool, ran map[string]time.Duration) []string {
	view := st.View()
	took := map[string]time.Duration{}
	var sum time.Duration
	for _, j := range view.Jobs() {
		if l := view.Shape(j.Shape); l != nil && l.Duration > 0 && took[j.Shape] == 0 {
			took[j.Shape] = l.Duration
			sum += l.Duration
		}
	}
	weight := func(j *Job) float64 {
		d := took[j.Shape]
		if d == 0 && len(took) > 0 {
			d = max(sum/time.Duration(len(took)), ran[j.Shape])
		}
		d = max(d, 1)
		est, _ := view.Estimate(j)
		return float64(max(est, 1)*int64(max(j.GPUsPerJob, 1))) * d.Seconds()
	}
	var waiting []*Job
	for _, j := range view.Jobs() {
		if j.Waiting() {
			waiting = append(waiting, j)
		}
	}
	slices.SortFunc(waiting, func(a, b *Job) int {
		if c := cmp.Compare(b.Priority, a.Priority); c != 0 || fifo {
			return cmp.Or(c, cmp.Compare(a.Seq, b.Seq))
		}
		return cmp.Or(cmp.Compare(weight(b), weight(a)), cmp.Compare(a.Seq, b.Seq))
	})
	return ids(waiting)
}

// TestQueueFollowsManyJobsInOnePass: a write of many jobs of a group (a sweep of
// 100,000 held) costs about the same in any order. One shift of the group for each
// job, as when the jobs come in the order of their ids ("s.1", "s.10", "s.100", ...),
// was quadratic: 37 s for such a sweep, in the engine's loop.
func TestQueueFollowsManyJobsInOnePass(t *testing.T) {
	const n = 50_000
	jobs := make([]*Job, n)
	for i := range jobs {
		jobs[i] = &Job{Job: &plans.Job{ID: fmt.Sprintf("s.%d", i+1)}, Sweep: "s", Seq: uint64(i + 1),
			Status: Status{State: JobQueued, Shape: "s\x00", Estimate: gib}}
	}
	key := func(j *Job) GroupKey { return keyOf(j, nil) }
	held := func(order []*Job) time.Duration {
		q := newQueue()
		q.changeAll(jobs, key)
		out := make([]*Job, len(order))
		for i, j := range order {
			c := *j
			c.Held = true
			out[i] = &c
		}
		began := time.Now()
		q.changeAll(out, key)
		took := time.Since(began)
		if q.Len() != 0 {
			t.Fatalf("%d jobs wait after every one was held", q.Len())
		}
		q.changeAll(jobs, key) // released, in one pass too
		if q.Len() != n {
			t.Fatalf("%d jobs wait after every one was released, want %d", q.Len(), n)
		}
		return took
	}
	inOrder := held(jobs)
	byID := slices.Clone(jobs)
	slices.SortFunc(byID, func(a, b *Job) int { return strings.Compare(a.ID, b.ID) })
	scattered := held(byID)
	if scattered > 4*inOrder+100*time.Millisecond {
		t.Errorf("holding %d jobs in the order of their ids took %v, in submission order %v", n, scattered, inOrder)
	}
}

// TestQueueReordersWhenComputeIsLearned: a shape learned to fill a card's compute moves
// up the queue as soon as it is learned, as does every change of the cards told.
func TestQueueReordersWhenComputeIsLearned(t *testing.T) {
	st, err := NewStore()
	must(t, err)
	sw, err := plans.DecodeSweep("q.yaml", []byte("name: q\ncommand: [echo]\njobs:\n- {task: a, memory: 2GiB}\n- {task: b, memory: 8GiB}\n"), plans.Overrides{})
	must(t, err)
	must(t, st.Submit(&Submission{Sweep: sw}))
	st.Queue().SetCards(24<<30, 1)
	shapes := map[string]*Shape{}
	for _, j := range st.View().Jobs() {
		task, _ := j.Params.Get("task")
		d := map[string]time.Duration{"a": 3 * time.Hour, "b": time.Hour}[fmt.Sprint(task)]
		shapes[fmt.Sprint(task)] = &Shape{Name: j.Shape, Duration: d, Runs: 1}
		must(t, st.Put(Change{Shapes: []*Shape{shapes[fmt.Sprint(task)]}}))
	}
	order := func(when, want string) {
		t.Helper()
		if got := strings.Join(ids(st.Queued()), " "); got != want {
			t.Errorf("%s: queue %s, want %s", when, got, want)
		}
	}
	order("compute not measured: memory counts", "q.2 q.1")
	a := *shapes["a"]
	a.Util, a.UtilRuns = 1, 1
	must(t, st.Put(Change{Shapes: []*Shape{&a}}))
	order("a fills a card's compute", "q.1 q.2")
	st.Queue().SetCards(24<<30, 0)
	order("no sharing target: memory counts", "q.2 q.1")
}
