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
// times learned duration, a job measured to keep a card's compute as busy as the
// sharing target counting as the whole card (the largest, as SetCards tells it); ties
// in submission order. A shape whose duration is not learned yet counts the mean of
// those that are, or as long as its longest running job has run, if that is longer
// (memory alone decides until a duration is learned): so the copies of a long shape
// are not left for the end of the sweep, where a long job runs on alone, while the
// first of them runs. Counting such a shape as long as
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
	// likes holds a job for each set of what keyOf reads of a job (see Member), which
	// the members of the groups point to: a shape's change finds a new key once for
	// each of them rather than once for each job. liked is how many were in use when
	// they were last counted (see sweepLikes).
	likes map[likeness]*Job
	liked int
	// card is the largest card's memory and target the sharing target (0: none), which
	// weigh reads a job's share of a card by (see SetCards); card 0: not told.
	card   int64
	target float64
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
	// like is a job alike in all that keyOf reads (see Queue.likes), under any
	// version of its shape: the job as it was when it joined, or another.
	like *Job
}

// likeness is what keyOf reads of a job, but its shape's record: jobs alike in it are
// in the same group under any version of their shape. A field keyOf comes to read
// belongs here, or a shape's change regroups jobs by what the field was in another job.
type likeness struct {
	Shape                                        string
	GPUs, Priority                               int
	Exclusive, Probe, Queued                     bool
	Timeout                                      time.Duration
	Declared, HostMemory, Estimate, HostEstimate int64
	EstimatedAt                                  uint64
}

func likenessOf(j *Job) likeness {
	return likeness{Shape: j.Shape, GPUs: j.GPUsPerJob, Priority: j.Priority, Exclusive: j.Pos.Exclusive,
		Probe: j.Probe, Queued: j.State == JobQueued, Timeout: j.Timeout.After, Declared: j.Declared,
		HostMemory: j.HostMemory, Estimate: j.Estimate, HostEstimate: j.HostEstimate, EstimatedAt: j.EstimatedAt}
}

// member is j as a member of its group.
func (q *Queue) member(j *Job) Member {
	k := likenessOf(j)
	like := q.likes[k]
	if like == nil {
		if len(q.likes) >= max(2*q.liked, 1024) {
			q.sweepLikes()
		}
		like = j
		q.likes[k] = like
	}
	return Member{j.Seq, j.ID, like}
}

// sweepLikes forgets the likes no waiting job points to, once there are twice as many
// as were in use when last counted: a pass over the queue for as many likes made.
func (q *Queue) sweepLikes() {
	used := make(map[*Job]bool, q.liked)
	for _, g := range q.groups {
		var last *Job
		for _, m := range g.jobs[g.off:] {
			if m.like != last {
				used[m.like], last = true, m.like
			}
		}
	}
	for k, like := range q.likes {
		if !used[like] {
			delete(q.likes, k)
		}
	}
	q.liked = len(q.likes)
}

func newQueue() *Queue {
	return &Queue{groups: map[GroupKey]*Group{}, at: map[string]*Group{}, shapes: map[string][]*Group{}, took: map[string]time.Duration{}, known: map[string]*Shape{}, fifo: map[string]bool{}, sweeps: map[string]int{}, likes: map[likeness]*Job{}}
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
	k, m := key(j), q.member(j)
	if was {
		if g.Key == k {
			g.liken(m)
			return
		}
		q.remove(g, j.Seq)
	}
	q.add(k, j.Sweep, m)
}

// liken points g's member m.Seq to m's like: the job changed, not its group.
func (g *Group) liken(m Member) {
	live := g.jobs[g.off:]
	if at, found := slices.BinarySearchFunc(live, m.Seq, func(m Member, seq uint64) int { return cmp.Compare(m.Seq, seq) }); found {
		live[at].like = m.like
	}
}

// changeAll is change for the jobs of one write, the last version of a job counting:
// where a write moves many jobs of a group (a sweep held, released, cancelled or
// retried), the group's members are taken out and put in in one pass over it, rather
// than one shift of the group for each, which made a sweep of 100,000 jobs quadratic.
func (q *Queue) changeAll(jobs []*Job, key func(*Job) GroupKey) {
	if len(jobs) <= mergeAbove {
		for _, j := range jobs {
			q.change(j, key)
		}
		return
	}
	last := make(map[string]int, len(jobs))
	for i, j := range jobs {
		last[j.ID] = i
	}
	out := map[*Group][]uint64{}   // members leaving each group, by submission order
	in := map[GroupKey]*arrivals{} // jobs joining each group
	for i, j := range jobs {
		if last[j.ID] != i {
			continue
		}
		g, was := q.at[j.ID]
		waits := j.Waiting()
		var k GroupKey
		var m Member
		if waits {
			if k, m = key(j), q.member(j); was && g.Key == k {
				g.liken(m)
				continue
			}
		}
		if was {
			out[g] = append(out[g], j.Seq)
		}
		if waits {
			a := in[k]
			if a == nil {
				a = &arrivals{sweep: j.Sweep}
				in[k] = a
			}
			a.members = append(a.members, m)
		}
	}
	for g, seqs := range out {
		q.removeAll(g, seqs)
	}
	for k, a := range in {
		q.addAll(k, a.sweep, a.members)
	}
}

