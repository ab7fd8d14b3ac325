package state

import (
	"cmp"
	"container/heap"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/gpuq/gpuq/plans"
)

// The queue: the jobs that wait to start (queued, not held), kept by the store beside
// its tables and changed with them (see Store.insert). Jobs are grouped by all that the
// packer reads of them, so that a round offers each group's first job and passes over
// the rest of a group whose first job waits: a round reads what can change its
// decision, not the whole queue.
//
// The queue is the engine's: it is read and changed on the engine's goroutine only,
// as the store is written; readers elsewhere read the store's views.

// Queue is the waiting jobs in groups, and the order they are offered in: priority
// first (highest first); then, within a priority, the jobs of sweeps in fifo order in
// submission order, and the others largest first: by memory (per card, times cards)
// times learned duration; ties in submission order. A shape whose duration is not
// learned yet counts the mean of those that are, or as long as its longest running
// job has run, if that is longer (memory alone decides until a duration is learned):
// so the copies of a long shape are not left for the end of the sweep, where a long
// job runs on alone, while the first of them runs. Counting such a shape as long as
// the longest learned instead ended the generated traces a little sooner, but the
// seed sweep (gla) 15% later: its many copies of short, unknown shapes went before the
// known long ones.
type Queue struct {
	groups map[GroupKey]*Group
	shapes map[string][]*Group // the groups of each shape
	at     map[string]*Group   // the group of each waiting job, by id
	// ranked holds the groups in order, each by the weight and head it had when sort
	// last placed it; moved are the groups whose place may have changed since (new,
	// emptied, another head or weight), which sort places again. A round starts or
	// ends a few jobs of ~1,000 groups: sorting them all again every round cost more
	// than the rest of the queue's work. resort: every group's weight may have changed.
	ranked []*Group
	moved  []*Group
	resort bool
	// known is what the store holds of each shape, which the engine reads without a
	// lookup in a transaction (Store.KnownShape).
	known map[string]*Shape
	// took is each shape's learned duration; mean is their mean, found again by sort
	// once one has changed.
	took    map[string]time.Duration
	mean    time.Duration
	changed bool
	ranOn   []*Group        // the groups RanFor told how long their shape has run
	fifo    map[string]bool // sweeps whose jobs are offered in submission order
	n       int             // jobs
	sweeps  map[string]int  // jobs, by sweep
	// smallest and largest are the groups' extreme estimates, found again by Extremes
	// once groupsChanged.
	smallest, largest int64
	groupsChanged     bool
}

// GroupKey is what the packer reads of a waiting job, but its id and its place in
// the queue: jobs alike in it fit alike.
type GroupKey struct {
	Shape     string // which holds the sweep: its quota, its order
	Estimate  int64
	Host      int64
	GPUs      int
	Exclusive bool
	Probe     bool // memory: probe, the shape not measured yet
	Priority  int
	Timeout   time.Duration
}

// keyOf is the group of a waiting job, whose shape knows l (nil: nothing).
func keyOf(j *Job, l *Shape) GroupKey {
	est, host := estimateOf(j, l)
	return GroupKey{Shape: j.Shape, Estimate: est, Host: host, GPUs: max(j.GPUsPerJob, 1),
		Exclusive: j.Pos.Exclusive, Probe: j.Probe && est == 0, Priority: j.Priority, Timeout: j.Timeout.After}
}

// Group is waiting jobs alike, in submission order: jobs[off:].
type Group struct {
	Key   GroupKey
	Sweep string
	jobs  []Member
	off   int
	took  time.Duration // the shape's learned duration; 0 = none
	fifo  bool          // its sweep's jobs are offered in submission order
	ran   time.Duration // see RanFor
	// weight orders the group among others of its priority (see Queue), and seq is its
	// head's: what sort placed it in ranked by. ranked: it is there; moved: it is in
	// queue.moved.
	weight        float64
	seq           uint64
	ranked, moved bool
}

// Member is a job in a group.
type Member struct {
	Seq uint64
	ID  string
}

func newQueue() *Queue {
	return &Queue{groups: map[GroupKey]*Group{}, at: map[string]*Group{}, shapes: map[string][]*Group{}, took: map[string]time.Duration{}, known: map[string]*Shape{}, fifo: map[string]bool{}, sweeps: map[string]int{}}
}

// submitted tells the queue of a sweep before its jobs arrive.
func (q *Queue) submitted(sw *plans.Sweep) {
	if sw.Order == plans.FIFO {
		q.fifo[sw.Name] = true
	}
}

