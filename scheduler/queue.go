package scheduler

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
// as the store is written; readers elsewhere read the store's snapshots.

// queue is the waiting jobs in groups, and the order they are offered in: priority
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
type queue struct {
	groups map[groupKey]*group
	shapes map[string][]*group // the groups of each shape
	at     map[string]*group   // the group of each waiting job, by id
	// ranked holds the groups in order, each by the weight and head it had when sort
	// last placed it; moved are the groups whose place may have changed since (new,
	// emptied, another head or weight), which sort places again. A round starts or
	// ends a few jobs of ~1,000 groups: sorting them all again every round cost more
	// than the rest of the queue's work. resort: every group's weight may have changed.
	ranked []*group
	moved  []*group
	resort bool
	// known is what the store holds of each shape, which the engine reads without a
	// lookup in a transaction (Store.shape).
	known map[string]*Shape
	// took is each shape's learned duration; mean is their mean, found again by sort
	// once one has changed.
	took    map[string]time.Duration
	mean    time.Duration
	changed bool
	ranOn   []*group        // the groups ranFor told how long their shape has run
	fifo    map[string]bool // sweeps whose jobs are offered in submission order
	n       int             // jobs
	sweeps  map[string]int  // jobs, by sweep
	// smallest and largest are the groups' extreme estimates, found again by extremes
	// once groupsChanged.
	smallest, largest int64
	groupsChanged     bool
}

// groupKey is what the packer reads of a waiting job, but its id and its place in
// the queue: jobs alike in it fit alike.
type groupKey struct {
	shape     string // which holds the sweep: its quota, its order
	estimate  int64
	host      int64
	gpus      int
	exclusive bool
	probe     bool // memory: probe, the shape not measured yet
	priority  int
	timeout   time.Duration
}

// keyOf is the group of a waiting job, whose shape knows l (nil: nothing).
func keyOf(j *Job, l *Shape) groupKey {
	est, host := estimateOf(j, l)
	return groupKey{shape: j.Shape, estimate: est, host: host, gpus: max(j.GPUsPerJob, 1),
		exclusive: j.Pos.Exclusive, probe: j.Probe && est == 0, priority: j.Priority, timeout: j.Timeout.After}
}

// group is waiting jobs alike, in submission order: jobs[off:].
type group struct {
	key   groupKey
	sweep string
	jobs  []member
	off   int
	took  time.Duration // the shape's learned duration; 0 = none
	fifo  bool          // its sweep's jobs are offered in submission order
	ran   time.Duration // see ranFor
	// weight orders the group among others of its priority (see queue), and seq is its
	// head's: what sort placed it in ranked by. ranked: it is there; moved: it is in
	// queue.moved.
	weight        float64
	seq           uint64
	ranked, moved bool
}

// member is a job in a group.
type member struct {
	seq uint64
	id  string
}

func newQueue() *queue {
	return &queue{groups: map[groupKey]*group{}, at: map[string]*group{}, shapes: map[string][]*group{}, took: map[string]time.Duration{}, known: map[string]*Shape{}, fifo: map[string]bool{}, sweeps: map[string]int{}}
}

// submitted tells the queue of a sweep before its jobs arrive.
func (q *queue) submitted(sw *plans.Sweep) {
	if sw.Order == plans.FIFO {
		q.fifo[sw.Name] = true
	}
}

// change moves a job from the group it was in (if it waited) to the one it is in as
// j (if it waits); key finds a job's group.
func (q *queue) change(j *Job, key func(*Job) groupKey) {
	g, was := q.at[j.ID]
	if !j.Waiting() {
		if was {
			q.remove(g, j.Seq)
		}
		return
	}
	k := key(j)
	if was {
		if g.key == k {
			return
		}
		q.remove(g, j.Seq)
	}
	q.add(k, j.Sweep, member{j.Seq, j.ID})
}

