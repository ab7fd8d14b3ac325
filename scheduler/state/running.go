package state

import (
	"iter"
	"slices"
	"strings"
)

// runningSet is the attempts that hold cards, by id, kept by the store as attempts are
// put (see Store.insert), as the queue is: the engine reads them at least once every
// round, and a walk of a memdb index of them cost more than the rest of reading them.
// Nor is there such an index: keeping one cost two writes to its tree for every
// attempt (its start and its end), a tenth of what a simulation allocates. A view reads
// the set as it was when the view's transaction began (see Store.publish).
type runningSet struct {
	sorted []*Attempt
	// pending are the writes since it was last read, in order: a round's thousands of
	// starts or rewrites (a fleet's) go in with one merge when it is next read, where
	// a shift of the set for each cost the round up to 0.3 s.
	pending []*Attempt
	// given: sorted is the set a view was given (see give), never changed since: the
	// first write after it goes to a copy.
	given bool
}

// put takes an attempt as it is now: in the set while it runs, out once it has ended.
func (r *runningSet) put(a *Attempt) { r.pending = append(r.pending, a) }

// now is the set with every write put in. Only the store's writer may call it.
func (r *runningSet) now() []*Attempt {
	switch {
	case len(r.pending) == 0:
		return r.sorted
	case len(r.pending) <= mergeAbove || r.rewritesOnly():
		if r.given {
			r.sorted, r.given = slices.Clone(r.sorted), false
		}
		for _, a := range r.pending {
			r.putOne(a)
		}
	default:
		r.merge()
	}
	clear(r.pending)
	r.pending = r.pending[:0]
	return r.sorted
}

// rewritesOnly reports whether every pending write is of an attempt in the set that
// still runs: each goes in its place, the set's order as it was. A fleet's round
// rewrites the reservations of each shape's few attempts in turn, 1,000 shapes, and
// read the set between two: a merge, a copy of all its thousands, each time.
func (r *runningSet) rewritesOnly() bool {
	for _, a := range r.pending {
		if !a.Running() {
			return false
		}
		if _, found := slices.BinarySearchFunc(r.sorted, a.ID, byID); !found {
			return false
		}
	}
	return true
}

// byID orders attempts by id, as the set is.
func byID(x *Attempt, id string) int { return strings.Compare(x.ID, id) }

// give is the set now, for a view: it is never changed after.
func (r *runningSet) give() []*Attempt {
	s := r.now()
	r.given = true
	return s
}

// drop takes out the attempts gone says are gone.
func (r *runningSet) drop(gone func(*Attempt) bool) {
	r.sorted, r.given = slices.DeleteFunc(slices.Clone(r.now()), gone), false
}

func (r *runningSet) putOne(a *Attempt) {
	i, found := slices.BinarySearchFunc(r.sorted, a.ID, byID)
	switch {
	case found && a.Running():
		r.sorted[i] = a
	case found:
		r.sorted = slices.Delete(r.sorted, i, i+1)
	case a.Running():
		r.sorted = slices.Insert(r.sorted, i, a)
	}
}

// merge puts the pending writes in, each attempt's last counting, in one pass, into a
// set of its own: the stretches of the set between two writes are copied whole, each
// write's place found by a binary search. Comparing each of a fleet's tens of
// thousands of running attempts with the next write took 2.4 ms of its every round.
func (r *runningSet) merge() {
	// In order of id, an attempt's writes in the order they came, the last kept: in
	// the array they came in, where a map of them cost a fleet 9 MB.
	slices.SortStableFunc(r.pending, func(a, b *Attempt) int { return strings.Compare(a.ID, b.ID) })
	news := r.pending[:0]
	for k, a := range r.pending {
		if k+1 == len(r.pending) || r.pending[k+1].ID != a.ID {
			news = append(news, a)
		}
	}
	merged := make([]*Attempt, 0, len(r.sorted)+len(news))
	old := r.sorted
	for _, a := range news {
		i, found := slices.BinarySearchFunc(old, a.ID, byID)
		merged = append(merged, old[:i]...)
		if found {
			i++ // this write replaces it
		}
		old = old[i:]
		if a.Running() {
			merged = append(merged, a)
		}
	}
	r.sorted, r.given = append(merged, old...), false
}

// publish commits a write transaction, and gives the views that begin after it the
// running set as it commits: both at once, so that no view reads the set of another
// transaction than its own.
func (s *Store) publish(commit func()) {
	s.views.Lock()
	defer s.views.Unlock()
	commit()
	s.published = s.running.give()
	s.committed = s.own.frozen()
}

// RunningLen is how many attempts RunningNow yields, under the same terms.
func (s *Store) RunningLen() int { return len(s.running.now()) }

// RunningNow yields the attempts that hold cards now, as Latest().EachRunning yields
// them (in order, with the batch in progress's writes), without a view. Only the
// engine's goroutine may call it, or a user of a store no engine runs on.
func (s *Store) RunningNow() iter.Seq[*Attempt] { return slices.Values(s.running.now()) }
