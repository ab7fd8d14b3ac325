package state

import (
	"cmp"
	"slices"
	"strconv"
	"time"

	memdb "github.com/hashicorp/go-memdb"
)

// AllocQueue asks a batch system (Slurm) for allocations that start gpuq workers, while
// the queue holds work that no connected worker can run (gpuq alloc slurm). The
// allocator (package scheduler/alloc) decides and submits; the store keeps the queues
// and their allocations, journaled, so that a restarted daemon goes on tracking them.
type AllocQueue struct {
	ID          int
	GPUsPerNode int           // the cards each node brings; requested from Slurm
	Time        time.Duration // each allocation's time limit
	MaxAllocs   int           // allocations queued or running at once
	IdleTimeout time.Duration // a worker with nothing to do this long exits
	Args        []string      // more sbatch options, as the user gave them
	// GPUs and Plan are the workers' cards and plan (gpuq worker --gpus, --gpu-plan);
	// "": every card Slurm gives them, no slot limit.
	GPUs    string `json:",omitempty"`
	Plan    string `json:",omitempty"`
	Created time.Time
	// Removed: it asks for no more allocations; those it has are tracked to their end.
	Removed bool `json:",omitempty"`
	// Error is why its last submission failed (Slurm's own words), and when; it tries
	// again after a pause. Cleared by the next that succeeds.
	Error   string    `json:",omitempty"`
	ErrorAt time.Time `json:",omitempty"`
}

// AllocState is where an allocation is in its life, as gpuq sees it.
type AllocState string

// Allocation states.
const (
	AllocQueued  AllocState = "queued" // waiting in Slurm's queue
	AllocRunning AllocState = "running"
	AllocEnded   AllocState = "ended"
)

// Allocation is one batch job an AllocQueue submitted. One that ended is kept a while,
// then forgotten (Change.AllocationsGone; the allocator decides which, alloc.Forgotten).
type Allocation struct {
	ID    string // Slurm's job id
	Queue int
	State AllocState
	// Slurm is the state as Slurm names it (PENDING, RUNNING, COMPLETED, TIMEOUT...),
	// and Reason why it waits or how it ended, in Slurm's words.
	Slurm  string
	Reason string `json:",omitempty"`
	Nodes  string `json:",omitempty"` // the nodes it runs on, as Slurm lists them
	// Workers is the most of its workers that were connected at once.
	Workers   int `json:",omitempty"`
	Submitted time.Time
	Started   time.Time `json:",omitempty"`
	// Ends is when Slurm ends it while it runs (its time limit, as squeue last said),
	// and its workers with it; zero while it waits, or where Slurm said no end.
	Ends  time.Time `json:",omitzero"`
	Ended time.Time `json:",omitempty"`
}

// Active reports whether the allocation is queued or running.
func (a *Allocation) Active() bool { return a.State != AllocEnded }

// Tables of allocation queues and their allocations.
const (
	tableAllocQueues = "alloc_queues"
	tableAllocations = "allocations"
)

func allocTables() map[string]*memdb.TableSchema {
	return map[string]*memdb.TableSchema{
		// Queues by id: gpuq alloc list and remove, and the allocator's rounds.
		tableAllocQueues: {Name: tableAllocQueues, Indexes: map[string]*memdb.IndexSchema{
			indexID: {Name: indexID, Unique: true, Indexer: stringIndexer[*AllocQueue](func(q *AllocQueue) string { return strconv.Itoa(q.ID) })},
		}},
		// Allocations by Slurm's job id; few enough that readers scan them all.
		tableAllocations: {Name: tableAllocations, Indexes: map[string]*memdb.IndexSchema{
			indexID: {Name: indexID, Unique: true, Indexer: stringIndexer[*Allocation](func(a *Allocation) string { return a.ID })},
		}},
	}
}

// AllocQueues returns every allocation queue, removed ones included, by id.
func (sn View) AllocQueues() []*AllocQueue {
	qs := collect[*AllocQueue](sn.txn, tableAllocQueues, indexID)
	slices.SortFunc(qs, func(a, b *AllocQueue) int { return cmp.Compare(a.ID, b.ID) })
	return qs
}

// AllocQueue returns one allocation queue, or nil.
func (sn View) AllocQueue(id int) *AllocQueue {
	obj, err := sn.txn.First(tableAllocQueues, indexID, strconv.Itoa(id))
	if err != nil || obj == nil {
		return nil
	}
	return obj.(*AllocQueue)
}

// Allocations returns a queue's allocations in the order they were submitted.
func (sn View) Allocations(queue int) []*Allocation {
	var out []*Allocation
	for a := range each[*Allocation](sn.txn.Get, tableAllocations, indexID) {
		if a.Queue == queue {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, func(a, b *Allocation) int {
		return cmp.Or(a.Submitted.Compare(b.Submitted), cmp.Compare(len(a.ID), len(b.ID)), cmp.Compare(a.ID, b.ID))
	})
	return out
}