// regroup moves the waiting jobs of a shape to the groups key finds for them now: its
// jobs' estimates changed.
func (q *queue) regroup(shape string, key func(id string) groupKey) {
	type move struct {
		from *group
		to   groupKey
		m    member
	}
	var moves []move
	for _, g := range q.shapes[shape] {
		for _, m := range g.jobs[g.off:] {
			if k := key(m.id); k != g.key {
				moves = append(moves, move{g, k, m})
			}
		}
	}
	// In submission order: each leaves its group from the front, and joins its new
	// one at the end.
	slices.SortFunc(moves, func(a, b move) int { return cmp.Compare(a.m.seq, b.m.seq) })
	for _, mv := range moves {
		q.remove(mv.from, mv.m.seq)
		q.add(mv.to, mv.from.sweep, mv.m)
	}
}

func (q *queue) add(k groupKey, sweep string, m member) {
	g := q.groups[k]
	if g == nil {
		g = &group{key: k, sweep: sweep, took: q.took[k.shape], fifo: q.fifo[sweep]}
		q.groups[k] = g
		q.shapes[k.shape] = append(q.shapes[k.shape], g)
		q.groupsChanged = true
	}
	live := g.jobs[g.off:]
	at, _ := slices.BinarySearchFunc(live, m.seq, func(m member, seq uint64) int { return cmp.Compare(m.seq, seq) })
	if at == 0 && g.off > 0 {
		g.off--
		g.jobs[g.off] = m
	} else {
		g.jobs = slices.Insert(g.jobs, g.off+at, m)
	}
	if at == 0 { // a new head: the group's place may change
		q.move(g)
	}
	q.at[m.id] = g
	q.n++
	q.sweeps[sweep]++
}