// change moves a job from the group it was in (if it waited) to the one it is in as
// j (if it waits); key finds a job's group.
func (q *Queue) change(j *Job, key func(*Job) GroupKey) {
	g, was := q.at[j.ID]
	if !j.Waiting() {
		if was {
			q.remove(g, j.Seq)
		}
		return
	}
	k := key(j)
	if was {
		if g.Key == k {
			return
		}
		q.remove(g, j.Seq)
	}
	q.add(k, j.Sweep, Member{j.Seq, j.ID})
}

// regroup moves the waiting jobs of a shape to the groups key finds for them now: its
// jobs' estimates changed.
func (q *Queue) regroup(shape string, key func(id string) GroupKey) {
	type move struct {
		from *Group
		to   GroupKey
		m    Member
	}
	var moves []move
	for _, g := range q.shapes[shape] {
		for _, m := range g.jobs[g.off:] {
			if k := key(m.ID); k != g.Key {
				moves = append(moves, move{g, k, m})
			}
		}
	}
	// In submission order: each leaves its group from the front, and joins its new
	// one at the end.
	slices.SortFunc(moves, func(a, b move) int { return cmp.Compare(a.m.Seq, b.m.Seq) })
	for _, mv := range moves {
		q.remove(mv.from, mv.m.Seq)
		q.add(mv.to, mv.from.Sweep, mv.m)
	}
}

func (q *Queue) add(k GroupKey, sweep string, m Member) {
	g := q.groups[k]
	if g == nil {
		g = &Group{Key: k, Sweep: sweep, took: q.took[k.Shape], fifo: q.fifo[sweep]}
		q.groups[k] = g
		q.shapes[k.Shape] = append(q.shapes[k.Shape], g)
		q.groupsChanged = true
	}
	live := g.jobs[g.off:]
	at, _ := slices.BinarySearchFunc(live, m.Seq, func(m Member, seq uint64) int { return cmp.Compare(m.Seq, seq) })
	if at == 0 && g.off > 0 {
		g.off--
		g.jobs[g.off] = m
	} else {
		g.jobs = slices.Insert(g.jobs, g.off+at, m)
	}
	if at == 0 { // a new head: the group's place may change
		q.move(g)
	}
	q.at[m.ID] = g
	q.n++
	q.sweeps[sweep]++
}

// remove takes the job of submission order seq out of its group g.
func (q *Queue) remove(g *Group, seq uint64) {
	live := g.jobs[g.off:]
	at, found := slices.BinarySearchFunc(live, seq, func(m Member, seq uint64) int { return cmp.Compare(m.Seq, seq) })
	if !found {
		return
	}
	delete(q.at, live[at].ID)
	if at == 0 {
		g.jobs[g.off] = Member{}
		g.off++
		if g.off > len(g.jobs)/2 {
			g.jobs = slices.Clip(slices.Delete(g.jobs, 0, g.off))
			g.off = 0
		}
		q.move(g)
	} else {
		g.jobs = slices.Delete(g.jobs, g.off+at, g.off+at+1)
	}
	q.n--
	if q.sweeps[g.Sweep]--; q.sweeps[g.Sweep] == 0 {
		delete(q.sweeps, g.Sweep)
	}
	if g.len() > 0 {
		return
	}
	delete(q.groups, g.Key)
	q.groupsChanged = true
	gs := q.shapes[g.Key.Shape]
	if i := slices.Index(gs, g); i >= 0 {
		gs = slices.Delete(gs, i, i+1)
	}
	if len(gs) == 0 {
		delete(q.shapes, g.Key.Shape)
	} else {
		q.shapes[g.Key.Shape] = gs
	}
}

// forget forgets what it knew of a sweep that ended and is forgotten (Store.Forget):
// its order and its shapes' durations. A shape's name begins with its sweep's and a NUL.
func (q *Queue) forget(sweep string) {
	delete(q.fifo, sweep)
	for shape := range q.took {
		if strings.HasPrefix(shape, sweep+"\x00") {
			delete(q.took, shape)
			q.changed, q.resort = true, true
		}
	}
	for shape := range q.known {
		if strings.HasPrefix(shape, sweep+"\x00") {
			delete(q.known, shape)
		}
	}
}

// learned takes what the store holds of a shape now.
func (q *Queue) learned(l *Shape) {
	q.known[l.Name] = l
	if l.Duration == q.took[l.Name] {
		return
	}
	if l.Duration > 0 {
		q.took[l.Name] = l.Duration
	} else {
		delete(q.took, l.Name)
	}
	for _, g := range q.shapes[l.Name] {
		g.took = l.Duration
		q.move(g)
	}
	q.changed = true
}

