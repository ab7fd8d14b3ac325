package scheduler

import "github.com/gpuq/gpuq/scheduler/state"

// besides is what a call found of each of a list of attempts, kept for the next call,
// which is given most of the same attempts in the same order (the store's, by id): a
// round reads each of a fleet's tens of thousands of running attempts several times,
// and a map's look-up of each read their ids' strings from all over memory. Most are
// the very copies the last call was given, known as such without reading their ids;
// the others are found by id, beside where the last was.
type besides[T any] struct {
	last, next besideList[T]
	j          int // where in last the next attempt is looked for
}

// besideList is attempts, in order, and what was found of each.
type besideList[T any] struct {
	attempts []*state.Attempt
	found    []T
}

// begin starts a call, its list filled in the arrays of the call before last.
func (b *besides[T]) begin() {
	b.next.attempts, b.next.found, b.j = b.next.attempts[:0], b.next.found[:0], 0
}

// seek finds a in the last call's list: what was found of it then (ok), and whether a
// is the very copy it was given then (same). Where attempts come out of order (ghosts
// after the running), one that comes earlier than the last found is not found.
func (b *besides[T]) seek(a *state.Attempt) (found T, same, ok bool) {
	l := &b.last
	if b.j < len(l.attempts) && l.attempts[b.j] == a {
		b.j++
		return l.found[b.j-1], true, true
	}
	for b.j < len(l.attempts) && l.attempts[b.j].ID < a.ID {
		b.j++
	}
	if b.j < len(l.attempts) && l.attempts[b.j].ID == a.ID {
		b.j++
		return l.found[b.j-1], l.attempts[b.j-1] == a, true
	}
	return found, false, false
}

// add notes what this call found of a, next in its list.
func (b *besides[T]) add(a *state.Attempt, found T) {
	b.next.attempts, b.next.found = append(b.next.attempts, a), append(b.next.found, found)
}

// end ends the call: its list is the one the next call finds beside. It returns what
// it found of each, in an array the call after next fills again.
func (b *besides[T]) end() []T {
	b.last, b.next = b.next, b.last
	return b.last.found
}