// remove takes the job of submission order seq out of its group g.
func (q *queue) remove(g *group, seq uint64) {
	live := g.jobs[g.off:]
	at, found := slices.BinarySearchFunc(live, seq, func(m member, seq uint64) int { return cmp.Compare(m.seq, seq) })
	if !found {
		return
	}
	delete(q.at, live[at].id)
	if at == 0 {
		g.jobs[g.off] = member{}
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
	if q.sweeps[g.sweep]--; q.sweeps[g.sweep] == 0 {
		delete(q.sweeps, g.sweep)
	}
	if g.len() > 0 {
		return
	}
	delete(q.groups, g.key)
	q.groupsChanged = true
	gs := q.shapes[g.key.shape]
	if i := slices.Index(gs, g); i >= 0 {
		gs = slices.Delete(gs, i, i+1)
	}
	if len(gs) == 0 {
		delete(q.shapes, g.key.shape)
	} else {
		q.shapes[g.key.shape] = gs
	}
}

// forget forgets what it knew of a sweep that ended and is forgotten (Store.Forget):
// its order and its shapes' durations. A shape's name begins with its sweep's and a NUL.
func (q *queue) forget(sweep string) {
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
func (q *queue) learned(l *Shape) {
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

// ranFor tells the queue how long the running attempts have run, at the start of a
// round: a shape whose duration is not learned yet runs at least as long as its
// longest running attempt has.
func (q *queue) ranFor(running []*Attempt, now time.Time) {
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

func (g *group) len() int { return len(g.jobs) - g.off }

func (g *group) head() member { return g.jobs[g.off] }

// move notes that g's place in ranked may have changed.
func (q *queue) move(g *group) {
	if !g.moved {
		g.moved = true
		q.moved = append(q.moved, g)
	}
}

// sort puts the groups in the order their jobs are offered in (see queue): it places
// again the groups that moved, or sorts them all when many did.
func (q *queue) sort() {
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
			seq = g.head().seq
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
func (q *queue) sortAll() {
	for _, g := range q.moved {
		g.moved = false
		if !g.ranked {
			q.ranked = append(q.ranked, g)
		}
	}
	clear(q.moved)
	q.moved = q.moved[:0]
	q.resort = false
	q.ranked = slices.DeleteFunc(q.ranked, func(g *group) bool {
		g.ranked = g.len() > 0
		return !g.ranked
	})
	for _, g := range q.ranked {
		g.weight, g.seq = q.weigh(g), g.head().seq
	}
	slices.SortFunc(q.ranked, q.rank)
}

// weigh is g's weight (see group).
func (q *queue) weigh(g *group) float64 {
	took := g.took
	if took == 0 && q.mean > 0 {
		took = max(q.mean, g.ran)
	}
	took = max(took, 1)
	// A job of unknown memory counts as one byte: after every job of known memory,
	// and by duration among its likes.
	return float64(max(g.key.estimate, 1)*int64(g.key.gpus)) * took.Seconds()
}

// rank orders two groups of ranked by the weight and head sort placed them by.
func (q *queue) rank(a, b *group) int { return q.compare(a, a.seq, b, b.seq) }

// compare orders two jobs of the queue, of groups a and b, by the queue's order.
func (q *queue) compare(a *group, aSeq uint64, b *group, bSeq uint64) int {
	if c := cmp.Compare(b.key.priority, a.key.priority); c != 0 {
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

// extremes returns the smallest and the largest estimate of the waiting jobs; ok is
// false when none waits. They are found again only once a group has come or gone.
func (q *queue) extremes() (smallest, largest int64, ok bool) {
	if q.groupsChanged {
		q.smallest, q.largest = math.MaxInt64, 0
		for k := range q.groups {
			q.smallest, q.largest = min(q.smallest, k.estimate), max(q.largest, k.estimate)
		}
		q.groupsChanged = false
	}
	return q.smallest, q.largest, len(q.groups) > 0
}

// larger returns the ids of the waiting jobs whose estimate is above room.
func (q *queue) larger(room int64) []string {
	var ids []string
	for k, g := range q.groups {
		if k.estimate > room {
			for _, m := range g.jobs[g.off:] {
				ids = append(ids, m.id)
			}
		}
	}
	return ids
}

// cursor reads the queue in order, one job at a time: the groups in rank order, and a
// group's next job once its previous one was taken (not passed over).
type cursor struct {
	q    *queue
	next int        // the next group of ranked not read yet
	back cursorHeap // groups read whose next job is due again
	// last is the group nextJob read last, until pass or the next nextJob; its g is
	// nil when there is none.
	last entry
	// admit says how many of a group's jobs may be read this round (math.MaxInt: all).
	admit func(*group) int
}

// entry is a group being read: the position in jobs of its next job, and how many
// more of it may be read after that one.
type entry struct {
	g    *group
	at   int
	left int
}

func (e *entry) seq() uint64 { return e.g.jobs[e.at].seq }

// cursor reads the queue from its start. admit, if not nil, limits what is read of a
// group.
func (q *queue) cursor(admit func(*group) int) *cursor {
	q.sort()
	return &cursor{q: q, back: cursorHeap{q: q}, admit: admit}
}

// nextJob returns the next job and its group, or false.
func (c *cursor) nextJob() (*group, member, bool) { return c.nextUpTo(math.MaxInt64) }

// nextUpTo returns the next job that asks at most room bytes per card, and its group,
// or false; it passes over the groups of the jobs that ask more.
func (c *cursor) nextUpTo(room int64) (*group, member, bool) {
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
		var g *group
		if c.next < len(c.q.ranked) {
			g = c.q.ranked[c.next]
		}
		back := c.back.entries
		if len(back) > 0 && (g == nil || c.q.compare(back[0].g, back[0].seq(), g, g.head().seq) < 0) {
			e := heap.Pop(&c.back).(entry)
			if e.g.key.estimate <= room {
				c.last = e
				return e.g, e.g.jobs[e.at], true
			}
			continue
		}
		if g == nil {
			return nil, member{}, false
		}
		c.next++
		if g.key.estimate > room || g.len() == 0 {
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

// pass drops the rest of the group of the job nextJob returned last.
func (c *cursor) pass() { c.last.g = nil }

// cursorHeap is the groups a cursor has read some of, by their next job's place in
// the queue's order.
type cursorHeap struct {
	entries []entry
	q       *queue
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