// RanFor tells the queue how long the running attempts have run, at the start of a
// round: a shape whose duration is not learned yet runs at least as long as its
// longest running attempt has.
func (q *Queue) RanFor(running []*Attempt, now time.Time) {
	for _, g := range q.ranOn {
		g.ran = 0
		q.move(g)
	}
	q.ranOn = q.ranOn[:0]
	for _, a := range running {
		if a.Expected > 0 {
			continue // its shape's duration was learned when it started
		}
		gs := q.shapes[a.Shape]
		if len(gs) == 0 || gs[0].took > 0 {
			continue
		}
		d := now.Sub(a.Started)
		for _, g := range gs {
			if g.ran == 0 {
				q.ranOn = append(q.ranOn, g)
			}
			g.ran = max(g.ran, d)
			q.move(g)
		}
	}
}

// Took is the group's shape's learned duration; 0 = none.
func (g *Group) Took() time.Duration { return g.took }

func (g *Group) len() int { return len(g.jobs) - g.off }

func (g *Group) head() Member { return g.jobs[g.off] }

// move notes that g's place in ranked may have changed.
func (q *Queue) move(g *Group) {
	if !g.moved {
		g.moved = true
		q.moved = append(q.moved, g)
	}
}

// sort puts the groups in the order their jobs are offered in (see Queue): it places
// again the groups that moved, or sorts them all when many did.
func (q *Queue) sort() {
	if q.changed {
		var sum time.Duration
		for _, d := range q.took {
			sum += d
		}
		mean := sum / time.Duration(max(len(q.took), 1))
		q.changed = false
		if mean != q.mean {
			q.mean = mean
			// The mean weighs the groups whose shape's duration is not learned.
			for _, g := range q.ranked {
				if g.took == 0 {
					q.move(g)
				}
			}
		}
	}
	if q.resort || len(q.moved) > len(q.ranked)/8 {
		q.sortAll()
		return
	}
	placing := q.moved[:0]
	for _, g := range q.moved {
		g.moved = false
		w, seq := q.weigh(g), uint64(0)
		if g.len() > 0 {
			seq = g.head().Seq
		}
		if g.ranked && g.len() > 0 && w == g.weight && seq == g.seq {
			continue
		}
		if g.ranked {
			// Found by the weight and head it was placed by, as every other group in
			// ranked is.
			i, _ := slices.BinarySearchFunc(q.ranked, g, q.rank)
			q.ranked = slices.Delete(q.ranked, i, i+1)
			g.ranked = false
		}
		if g.len() > 0 {
			g.weight, g.seq = w, seq
			placing = append(placing, g)
		}
	}
	for _, g := range placing {
		i, _ := slices.BinarySearchFunc(q.ranked, g, q.rank)
		q.ranked = slices.Insert(q.ranked, i, g)
		g.ranked = true
	}
	clear(q.moved)
	q.moved = q.moved[:0]
}

// sortAll sorts every group.
func (q *Queue) sortAll() {
	for _, g := range q.moved {
		g.moved = false
		if !g.ranked {
			q.ranked = append(q.ranked, g)
		}
	}
	clear(q.moved)
	q.moved = q.moved[:0]
	q.resort = false
	q.ranked = slices.DeleteFunc(q.ranked, func(g *Group) bool {
		g.ranked = g.len() > 0
		return !g.ranked
	})
	for _, g := range q.ranked {
		g.weight, g.seq = q.weigh(g), g.head().Seq
	}
	slices.SortFunc(q.ranked, q.rank)
}

// weigh is g's weight (see group).
func (q *Queue) weigh(g *Group) float64 {
	took := g.took
	if took == 0 && q.mean > 0 {
		took = max(q.mean, g.ran)
	}
	took = max(took, 1)
	// A job of unknown memory counts as one byte: after every job of known memory,
	// and by duration among its likes.
	return float64(max(g.Key.Estimate, 1)*int64(g.Key.GPUs)) * took.Seconds()
}

// rank orders two groups of ranked by the weight and head sort placed them by.
func (q *Queue) rank(a, b *Group) int { return q.compare(a, a.seq, b, b.seq) }

// compare orders two jobs of the queue, of groups a and b, by the queue's order.
func (q *Queue) compare(a *Group, aSeq uint64, b *Group, bSeq uint64) int {
	if c := cmp.Compare(b.Key.Priority, a.Key.Priority); c != 0 {
		return c
	}
	af, bf := a.fifo, b.fifo
	switch {
	case af && !bf:
		return -1
	case bf && !af:
		return 1
	case !af:
		if c := cmp.Compare(b.weight, a.weight); c != 0 {
			return c
		}
	}
	return cmp.Compare(aSeq, bSeq)
}