// mergeAbove is how many changes of a write, or of a group, are made one by one: a
// round's few cost less so than a pass over their groups.
const mergeAbove = 8

// arrivals are the jobs of a sweep that join a group in one write.
type arrivals struct {
	sweep   string
	members []Member
}

// removeAll takes the members of submission orders seqs out of their group g.
func (q *Queue) removeAll(g *Group, seqs []uint64) {
	slices.Sort(seqs)
	// The first of a group (a round starts them) go one by one: each is its head.
	for len(seqs) > 0 && g.len() > 0 && seqs[0] == g.head().Seq {
		q.remove(g, seqs[0])
		seqs = seqs[1:]
	}
	if len(seqs) <= mergeAbove {
		for _, seq := range seqs {
			q.remove(g, seq)
		}
		return
	}
	live := g.jobs[g.off:]
	head := live[0].Seq
	kept := live[:0]
	for _, m := range live {
		if _, found := slices.BinarySearch(seqs, m.Seq); found {
			delete(q.at, m.ID)
			continue
		}
		kept = append(kept, m)
	}
	removed := len(live) - len(kept)
	g.jobs, g.off = slices.Clone(kept), 0 // the old array, as long as before, goes
	q.n -= removed
	if q.sweeps[g.Sweep] -= removed; q.sweeps[g.Sweep] == 0 {
		delete(q.sweeps, g.Sweep)
	}
	if g.len() == 0 || g.head().Seq != head {
		q.move(g)
	}
	q.dropIfEmpty(g)
}

// addAll puts members of a sweep in the group of key k.
func (q *Queue) addAll(k GroupKey, sweep string, members []Member) {
	if len(members) <= mergeAbove {
		for _, m := range members {
			q.add(k, sweep, m)
		}
		return
	}
	g := q.group(k, sweep)
	slices.SortFunc(members, func(a, b Member) int { return cmp.Compare(a.Seq, b.Seq) })
	live := g.jobs[g.off:]
	if len(live) > 0 && members[0].Seq > live[len(live)-1].Seq {
		// All after the group's last (a sweep released or retried in order): appended.
		for _, m := range members {
			q.at[m.ID] = g
		}
		g.jobs = append(g.jobs, members...)
		q.n += len(members)
		q.sweeps[sweep] += len(members)
		return
	}
	was := len(live) > 0
	var head uint64
	if was {
		head = live[0].Seq
	}
	merged := make([]Member, 0, len(live)+len(members))
	for len(live) > 0 || len(members) > 0 {
		if len(members) == 0 || len(live) > 0 && live[0].Seq < members[0].Seq {
			merged, live = append(merged, live[0]), live[1:]
			continue
		}
		merged, members = append(merged, members[0]), members[1:]
	}
	added := len(merged) - g.len()
	for _, m := range merged {
		q.at[m.ID] = g
	}
	g.jobs, g.off = merged, 0
	if !was || g.head().Seq != head {
		q.move(g)
	}
	q.n += added
	q.sweeps[sweep] += added
}

// regroup moves the waiting jobs of shape l to the groups they are in now that l
// changed their estimates, finding the new key once for each like (see Member) of a
// group's members. A group all of whose jobs move to a key that no group holds and no
// other group gives jobs to, while no job moves to its own key, is renamed: as the moves
// one by one below would leave it, without a move for each job (when a fleet's shapes
// learned their peaks, moving their million jobs so took 1.5 s).
func (q *Queue) regroup(l *Shape) {
	keys := map[*Job]GroupKey{}
	keyOfLike := func(like *Job) GroupKey {
		k, ok := keys[like]
		if !ok {
			k = keyOf(like, l)
			keys[like] = k
		}
		return k
	}
	gs := q.shapes[l.Name]
	tos := make([][]GroupKey, len(gs)) // the keys each group's jobs move to
	kept := make([]bool, len(gs))      // whether some of its jobs stay
	given := map[GroupKey]int{}        // how many groups give jobs to each key
	for i, g := range gs {
		var last *Job
		for _, m := range g.jobs[g.off:] {
			if m.like == last {
				continue
			}
			last = m.like
			switch k := keyOfLike(m.like); {
			case k == g.Key:
				kept[i] = true
			case !slices.Contains(tos[i], k):
				tos[i] = append(tos[i], k)
				given[k]++
			}
		}
	}
	var moves []jobMove
	for i, g := range gs {
		switch to := tos[i]; {
		case len(to) == 0:
			continue
		case len(to) == 1 && !kept[i] && given[to[0]] == 1 && given[g.Key] == 0 && q.groups[to[0]] == nil:
			q.rename(g, to[0])
			continue
		}
		for _, m := range g.jobs[g.off:] {
			if k := keyOfLike(m.like); k != g.Key {
				moves = append(moves, jobMove{g, k, m})
			}
		}
	}
	q.moveOneByOne(moves)
}

