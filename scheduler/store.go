// Package scheduler is gpuq's brain: the job state, the packer that decides where queued
// jobs start, and the reasons a job waits.
package scheduler

import (
	"cmp"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"time"

	memdb "github.com/hashicorp/go-memdb"

	"github.com/gpuq/gpuq/plans"
)

// JobState is where a job is in its life.
type JobState string

// Job states.
const (
	JobQueued    JobState = "queued"
	JobRunning   JobState = "running"
	JobSucceeded JobState = "succeeded"
	JobFailed    JobState = "failed"
	JobCancelled JobState = "cancelled"
)

// Job is a job as the store holds it. Objects read from the store are never changed in
// place: copy, change, put.
type Job struct {
	plans.Job // as written: Params is tier 0
	Sweep     string
	Seq       uint64 // submission order across sweeps
	State     JobState
	Estimate  int64      // bytes per card the packer reserves; see Engine.estimate
	Current   *plans.Map // the parameters of its current tier
	// Shape names the jobs that share what is learned of memory: the current tier's
	// parameters less the sweep's shape_ignores.
	Shape string
	// Declared is the estimate as written for the current tier: the size, or the model's.
	Declared     int64
	HostEstimate int64          // host RAM bytes the packer reserves; 0 = unknown
	Pos          plans.Position // where it stands on its ladder
	// Retried is set when a crowded-out attempt at the current tier was retried.
	Retried  bool
	Attempts int
	Reason   string // why it failed, for people
}

// Attempt is one launch of a job.
type Attempt struct {
	ID       string // "<job>/<n>"
	Job      string
	Shape    string // the job's shape when it started
	N        int
	GPUs     []int // card indices
	Tier     int
	Params   *plans.Map
	Estimate int64 // per card, when it started
	// Reserve is what the packer holds for it on each card: its estimate, until what is
	// learned of its shape says otherwise. HostReserve is the same for host RAM.
	Reserve     int64
	HostReserve int64
	Leader      int   // the trainer's session leader; its session is the attempt's processes
	Peak        int64 // the most its processes held on one card, as NVML saw it
	// PeakUnknown: NVML could not tell some process's memory, so Peak may fall short
	// and teaches nothing.
	PeakUnknown bool
	HostPeak    int64 // the most its processes held of host RAM
	Started     time.Time
	Ended       time.Time
	Outcome     plans.Outcome // "" while running
	OOM         *plans.OOMFacts
	Log         string
}

// Shape is what gpuq has learned of one shape's memory.
type Shape struct {
	Name string
	Peak int64 // the most a finished or long-running attempt held on a card; 0 = none yet
	Host int64 // the same, of host RAM
	// Floor is what an out-of-memory end proved the shape needs.
	Floor int64
	// Probe is the job measuring the shape alone (memory: probe); "" when none.
	Probe string
}

// reserve is what the packer holds for a running attempt on each card.
func (a *Attempt) reserve() int64 {
	if a.Reserve > 0 {
		return a.Reserve
	}
	return a.Estimate
}

// Running reports whether the attempt still holds its cards.
func (a *Attempt) Running() bool { return a.Outcome == "" }

// Store is the in-memory state: jobs and attempts in go-memdb.
type Store struct {
	db  *memdb.MemDB
	seq uint64
}

// NewStore returns an empty store.
func NewStore() (*Store, error) {
	db, err := memdb.NewMemDB(schema())
	if err != nil {
		return nil, fmt.Errorf("state store: %w", err)
	}
	return &Store{db: db}, nil
}

// Submit adds a sweep's jobs to the queue.
func (s *Store) Submit(sw *plans.Sweep) error {
	txn := s.db.Txn(true)
	defer txn.Abort()
	for _, pj := range sw.Jobs {
		// Insert replaces an object with the same id; a resubmitted sweep must not
		// silently overwrite jobs that may be running.
		if old, err := txn.First(TableJobs, IndexID, pj.ID); err != nil || old != nil {
			return fmt.Errorf("sweep %q: job %s exists already: give the sweep another name", sw.Name, pj.ID)
		}
		s.seq++
		j := &Job{Job: pj, Sweep: sw.Name, Seq: s.seq, State: JobQueued, Estimate: pj.Memory, Current: pj.Params,
			Shape: sw.ShapeOf(pj.Params), Declared: pj.Memory, HostEstimate: pj.HostMemory}
		if err := txn.Insert(TableJobs, j); err != nil {
			return fmt.Errorf("sweep %q: job %s: %w", sw.Name, pj.ID, err)
		}
	}
	txn.Commit()
	return nil
}

