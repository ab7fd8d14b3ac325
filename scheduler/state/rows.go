package state

import (
	"iter"
	"strings"

	"github.com/google/btree"
)

// rows is a table the store keeps beside go-memdb: its objects by id, in the order of
// their ids (as memdb's id index orders them), in a copy-on-write B-tree. In memdb's
// radix tree an object of a table with one a job (jobs, attempts) cost about 330 bytes
// (a node and a leaf, a new channel for each, and its key), and each write of it a new
// leaf and channel: the two were a third of a simulation's live heap at 100,000 jobs.
// Here an object is an entry of 24 bytes in a node of up to 31.
//
// Its zero value is an empty table (but see newTables). Only the store's writer writes
// it; a reader reads a frozen copy (frozen), which later writes do not change and which
// any number of goroutines may read at once.
type rows[T any] struct {
	t *btree.BTreeG[row[T]]
}

type row[T any] struct {
	id string
	o  T
}

// rowsDegree is the B-tree's: nodes of up to 31 entries, few enough that a write
// after a copy (frozen) copies little of each node on its path.
const rowsDegree = 16

func byRowID[T any](a, b row[T]) bool { return a.id < b.id }

// get returns the object with the id, if the table holds one.
func (r *rows[T]) get(id string) (T, bool) {
	if r.t == nil {
		var none T
		return none, false
	}
	got, ok := r.t.Get(row[T]{id: id})
	return got.o, ok
}

// put puts o in the table as the object with the id, in place of any before it.
func (r *rows[T]) put(id string, o T) {
	if r.t == nil {
		r.t = btree.NewG(rowsDegree, byRowID[T])
	}
	r.t.ReplaceOrInsert(row[T]{id, o})
}

// del takes the object with the id out of the table.
func (r *rows[T]) del(id string) {
	if r.t != nil {
		r.t.Delete(row[T]{id: id})
	}
}

// all yields the table's objects in the order of their ids.
func (r *rows[T]) all() iter.Seq[T] {
	return func(yield func(T) bool) {
		if r.t == nil {
			return
		}
		r.t.Ascend(func(x row[T]) bool { return yield(x.o) })
	}
}

// frozen returns the table as it is now, never changed after: the writer's next write
// to a node the two share copies it first. It costs no copy of its own.
func (r *rows[T]) frozen() rows[T] {
	if r.t == nil {
		return rows[T]{}
	}
	return rows[T]{r.t.Clone()}
}

// prefixed yields the objects whose ids begin with prefix, in the order of their ids.
func (r *rows[T]) prefixed(prefix string) iter.Seq[T] {
	return func(yield func(T) bool) {
		if r.t == nil {
			return
		}
		r.t.AscendGreaterOrEqual(row[T]{id: prefix}, func(x row[T]) bool {
			return strings.HasPrefix(x.id, prefix) && yield(x.o)
		})
	}
}

// tables are the store's own tables, beside memdb's: the two that hold an object a job.
type tables struct {
	jobs     rows[*Job]
	attempts rows[*Attempt]
}

// newTables returns empty tables whose trees exist: a view of the writer's tables
// (Store.Latest) shares them, and so reads what the batch writes after it was taken, as
// a read of memdb's write transaction does. (A zero table would get its tree at its
// first write, which such a view would not see.) frozen copies of them, and copies
// of those, have trees too.
func newTables() tables {
	return tables{rows[*Job]{btree.NewG(rowsDegree, byRowID[*Job])}, rows[*Attempt]{btree.NewG(rowsDegree, byRowID[*Attempt])}}
}

// frozen returns the tables as they are now, never changed after (see rows.frozen).
func (t *tables) frozen() tables { return tables{t.jobs.frozen(), t.attempts.frozen()} }
