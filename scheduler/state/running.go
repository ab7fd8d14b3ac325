package state

import (
	"iter"
	"slices"
	"strings"
)

// runningSet is the attempts that hold cards, in the running index's order (by id), kept
// by the store beside the index and changed with it (see Store.insert), as the queue is:
// the engine reads them at least once every round, and a walk of memdb's index (an
// iterator over a transaction of the index, its tree's nodes visited one by one) cost
// more than the rest of reading them. Only the engine's goroutine may read it.
type runningSet []*Attempt

// put takes an attempt as it is now: in the set while it runs, out once it has ended.
func (r *runningSet) put(a *Attempt) {
	i, found := slices.BinarySearchFunc(*r, a.ID, func(x *Attempt, id string) int { return strings.Compare(x.ID, id) })
	switch {
	case found && a.Running():
		(*r)[i] = a
	case found:
		*r = slices.Delete(*r, i, i+1)
	case a.Running():
		*r = slices.Insert(*r, i, a)
	}
}

// RunningLen is how many attempts RunningNow yields, under the same terms.
func (s *Store) RunningLen() int { return len(s.running) }

// RunningNow yields the attempts that hold cards now, as Latest().EachRunning yields
// them (in order, with the batch in progress's writes), without reading the index. Only
// the engine's goroutine may call it, or a user of a store no engine runs on.
func (s *Store) RunningNow() iter.Seq[*Attempt] {
	return func(yield func(*Attempt) bool) {
		for _, a := range s.running {
			if !yield(a) {
				return
			}
		}
	}
}