// Put writes jobs and attempts in one transaction.
func (s *Store) Put(objs ...any) error {
	txn := s.db.Txn(true)
	defer txn.Abort()
	for _, o := range objs {
		table := TableJobs
		switch o.(type) {
		case *Attempt:
			table = TableAttempts
		case *Shape:
			table = TableShapes
		}
		if err := txn.Insert(table, o); err != nil {
			return fmt.Errorf("state store: %w", err)
		}
	}
	txn.Commit()
	return nil
}

// Snapshot is a consistent read of the store.
type Snapshot struct{ txn *memdb.Txn }

// Snapshot opens a read of the store as it is now; later writes do not show in it.
func (s *Store) Snapshot() Snapshot { return Snapshot{txn: s.db.Txn(false)} }

// Queue returns the queued jobs, highest priority first, then in submission order.
func (sn Snapshot) Queue() []*Job {
	return slices.Collect(sn.Queued())
}

// Queued yields the queued jobs in Queue's order, reading the store as it goes.
func (sn Snapshot) Queued() iter.Seq[*Job] {
	return each[*Job](sn.txn.Get, TableJobs, IndexQueue)
}

// QueuedOfShape yields the queued jobs of one shape, in submission order.
func (sn Snapshot) QueuedOfShape(shape string) iter.Seq[*Job] {
	return func(yield func(*Job) bool) {
		for j := range each[*Job](sn.txn.Get, TableJobs, IndexShape+"_prefix", shapeHash(shape)) {
			if j.Shape == shape && !yield(j) {
				return
			}
		}
	}
}

// Largest yields the queued jobs, largest estimate first.
func (sn Snapshot) Largest() iter.Seq[*Job] {
	return each[*Job](sn.txn.GetReverse, TableJobs, IndexSizes)
}

// Smallest returns the queued job with the smallest estimate, or nil when none is queued.
func (sn Snapshot) Smallest() *Job {
	obj, err := sn.txn.First(TableJobs, IndexSizes)
	if err != nil || obj == nil {
		return nil
	}
	return obj.(*Job)
}

// Jobs returns every job in submission order.
func (sn Snapshot) Jobs() []*Job {
	jobs := collect[*Job](sn.txn, TableJobs, IndexID)
	slices.SortFunc(jobs, func(a, b *Job) int { return cmp.Compare(a.Seq, b.Seq) })
	return jobs
}

// Job returns one job, or nil.
func (sn Snapshot) Job(id string) *Job {
	obj, err := sn.txn.First(TableJobs, IndexID, id)
	if err != nil || obj == nil {
		return nil
	}
	return obj.(*Job)
}

// Shape returns what is known of a shape, or nil.
func (sn Snapshot) Shape(name string) *Shape {
	obj, err := sn.txn.First(TableShapes, IndexID, name)
	if err != nil || obj == nil {
		return nil
	}
	return obj.(*Shape)
}

// Attempt returns one attempt, or nil.
func (sn Snapshot) Attempt(id string) *Attempt {
	obj, err := sn.txn.First(TableAttempts, IndexID, id)
	if err != nil || obj == nil {
		return nil
	}
	return obj.(*Attempt)
}

// Attempts returns a job's attempts in order.
func (sn Snapshot) Attempts(job string) []*Attempt {
	j := sn.Job(job)
	if j == nil {
		return nil
	}
	out := make([]*Attempt, 0, j.Attempts)
	for n := 1; n <= j.Attempts; n++ {
		if a := sn.Attempt(AttemptID(job, n)); a != nil {
			out = append(out, a)
		}
	}
	return out
}

// AttemptID names a job's nth attempt.
func AttemptID(job string, n int) string { return job + "/" + strconv.Itoa(n) }

// Running returns the attempts that hold cards.
func (sn Snapshot) Running() []*Attempt {
	return collect[*Attempt](sn.txn, TableAttempts, IndexRunning)
}

func collect[T any](txn *memdb.Txn, table, index string, args ...any) []T {
	return slices.Collect(each[T](txn.Get, table, index, args...))
}

func each[T any](get func(table, index string, args ...any) (memdb.ResultIterator, error), table, index string, args ...any) iter.Seq[T] {
	it, err := get(table, index, args...)
	if err != nil {
		// Only a schema mistake gets here: the tables and indexes are constants.
		panic(fmt.Sprintf("state store: %s.%s: %v", table, index, err))
	}
	return func(yield func(T) bool) {
		for obj := it.Next(); obj != nil; obj = it.Next() {
			if !yield(obj.(T)) {
				return
			}
		}
	}
}