// Len is how many jobs wait.
func (q *Queue) Len() int { return q.n }

// Took is a shape's learned duration; 0 = none.
func (q *Queue) Took(shape string) time.Duration { return q.took[shape] }

// Extremes returns the smallest and the largest estimate of the waiting jobs; ok is
// false when none waits. They are found again only once a group has come or gone.
func (q *Queue) Extremes() (smallest, largest int64, ok bool) {
	if q.groupsChanged {
		q.smallest, q.largest = math.MaxInt64, 0
		for k := range q.groups {
			q.smallest, q.largest = min(q.smallest, k.Estimate), max(q.largest, k.Estimate)
		}
		q.groupsChanged = false
	}
	return q.smallest, q.largest, len(q.groups) > 0
}

// Larger returns the ids of the waiting jobs whose estimate is above room.
func (q *Queue) Larger(room int64) []string {
	var ids []string
	for k, g := range q.groups {
		if k.Estimate > room {
			for _, m := range g.jobs[g.off:] {
				ids = append(ids, m.ID)
			}
		}
	}
	return ids
}

// Cursor reads the queue in order, one job at a time: the groups in rank order, and a
// group's next job once its previous one was taken (not passed over).
type Cursor struct {
	q    *Queue
	next int        // the next group of ranked not read yet
	back cursorHeap // groups read whose next job is due again
	// last is the group Next read last, until Pass or the next Next; its g is
	// nil when there is none.
	last entry
	// admit says how many of a group's jobs may be read this round (math.MaxInt: all).
	admit func(*Group) int
}

// entry is a group being read: the position in jobs of its next job, and how many
// more of it may be read after that one.
type entry struct {
	g    *Group
	at   int
	left int
}

func (e *entry) seq() uint64 { return e.g.jobs[e.at].Seq }

// Cursor reads the queue from its start. admit, if not nil, limits what is read of a
// group.
func (q *Queue) Cursor(admit func(*Group) int) *Cursor {
	q.sort()
	return &Cursor{q: q, back: cursorHeap{q: q}, admit: admit}
}

// Next returns the next job and its group, or false.
func (c *Cursor) Next() (*Group, Member, bool) { return c.NextUpTo(math.MaxInt64) }

// NextUpTo returns the next job that asks at most room bytes per card, and its group,
// or false; it passes over the groups of the jobs that ask more.
func (c *Cursor) NextUpTo(room int64) (*Group, Member, bool) {
	if e := c.last; e.g != nil {
		c.last.g = nil
		if e.at++; e.at < len(e.g.jobs) && e.left > 0 {
			e.left--
			heap.Push(&c.back, e)
		}
	}
	for {
		// The earlier of the next group not read yet and the group read before whose
		// next job is due.
		var g *Group
		if c.next < len(c.q.ranked) {
			g = c.q.ranked[c.next]
		}
		back := c.back.entries
		if len(back) > 0 && (g == nil || c.q.compare(back[0].g, back[0].seq(), g, g.head().Seq) < 0) {
			e := heap.Pop(&c.back).(entry)
			if e.g.Key.Estimate <= room {
				c.last = e
				return e.g, e.g.jobs[e.at], true
			}
			continue
		}
		if g == nil {
			return nil, Member{}, false
		}
		c.next++
		if g.Key.Estimate > room || g.len() == 0 {
			continue
		}
		n := math.MaxInt
		if c.admit != nil {
			n = c.admit(g)
		}
		if n == 0 {
			continue
		}
		c.last = entry{g: g, at: g.off, left: n - 1}
		return g, g.head(), true
	}
}

// Pass drops the rest of the group of the job Next or NextUpTo returned last.
func (c *Cursor) Pass() { c.last.g = nil }

// cursorHeap is the groups a cursor has read some of, by their next job's place in
// the queue's order.
type cursorHeap struct {
	entries []entry
	q       *Queue
}

func (h cursorHeap) Len() int { return len(h.entries) }
func (h cursorHeap) Less(i, j int) bool {
	a, b := &h.entries[i], &h.entries[j]
	return h.q.compare(a.g, a.seq(), b.g, b.seq()) < 0
}
func (h cursorHeap) Swap(i, j int) { h.entries[i], h.entries[j] = h.entries[j], h.entries[i] }
func (h *cursorHeap) Push(x any)   { h.entries = append(h.entries, x.(entry)) }
func (h *cursorHeap) Pop() any {
	e := h.entries[len(h.entries)-1]
	h.entries = h.entries[:len(h.entries)-1]
	return e
}