// jobMove is a waiting job m leaving its group from for the group of key to.
type jobMove struct {
	from *Group
	to   GroupKey
	m    Member
}

// moveOneByOne makes the moves in submission order: each job leaves its group from the
// front, and joins its new one at the end.
func (q *Queue) moveOneByOne(moves []jobMove) {
	slices.SortFunc(moves, func(a, b jobMove) int { return cmp.Compare(a.m.Seq, b.m.Seq) })
	for _, mv := range moves {
		q.remove(mv.from, mv.m.Seq)
		q.add(mv.to, mv.from.Sweep, mv.m)
	}
}

// rename gives group g the key k that all its jobs move to, which no other job takes:
// it stands for the group that moving them one by one would make, new (no time run,
// see RanFor) and theirs alone.
func (q *Queue) rename(g *Group, k GroupKey) {
	delete(q.groups, g.Key)
	// Sort finds it in ranked by its priority, which a shape's change leaves as it is.
	g.Key, g.took, g.ran = k, q.took[k.Shape], 0
	q.groups[k] = g
	q.groupsChanged = true
	q.move(g)
}

func (q *Queue) add(k GroupKey, sweep string, m Member) {
	g := q.group(k, sweep)
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

// group returns the group of key k, made for a job of sweep if there is none.
func (q *Queue) group(k GroupKey, sweep string) *Group {
	g := q.groups[k]
	if g == nil {
		g = &Group{Key: k, Sweep: sweep, took: q.took[k.Shape], fifo: q.fifo[sweep]}
		q.groups[k] = g
		q.shapes[k.Shape] = append(q.shapes[k.Shape], g)
		q.groupsChanged = true
	}
	return g
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
	q.dropIfEmpty(g)
}

// dropIfEmpty forgets a group that has no member left.
func (q *Queue) dropIfEmpty(g *Group) {
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
// its order, its shapes' durations and its jobs' likes. A shape's name begins with its
// sweep's and a NUL.
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
	for k := range q.likes {
		if strings.HasPrefix(k.Shape, sweep+"\x00") {
			delete(q.likes, k)
		}
	}
}

// SetCards tells the queue the largest card's memory and the sharing target (0: none),
// by which it weighs a job's share of a card.
func (q *Queue) SetCards(card int64, target float64) {
	if card != q.card || target != q.target {
		q.card, q.target, q.resort = card, target, true
	}
}

// learned takes what the store holds of a shape now.
func (q *Queue) learned(l *Shape) {
	was, _ := q.known[l.Name].PackUtil()
	q.known[l.Name] = l
	if now, _ := l.PackUtil(); now != was {
		for _, g := range q.shapes[l.Name] {
			q.move(g)
		}
	}
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
	share := float64(max(g.Key.Estimate, 1))
	if q.card > 0 {
		// What it takes of a card: its memory, or all of it where its compute leaves
		// no room for another job's. Counting its compute share always (the larger of
		// the two) ended compute-light 14% later: it reordered sweeps of light jobs
		// that share by compute, where memory's order packs them better.
		share /= float64(q.card)
		if u, ok := q.known[g.Key.Shape].PackUtil(); ok && q.target > 0 && u >= q.target {
			share = max(share, 1)
		}
	}
	return share * float64(g.Key.GPUs) * took.Seconds()
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
	// asks is what each of a group's jobs asks of a card, which NextUpTo compares with
	// its room; nil: its estimate (see Asking).
	asks func(*Group) int64
}

// Asking has NextUpTo compare what asks says a group's jobs ask of a card, rather than
// their estimate, and returns c.
func (c *Cursor) Asking(asks func(*Group) int64) *Cursor {
	c.asks = asks
	return c
}

// ask is what each of g's jobs asks of a card.
func (c *Cursor) ask(g *Group) int64 {
	if c.asks == nil {
		return g.Key.Estimate
	}
	return c.asks(g)
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
			if c.ask(e.g) <= room {
				c.last = e
				return e.g, e.g.jobs[e.at], true
			}
			continue
		}
		if g == nil {
			return nil, Member{}, false
		}
		c.next++
		if g.len() == 0 || c.ask(g) > room {
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
