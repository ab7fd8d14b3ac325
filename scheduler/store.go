// Package scheduler is gpuq's brain: the job state, the packer that decides where queued
// jobs start, and the reasons a job waits.
package scheduler

import (
	"cmp"
	"errors"
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

// Told is the state as a sentence tells it of a job: "is queued", but "succeeded".
func (s JobState) Told() string {
	switch s {
	case JobSucceeded, JobFailed:
		return string(s)
	case JobCancelled:
		return "was cancelled"
	}
	return "is " + string(s)
}

// Job is a job as the store holds it. Objects read from the store are never changed in
// place: copy, change, put.
type Job struct {
	// As written: Params is tier 0. Shared with the sweep's, and by every version of the
	// job the store holds: never changed.
	*plans.Job
	Sweep string
	Seq   uint64 // submission order across sweeps
	Status
}

// Status is what changes of a job as it runs: what the journal records of it, the rest
// being rebuilt from its sweep.
type Status struct {
	State JobState
	// Estimate is the bytes per card the packer reserves (see estimate), and
	// HostEstimate the host RAM (0 = unknown), as they were made at revision
	// EstimatedAt of the job's shape. Once the shape has learned more (Shape.Rev), a
	// queued job's estimate is the shape's, as Snapshot.Estimate reads it: what a
	// shape learns is not written into each of its queued jobs.
	Estimate int64
	Current  *plans.Map // the parameters of its current tier
	// Shape names the jobs that share what is learned of memory: the current tier's
	// parameters less the sweep's shape_ignores.
	Shape string
	// Declared is the estimate as written for the current tier: the size, or the model's.
	Declared     int64
	HostEstimate int64
	EstimatedAt  uint64         `json:",omitempty"`
	Pos          plans.Position // where it stands on its ladder
	// Retried is set when a crowded-out attempt at the current tier was retried.
	Retried  bool
	Attempts int
	// Since is the number of attempts before the job was last put back in the queue by
	// a person (gpuq retry): oom.max_attempts counts the attempts after it.
	Since  int
	Held   bool   // a person holds it: it waits, queued, until released
	Reason string // why it failed, for people

	// Timeouts counts the attempts stopped for the job's timeout and started again.
	Timeouts int `json:",omitempty"`
}

// JobHeld is how a queued job that is held shows to people; in the store it is queued.
const JobHeld JobState = "held"

// ShownState is the job's state as people see it: a held queued job is "held".
func (j *Job) ShownState() JobState {
	if j.Held && j.State == JobQueued {
		return JobHeld
	}
	return j.State
}

// Waiting reports whether the packer may start the job: queued and not held.
func (j *Job) Waiting() bool { return j.State == JobQueued && !j.Held }

// Attempt is one launch of a job.
type Attempt struct {
	ID    string // "<job>/<n>"
	Job   string
	Shape string // the job's shape when it started
	N     int
	// Worker is the machine it runs on: "" for this one, or a gpuq worker's name.
	Worker   string `json:",omitempty"`
	GPUs     []int  // card indices on that machine
	Tier     int
	Params   *plans.Map
	Estimate int64 // per card, when it started
	// Reserve is what the packer holds for it on each card: its estimate, until what is
	// learned of its shape says otherwise. HostReserve is the same for host RAM.
	Reserve     int64
	HostReserve int64
	Leader      int   // the trainer's pid; its processes are told by what they inherit (Runner.Owner)
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

	// Timeout is how long it may run (its job's, when it started); 0 = no limit.
	Timeout time.Duration `json:",omitempty"`
	// TimedOut: the engine stopped it for running past its timeout.
	TimedOut bool `json:",omitempty"`
	// Alone: it runs alone on its cards (an exclusive rung, or a probe).
	Alone bool `json:",omitempty"`
	// Expected is how long it was expected to run when it started: its shape's learned
	// duration then; 0 = none was.
	Expected time.Duration `json:",omitempty"`
	// Memory is what its processes held over time, compactly (see Samples).
	Memory Samples `json:",omitempty"`
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
	// Duration is how long its attempts that succeeded ran: the mean of the first ten, then
	// a moving average that each later run moves a tenth of the way, so that it follows
	// a shape whose runs change (and a run as long as the average changes nothing). Runs
	// counts those runs, up to ten. 0 = none yet.
	Duration time.Duration `json:",omitempty"`
	Runs     int           `json:",omitempty"`
	// Rev counts the changes of Peak, Host and Floor: what the estimates of the
	// shape's jobs are made of (see Status.EstimatedAt).
	Rev uint64 `json:",omitempty"`
}

// rev is the shape's revision; that of a shape nothing is known of is 0.
func (l *Shape) rev() uint64 {
	if l == nil {
		return 0
	}
	return l.Rev
}

// estimateOf is what the packer reserves for a job, given what its shape l (nil:
// nothing) knows now: a queued job's estimate made at another revision of its shape
// is made again; otherwise the job's own.
func estimateOf(j *Job, l *Shape) (gpuBytes, host int64) {
	if j.State == JobQueued && j.EstimatedAt != l.rev() {
		return estimate(j, l)
	}
	return j.Estimate, j.HostEstimate
}

// merge takes in what an earlier record o knew of the same shape: peaks and floors
// only grow, so the larger of each holds. The probe is l's, the later word: one that
// ended cleared it under its own name.
func (l *Shape) merge(o *Shape) {
	l.Peak, l.Host, l.Floor = max(l.Peak, o.Peak), max(l.Host, o.Host), max(l.Floor, o.Floor)
	l.Rev = max(l.Rev, o.Rev)
}

// Where says where it runs, for people: "GPU [0 1]", or on a worker "node7 GPU [0]".
func (a *Attempt) Where() string { return plans.CardsOn(a.Worker, a.GPUs) }

// on reports whether the attempt runs on a card.
func (a *Attempt) on(c plans.CardID) bool {
	return a.Worker == c.Worker && slices.Contains(a.GPUs, c.Index)
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

// Drain marks a card that takes no new jobs (gpuq drain); its running jobs finish.
type Drain struct {
	Worker string `json:",omitempty"` // the card's machine; "" for this one
	GPU    int
	On     bool
}

// card is the card a Drain is about.
func (d *Drain) card() plans.CardID { return plans.CardID{Worker: d.Worker, Index: d.GPU} }

// Store is the in-memory state: submissions, jobs and attempts in go-memdb. Opened on a
// state directory (OpenState), it journals every change before committing it.
type Store struct {
	db *memdb.MemDB
	// seq and submitted number the jobs and the submissions in the order they came.
	seq, submitted uint64
	journal        *Journal
	// warn hears what a journaled store has to say that is not an error.
	warn func(string)
	// renamed, while a state is read, holds the shapes that records of an older gpuq
	// named otherwise (see canonicalShapes).
	renamed map[string]bool
	queue   *queue
	open    *memdb.Txn  // the transaction of the batch in progress; nil outside one
	reads   *batchReads // how the batch in progress looks objects up; nil outside one
	// batchReads is the one reads points to, kept from batch to batch.
	batchReads batchReads
}

// batchReads answers a batch's lookups by id without reading its write transaction:
// a read there copies the index's transaction and so makes memdb copy again, at its
// next write, every node it had copied for the batch (go-immutable-radix's
// Txn.Clone), which a round that reads and writes job after job paid at each. What
// the batch wrote of jobs, attempts and shapes is read from written, the rest from
// before.
type batchReads struct {
	before  *memdb.Txn // a read of the state the batch began from
	written map[batchKey]any
}

type batchKey struct{ table, id string }

// wrote notes an object a batch wrote, for its lookups.
func (r *batchReads) wrote(o any) {
	switch o := o.(type) {
	case *Job:
		r.written[batchKey{TableJobs, o.ID}] = o
	case *Attempt:
		r.written[batchKey{TableAttempts, o.ID}] = o
	case *Shape:
		r.written[batchKey{TableShapes, o.Name}] = o
	}
}

// NewStore returns an empty store that journals nothing.
func NewStore() (*Store, error) {
	db, err := memdb.NewMemDB(schema())
	if err != nil {
		return nil, fmt.Errorf("state store: %w", err)
	}
	// A copy of the database does not track which nodes of its trees each write
	// changes, for watches: nobody watches, and every write paid for it.
	return &Store{db: db.Snapshot(), queue: newQueue(), batchReads: batchReads{written: map[batchKey]any{}}}, nil
}

// Put writes jobs, attempts, shapes, drains and submissions' statuses in one
// transaction, journaled first. An error means the change did not take effect. A
// submission is put only to change its status (see Submit for a new one).
func (s *Store) Put(objs ...any) error {
	if s.journal != nil {
		if err := s.journal.Append(recordOf(objs)); err != nil {
			return err
		}
	}
	if err := s.commit(objs); err != nil {
		return err
	}
	return s.compactIfDue()
}

// compactIfDue compacts the journal once it has grown to compactAfter records, but
// not in a batch: the snapshot must hold what the journal does.
func (s *Store) compactIfDue() error {
	if s.journal != nil && s.journal.records >= compactAfter && s.open == nil {
		var cw *CannotWrite
		if err := s.compact(s.Snapshot()); errors.As(err, &cw) {
			// The change is in the journal, which grows until a snapshot can be written.
			s.journal.records = 0
			s.warn(fmt.Sprintf("%v; the journal grows until it can be", err))
		} else if err != nil {
			return err
		}
	}
	return nil
}

// Check writes an empty record to the journal: whether changes can be saved now.
func (s *Store) Check() error {
	if s.journal == nil {
		return nil
	}
	return s.journal.Append(Record{})
}

// batch gathers every write fn makes into one transaction, committed when fn returns;
// each is journaled as it is made, as always. Until then only the engine's reads
// (view) see them, not a Snapshot: the engine's goroutine is the one that writes, and
// a batch is one of its rounds.
func (s *Store) batch(fn func()) error {
	if s.open != nil { // a batch in a batch is the outer one's
		fn()
		return nil
	}
	s.open = s.db.Txn(true)
	s.reads = &s.batchReads
	clear(s.reads.written)
	s.reads.before = s.db.Txn(false)
	func() {
		defer func() {
			s.open.Commit()
			s.open, s.reads = nil, nil
		}()
		fn()
	}()
	return s.compactIfDue()
}

// Compact writes the whole state to the snapshot and empties the journal, so that the
// next start replays little; a no-op on a store that journals nothing.
func (s *Store) Compact() error {
	if s.journal == nil {
		return nil
	}
	return s.compact(s.Snapshot())
}

// Journaled reports whether the store journals its changes.
func (s *Store) Journaled() bool { return s.journal != nil }

// Close closes the journal.
func (s *Store) Close() error {
	if s.journal == nil {
		return nil
	}
	return s.journal.Close()
}

func (s *Store) commit(objs []any) error {
	return s.write(func(txn *memdb.Txn) error {
		for _, o := range objs {
			table := TableJobs
			switch o.(type) {
			case *Submission:
				table = TableSweeps
			case *Attempt:
				table = TableAttempts
			case *Shape:
				table = TableShapes
			case *Drain:
				table = TableDrains
			case *AllocQueue:
				table = TableAllocQueues
			case *Allocation:
				table = TableAllocations
			}
			if err := s.insert(txn, table, o); err != nil {
				return err
			}
		}
		return nil
	})
}

// write runs fn in a write transaction and commits it unless fn fails; in a batch,
// in the batch's.
func (s *Store) write(fn func(*memdb.Txn) error) error {
	if s.open != nil {
		return fn(s.open)
	}
	txn := s.db.Txn(true)
	defer txn.Abort()
	if err := fn(txn); err != nil {
		return err
	}
	txn.Commit()
	return nil
}

// insert puts an object in a table, and the queue follows a job or a shape. Only a
// mistake in the schema makes it fail, and then the store is not to be trusted.
func (s *Store) insert(txn *memdb.Txn, table string, o any) error {
	if err := txn.Insert(table, o); err != nil {
		return fmt.Errorf("state store: %w", err)
	}
	if s.reads != nil && txn == s.open {
		s.reads.wrote(o)
	}
	switch o := o.(type) {
	case *Job:
		s.queue.change(o, func(j *Job) groupKey { return keyOf(j, s.shape(j.Shape)) })
	case *Shape:
		was := s.shape(o.Name)
		s.queue.learned(o)
		if o.Rev != was.rev() {
			// The estimates of its queued jobs are made again (estimateOf).
			snap := Snapshot{txn: txn}
			if txn == s.open {
				snap.batch = s.reads
			}
			s.queue.regroup(o.Name, func(id string) groupKey { return keyOf(snap.Job(id), o) })
		}
	}
	return nil
}

// shape is what the store holds of a shape now (nil: nothing), as the engine's
// goroutine reads it: without a lookup in a transaction, which copies an index's.
func (s *Store) shape(name string) *Shape { return s.queue.known[name] }

// lookup returns the object of a table with the id, or nil.
func lookup[T any](sn Snapshot, table, id string) T {
	if b := sn.batch; b != nil {
		if o, ok := b.written[batchKey{table, id}]; ok {
			return o.(T)
		}
		return first[T](b.before, table, id)
	}
	return first[T](sn.txn, table, id)
}

// first returns the object of a table with the id, or nil.
func first[T any](txn *memdb.Txn, table, id string) T {
	var none T
	o, err := txn.First(table, IndexID, id)
	if err != nil || o == nil {
		return none
	}
	return o.(T)
}

// Snapshot is a consistent read of the store.
type Snapshot struct {
	txn   *memdb.Txn
	batch *batchReads // in a batch, how its lookups by id read
}

// Snapshot opens a read of the store as it is now; later writes do not show in it.
func (s *Store) Snapshot() Snapshot { return Snapshot{txn: s.db.Txn(false)} }

// view is the store as the engine reads it: with the writes of the batch it is in.
func (s *Store) view() Snapshot {
	if s.open != nil {
		return Snapshot{txn: s.open, batch: s.reads}
	}
	return s.Snapshot()
}

// Waiting is how many of a sweep's jobs wait to start. Only the engine's goroutine may
// call it (its events function is told on it), or a user of a store no engine runs on.
func (s *Store) Waiting(sweep string) int { return s.queue.sweeps[sweep] }

// Queue returns the jobs that wait to start, in the order they are offered in (see
// queue). Only the engine's goroutine may call it, or a user of a store no engine
// runs on.
func (s *Store) Queue() []*Job {
	snap := s.view()
	var out []*Job
	c := s.queue.cursor(nil)
	for _, m, ok := c.nextJob(); ok; _, m, ok = c.nextJob() {
		out = append(out, snap.Job(m.id))
	}
	return out
}

// Jobs returns every job in submission order.
func (sn Snapshot) Jobs() []*Job {
	jobs := collect[*Job](sn.txn, TableJobs, IndexID)
	slices.SortFunc(jobs, func(a, b *Job) int { return cmp.Compare(a.Seq, b.Seq) })
	return jobs
}

// Job returns one job, or nil.
func (sn Snapshot) Job(id string) *Job { return lookup[*Job](sn, TableJobs, id) }

// Shape returns what is known of a shape, or nil.
func (sn Snapshot) Shape(name string) *Shape { return lookup[*Shape](sn, TableShapes, name) }

// Estimate returns what the packer reserves for a job on each of its cards, and of
// host RAM (0 = unknown): a queued job's by what its shape knows now.
func (sn Snapshot) Estimate(j *Job) (gpuBytes, host int64) {
	if j.State != JobQueued {
		return j.Estimate, j.HostEstimate
	}
	return estimateOf(j, sn.Shape(j.Shape))
}

// reestimate makes a job's estimate from what is known of its shape now.
func (sn Snapshot) reestimate(j *Job) {
	l := sn.Shape(j.Shape)
	j.Estimate, j.HostEstimate = estimate(j, l)
	j.EstimatedAt = l.rev()
}

// Learned is the measured peak of a shape; 0 when none is known.
func (sn Snapshot) Learned(shape string) int64 {
	if l := sn.Shape(shape); l != nil {
		return l.Peak
	}
	return 0
}

// Drained returns the cards that take no new jobs.
func (sn Snapshot) Drained() map[plans.CardID]bool {
	out := map[plans.CardID]bool{}
	for d := range each[*Drain](sn.txn.Get, TableDrains, IndexID) {
		if d.On {
			out[d.card()] = true
		}
	}
	return out
}

// Attempt returns one attempt, or nil.
func (sn Snapshot) Attempt(id string) *Attempt { return lookup[*Attempt](sn, TableAttempts, id) }

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
