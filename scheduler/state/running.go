package state

import (
	"iter"
	"maps"
	"slices"
	"strings"
)

// runningSet is the attempts that hold cards, in the running index's order (by id), kept
// by the store beside the index and changed with it (see Store.insert), as the queue is:
// the engine reads them at least once every round, and a walk of memdb's index (an
// iterator over a transaction of the index, its tree's nodes visited one by one) cost
// more than the rest of reading them. Only the engine's goroutine may read it.
type runningSet struct {
	sorted []*Attempt
	// pending are the writes since it was last read, in order: a round's thousands of
	// starts or rewrites (a fleet's) go in with one merge when it is next read, where
	// a shift of the set for each cost the round up to 0.3 s.
	pending []*Attempt
}

// put takes an attempt as it is now: in the set while it runs, out once it has ended.
func (r *runningSet) put(a *Attempt) { r.pending = append(r.pending, a) }

// now is the set with every write put in.
func (r *runningSet) now() []*Attempt {
	if len(r.pending) <= mergeAbove {
		for _, a := range r.pending {
			r.putOne(a)
		}
	} else {
		r.merge()
	}
	clear(r.pending)
	r.pending = r.pending[:0]
	return r.sorted
}

func (r *runningSet) putOne(a *Attempt) {
	i, found := slices.BinarySearchFunc(r.sorted, a.ID, func(x *Attempt, id string) int { return strings.Compare(x.ID, id) })
	switch {
	case found && a.Running():
		r.sorted[i] = a
	case found:
		r.sorted = slices.Delete(r.sorted, i, i+1)
	case a.Running():
		r.sorted = slices.Insert(r.sorted, i, a)
	}
}

// merge puts the pending writes in, each attempt's last counting, in one pass.
func (r *runningSet) merge() {
	last := make(map[string]*Attempt, len(r.pending))
	for _, a := range r.pending {
		last[a.ID] = a
	}
	news := slices.SortedFunc(maps.Values(last), func(a, b *Attempt) int { return strings.Compare(a.ID, b.ID) })
	merged := make([]*Attempt, 0, len(r.sorted)+len(news))
	old := r.sorted
	for len(old) > 0 || len(news) > 0 {
		c := -1
		switch {
		case len(old) == 0:
			c = 1
		case len(news) > 0:
			c = strings.Compare(old[0].ID, news[0].ID)
		}
		if c < 0 {
			merged, old = append(merged, old[0]), old[1:]
			continue
		}
		if c == 0 {
			old = old[1:]
		}
		if news[0].Running() {
			merged = append(merged, news[0])
		}
		news = news[1:]
	}
	r.sorted = merged
}

// RunningLen is how many attempts RunningNow yields, under the same terms.
func (s *Store) RunningLen() int { return len(s.running.now()) }

// RunningNow yields the attempts that hold cards now, as Latest().EachRunning yields
// them (in order, with the batch in progress's writes), without reading the index. Only
// the engine's goroutine may call it, or a user of a store no engine runs on.
func (s *Store) RunningNow() iter.Seq[*Attempt] {
	return func(yield func(*Attempt) bool) {
		for _, a := range s.running.now() {
			if !yield(a) {
				return
			}
		}
	}
}
