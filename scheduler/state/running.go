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

// all yields the attempts of the set.
func (r runningSet) all() iter.Seq[*Attempt] { return slices.Values(r) }

// putRunning puts an attempt in the store's set. The set views were given is never
// changed: the first change after it was given one is made to a copy.
func (s *Store) putRunning(a *Attempt) {
	if s.runningGiven {
		s.running = slices.Clone(s.running)
		s.runningGiven = false
	}
	s.running.put(a)
}

// publish commits a write transaction, and gives the views that begin after it the
// running set as it commits: both at once, so that no view reads the set of another
// transaction than its own.
func (s *Store) publish(commit func()) {
	s.views.Lock()
	defer s.views.Unlock()
	commit()
	s.published, s.runningGiven = s.running, true
}

// RunningLen is how many attempts RunningNow yields, under the same terms.
func (s *Store) RunningLen() int { return len(s.running) }

// RunningNow yields the attempts that hold cards now, as Latest().EachRunning yields
// them (in order, with the batch in progress's writes), without a view. Only the
// engine's goroutine may call it, or a user of a store no engine runs on.
func (s *Store) RunningNow() iter.Seq[*Attempt] { return s.running.all() }
