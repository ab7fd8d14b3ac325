// Package state is what gpuq knows of its sweeps: the model (submissions, jobs,
// attempts, shapes, drained cards, allocation queues), the store that holds it with
// typed writes (jobs and attempts in copy-on-write B-trees of its own, the rest in
// go-memdb), the journal every write goes through first, its replay, compaction and
// salvage, and the queue index of the jobs that wait. Of gpuq's packages it imports
// plans alone, and it builds without cgo.
//
// An engine that runs on a store is its one writer: while it runs, every write goes
// through it (scheduler.Engine), on its goroutine.
package state

import (
	"cmp"
	"fmt"
	"iter"
	"maps"
	"slices"
	"sync"

	memdb "github.com/hashicorp/go-memdb"

	"github.com/gpuq/gpuq/plans"
)

// Store is the in-memory state: jobs and attempts in tables of its own (tables), the
// rest in go-memdb. Opened on a state directory (OpenState), it journals every change
// before committing it.
type Store struct {
	db *memdb.MemDB
	// own is the store's own tables as the writer writes them; committed is them as
	// the last write transaction committed it, which views read (see publish).
	own, committed tables
	// seq and submitted number the jobs and the submissions in the order they came;
	// jobs counts those the store holds.
	seq, submitted uint64
	jobs           int
	journal        *journal
	// warn hears what a journaled store has to say that is not an error.
	warn func(string)
	// renamed, while a state is read, holds the shapes that records of an older gpuq
	// named otherwise (see canonicalShapes).
	renamed map[string]bool
	queue   *Queue
	// running is the attempts that hold cards, followed as the queue is (see RunningNow);
	// published is the set as the last write transaction committed it, which views read.
	// views orders the opening of views with commits.
	running   runningSet
	published []*Attempt
	views     sync.RWMutex
	open      *memdb.Txn  // the transaction of the batch in progress, or held; else nil
	reads     *batchReads // how open's writes are looked up; nil without one
	inBatch   bool        // a batch is in progress
	// hold is how many batches one transaction may take before it is committed (see
	// HoldCommits); held is how many the open one has.
	hold, held int
	// batchReads is the one reads points to, kept from batch to batch.
	batchReads batchReads
	// given, while a snapshot is applied, holds the statuses it gives the jobs of its
	// submissions (see applySnapshot).
	given map[string]given
}

// batchReads answers a batch's lookups by id without reading its write transaction:
// a read there copies the index's transaction and so makes memdb copy again, at its
// next write, every node it had copied for the batch (go-immutable-radix's
// Txn.Clone), which a round that reads and writes job after job paid at each. What
// the transaction wrote of jobs, attempts and shapes is read from written, the rest
// from before.
type batchReads struct {
	before *memdb.Txn // a read of the state the transaction began from
	// beforeOwn is the store's own tables as the transaction began.
	beforeOwn tables
	written   map[batchKey]writ
	// batch numbers the batches of the transaction (see HoldCommits).
	batch int
}

type batchKey struct{ table, id string }

// writ is an object the open transaction wrote (now), by the batch numbered batch;
// was is what an earlier batch of it had written there before, if one had (nil: read
// before), which is what a view of the batch's beginning reads (see Store.View).
type writ struct {
	now, was any
	batch    int
}

// wrote notes an object the transaction wrote to a table, for its lookups.
func (r *batchReads) wrote(table string, o any) {
	var id string
	switch o := o.(type) {
	case *Job:
		id = o.ID
	case *Attempt:
		id = o.ID
	case *Shape:
		id = o.Name
	case *Tally:
		id = tallyID(o.Outcome, o.Tier)
	default:
		return
	}
	k := batchKey{table, id}
	w, ok := r.written[k]
	if ok && w.batch != r.batch {
		w.was = w.now
	}
	w.now, w.batch = o, r.batch
	r.written[k] = w
}

// read is the object of a table with the id as the transaction holds it, or as the
// batch in progress began; ok is false where the transaction did not write it.
func (r *batchReads) read(table, id string, begun bool) (o any, ok bool) {
	w, ok := r.written[batchKey{table, id}]
	switch {
	case !ok:
		return nil, false
	case !begun || w.batch != r.batch:
		return w.now, true
	default:
		return w.was, w.was != nil
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
	s := &Store{db: db.Snapshot(), own: newTables(), queue: newQueue(), batchReads: batchReads{written: map[batchKey]writ{}}}
	s.committed = s.own.frozen()
	return s, nil
}

// Change is what one write puts in the store, each kind of object in its table's
// field: one transaction, journaled first as one record. Objects are put in the order
// of the fields, the order in which a record is replayed, so that a state read back
// is the state written. A table added to the store gets a field here, and a place in
// record, recordOf, apply, record.merge, View.all and changeOf (TestEveryTableJournals
// says where it is missing).
type Change struct {
	// Sweeps are submissions put to change their status (see Submit for a new one).
	Sweeps      []*Submission
	Jobs        []*Job
	Attempts    []*Attempt
	Shapes      []*Shape
	Drains      []*Drain
	AllocQueues []*AllocQueue
	Allocations []*Allocation
	Tallies     []*Tally
	IdleUses    []*IdleUse
	// IdleUsesGone are the cards whose idle use is forgotten (see IdleUse), and
	// AllocationsGone the allocations (by Slurm's job id) that ended long ago (see
	// Allocation): the rows a change deletes, before it puts its objects, so that one
	// forgotten and put again in one change is kept. They are of the tables pruned as
	// the daemon runs, by the engine's rounds and the allocator's; other objects go
	// with a compaction, as Forget's do.
	IdleUsesGone    []plans.CardID
	AllocationsGone []string
}

// each calls fn with every object of c and its table, in the order they are put, and
// stops at the first error.
func (c *Change) each(fn func(table string, o any) error) error {
	err := eachOf(tableSweeps, c.Sweeps, fn)
	if err == nil {
		err = eachOf(tableJobs, c.Jobs, fn)
	}
	if err == nil {
		err = eachOf(tableAttempts, c.Attempts, fn)
	}
	if err == nil {
		err = eachOf(tableShapes, c.Shapes, fn)
	}
	if err == nil {
		err = eachOf(tableDrains, c.Drains, fn)
	}
	if err == nil {
		err = eachOf(tableAllocQueues, c.AllocQueues, fn)
	}
	if err == nil {
		err = eachOf(tableAllocations, c.Allocations, fn)
	}
	if err == nil {
		err = eachOf(tableTallies, c.Tallies, fn)
	}
	if err == nil {
		err = eachOf(tableIdleUses, c.IdleUses, fn)
	}
	return err
}

func eachOf[T any](table string, objs []T, fn func(table string, o any) error) error {
	for _, o := range objs {
		if err := fn(table, o); err != nil {
			return err
		}
	}
	return nil
}

// Put writes a change in one transaction, journaled first. An error means the change
// did not take effect. While an engine runs on the store, it is the store's one writer:
// write through it (scheduler.Engine.Put).
func (s *Store) Put(c Change) error {
	if s.journal != nil {
		if err := s.journal.Append(recordOf(c)); err != nil {
			return err
		}
	}
	if err := s.commit(c); err != nil {
		return err
	}
	return s.compactIfDue()
}

// Check writes an empty record to the journal: whether changes can be saved now.
func (s *Store) Check() error {
	if s.journal == nil {
		return nil
	}
	return s.journal.Append(record{})
}

// Batch gathers every write fn makes into one transaction, committed when fn returns;
// each is journaled as it is made, as always. Until then only the engine's reads
// (Latest) see them, not a View: the engine's goroutine is the one that writes, and
// a batch is one of its rounds.
func (s *Store) Batch(fn func()) error {
	if s.inBatch { // a batch in a batch is the outer one's
		fn()
		return nil
	}
	if s.open == nil {
		s.open = s.db.Txn(true)
		s.reads = &s.batchReads
		clear(s.reads.written)
		s.reads.before = s.db.Txn(false)
		s.reads.beforeOwn = s.committed
	}
	s.reads.batch++
	s.inBatch = true
	func() {
		defer func() {
			s.inBatch = false
			if s.held++; s.held >= s.hold {
				s.commitHeld()
				return
			}
			s.views.Lock()
			s.published = s.running.give()
			s.views.Unlock()
		}()
		fn()
	}()
	return s.compactIfDue()
}

// HoldCommits lets one transaction take up to n batches before it is committed, for a
// store that nobody but its engine reads while it runs, and that journals nothing (a
// simulation): memdb copies every node of its trees that a transaction writes once in
// it, as the store's own tables do every node a write reaches after a commit's copy
// (frozen), and a round's transaction copied again most of what the round before it
// had (two fifths of what a simulation allocated). Latest reads the held writes as it reads
// a batch's; View commits them first, but in a batch, where it reads, by id, what the
// store held when the batch began, as it would if each batch were committed, and its
// scans (Jobs, JobsOf, ...) what it held when the transaction began. A journaled store
// commits every batch: a compaction writes what is committed.
func (s *Store) HoldCommits(n int) error {
	if s.journal != nil {
		return fmt.Errorf("state store: a journaled store commits every batch (its compactions write what is committed): hold commits only on a store that journals nothing")
	}
	s.hold = n
	return nil
}

// commitHeld commits the transaction held open, if any, between batches.
func (s *Store) commitHeld() {
	if s.open == nil || s.inBatch {
		return
	}
	s.publish(s.open.Commit)
	s.open, s.reads, s.held = nil, nil, 0
}

// Grouped runs fn, whose writes are journaled as they are made but synced to disk
// together once it returns (or where fn calls Sync), not each as it is made: an
// engine's round, a sync before it starts attempts and one at its end rather than one
// a record (a sync takes milliseconds). Nothing fn does may leave the daemon on the
// strength of a record not yet synced (no attempt may start before its record is): a
// daemon that dies loses none of them, the kernel holds them; a machine that stops
// may. The error is the last sync's.
func (s *Store) Grouped(fn func()) error {
	if s.journal == nil || s.journal.grouped { // a group in a group is the outer one's
		fn()
		return nil
	}
	s.journal.grouped = true
	func() {
		defer func() { s.journal.grouped = false }()
		fn()
	}()
	return s.journal.flush()
}

// Sync syncs what a group (see Grouped) has journaled so far: before what it does
// leaves the daemon. Its error (a CannotWrite) leaves a journal that takes no record
// until a compaction has put the whole state on the disk (see compactIfDue).
func (s *Store) Sync() error {
	if s.journal == nil {
		return nil
	}
	return s.journal.flush()
}

// Journaled reports whether the store journals its changes.
func (s *Store) Journaled() bool { return s.journal != nil }

// Close closes the journal.
func (s *Store) Close() error {
	if s.hold > 1 {
		s.commitHeld()
	}
	if s.journal == nil {
		return nil
	}
	return s.journal.Close()
}

func (s *Store) commit(c Change) error {
	return s.write(func(txn *memdb.Txn) error {
		// The queue follows the jobs together (Queue.changeAll), before anything after
		// them is put: a shape regroups its jobs as they are then.
		var jobs []*Job
		follow := func() {
			s.queue.changeAll(jobs, s.keyOf)
			jobs = nil
		}
		err := forgetRows(txn, tableIdleUses, c.IdleUsesGone, plans.CardID.String)
		if err == nil {
			err = forgetRows(txn, tableAllocations, c.AllocationsGone, func(id string) string { return id })
		}
		if err != nil {
			return fmt.Errorf("state store: %w", err)
		}
		err = c.each(func(table string, o any) error {
			if j, ok := o.(*Job); ok {
				err := s.put(txn, table, o)
				if err == nil {
					jobs = append(jobs, j)
				}
				return err
			}
			if jobs != nil {
				follow()
			}
			return s.insert(txn, table, o)
		})
		follow()
		return err
	})
}

// forgetRows deletes the rows of a table by their ids; one that is not there is no
// error.
func forgetRows[T any](txn *memdb.Txn, table string, ids []T, id func(T) string) error {
	for _, k := range ids {
		if _, err := txn.DeleteAll(table, indexID, id(k)); err != nil {
			return err
		}
	}
	return nil
}

// keyOf is the queue's group of a waiting job, by what the store knows of its shape now.
func (s *Store) keyOf(j *Job) GroupKey { return keyOf(j, s.KnownShape(j.Shape)) }

// write runs fn in a write transaction and commits it unless fn fails; in a batch, or
// where one is held (see HoldCommits), in that.
func (s *Store) write(fn func(*memdb.Txn) error) error {
	if s.open != nil {
		return fn(s.open)
	}
	txn := s.db.Txn(true)
	defer txn.Abort()
	if err := fn(txn); err != nil {
		s.own = s.committed.frozen() // as memdb's tables, none of its writes
		return err
	}
	s.publish(txn.Commit)
	return nil
}

// insert puts an object in a table, and the queue follows a job or a shape, the running
// set an attempt: every write of those passes here. Only a mistake in the schema makes
// it fail, and then the store is not to be trusted.
func (s *Store) insert(txn *memdb.Txn, table string, o any) error {
	if err := s.put(txn, table, o); err != nil {
		return err
	}
	switch o := o.(type) {
	case *Job:
		s.queue.change(o, s.keyOf)
	case *Attempt:
		s.running.put(o)
	case *Shape:
		was := s.KnownShape(o.Name)
		s.queue.learned(o)
		if o.Rev != was.Revision() {
			// The estimates of its queued jobs are made again (estimateOf).
			s.queue.regroup(o)
		}
	}
	return nil
}

// put puts an object in a table, for the batch's lookups too, without the queue.
func (s *Store) put(txn *memdb.Txn, table string, o any) error {
	switch o := o.(type) {
	case *Job:
		if o.ID == "" {
			return fmt.Errorf("state store: a job of sweep %q without an id", o.Sweep)
		}
		s.own.jobs.put(o.ID, o)
	case *Attempt:
		if o.ID == "" {
			return fmt.Errorf("state store: an attempt of job %q without an id", o.Job)
		}
		s.own.attempts.put(o.ID, o)
	default:
		if err := txn.Insert(table, o); err != nil {
			return fmt.Errorf("state store: %w", err)
		}
	}
	if s.reads != nil && txn == s.open {
		s.reads.wrote(table, o)
	}
	return nil
}

// KnownShape is what the store holds of a shape now (nil: nothing), as the engine's
// goroutine reads it: without a lookup in a transaction, which copies an index's.
func (s *Store) KnownShape(name string) *Shape { return s.queue.known[name] }

// KnownShapes yields what the store holds of each shape now, in no order, as KnownShape
// reads it.
func (s *Store) KnownShapes() iter.Seq[*Shape] { return maps.Values(s.queue.known) }

// lookup returns the object of one of memdb's tables with the id, or nil.
func lookup[T any](sn View, table, id string) T {
	if o, ok := batchRead[T](sn, table, id); ok {
		return o
	}
	if sn.batch != nil {
		return first[T](sn.batch.before, table, id)
	}
	return first[T](sn.txn, table, id)
}

// ownLookup returns the object of one of the store's own tables with the id, or nil.
func ownLookup[T any](sn View, table string, rows *rows[T], id string) T {
	if o, ok := batchRead[T](sn, table, id); ok {
		return o
	}
	o, _ := rows.get(id)
	return o
}

// batchRead is what the batch sn reads in wrote of a table with the id, if it wrote
// it (see batchReads).
func batchRead[T any](sn View, table, id string) (T, bool) {
	if b := sn.batch; b != nil {
		if o, ok := b.read(table, id, sn.begun); ok {
			return o.(T), true
		}
	}
	var none T
	return none, false
}

// first returns the object of a table with the id, or nil.
func first[T any](txn *memdb.Txn, table, id string) T {
	var none T
	o, err := txn.First(table, indexID, id)
	if err != nil || o == nil {
		return none
	}
	return o.(T)
}

// InBatch reports whether a batch is in progress: its writes are not committed yet.
func (s *Store) InBatch() bool { return s.inBatch }

// Queue is the index of the jobs that wait to start. Only the engine's
// goroutine may use it, as it writes the store.
func (s *Store) Queue() *Queue { return s.queue }

// View is a consistent read of the store.
type View struct {
	txn   *memdb.Txn
	batch *batchReads // in a batch, how its lookups by id read
	// begun: lookups read the store as the batch in progress began (see HoldCommits).
	begun bool
	// running is the attempts that held cards when txn began; in a batch, live is the
	// store's set, with the batch's writes, instead.
	running []*Attempt
	live    *runningSet
	// own is the store's own tables as of txn; in a batch, a lookup by id reads what
	// the batch wrote (batch) before them.
	own tables
}

// View opens a read of the store as it is now; later writes do not show in it.
func (s *Store) View() View {
	if s.hold > 1 { // only the engine reads the store (see HoldCommits)
		if s.inBatch && s.held > 0 {
			return View{txn: s.reads.before, batch: s.reads, begun: true, running: s.published, own: s.reads.beforeOwn}
		}
		s.commitHeld()
	}
	s.views.RLock()
	defer s.views.RUnlock()
	return View{txn: s.db.Txn(false), running: s.published, own: s.committed}
}

// Latest is the store as the engine reads it: with the writes of the batch it is in.
// In a batch its scans (Jobs, JobsOf, ...) walk the writer's own tables as they are
// then, as a read of memdb's write transaction walks its trees: nothing may be written
// to the store while one is ranged over.
func (s *Store) Latest() View {
	if s.open != nil {
		return View{txn: s.open, batch: s.reads, live: &s.running, own: s.own}
	}
	return s.View()
}

// Waiting is how many of a sweep's jobs wait to start. Only the engine's goroutine may
// call it (its events function is told on it), or a user of a store no engine runs on.
func (s *Store) Waiting(sweep string) int { return s.queue.sweeps[sweep] }

// Queued returns the jobs that wait to start, in the order they are offered in (see
// queue). Only the engine's goroutine may call it, or a user of a store no engine
// runs on.
func (s *Store) Queued() []*Job {
	view := s.Latest()
	var out []*Job
	c := s.queue.Cursor(nil)
	for _, m, ok := c.Next(); ok; _, m, ok = c.Next() {
		out = append(out, view.Job(m.ID))
	}
	return out
}

// Jobs returns every job in submission order.
func (sn View) Jobs() []*Job {
	jobs := slices.Collect(sn.own.jobs.all())
	slices.SortFunc(jobs, func(a, b *Job) int { return cmp.Compare(a.Seq, b.Seq) })
	return jobs
}

// Job returns one job, or nil.
func (sn View) Job(id string) *Job { return ownLookup(sn, tableJobs, &sn.own.jobs, id) }

// Shape returns what is known of a shape, or nil.
func (sn View) Shape(name string) *Shape { return lookup[*Shape](sn, tableShapes, name) }

// Estimate returns what the packer reserves for a job on each of its cards, and of
// host RAM (0 = unknown): a queued job's by what its shape knows now.
func (sn View) Estimate(j *Job) (gpuBytes, host int64) {
	if j.State != JobQueued {
		return j.Estimate, j.HostEstimate
	}
	return estimateOf(j, sn.Shape(j.Shape))
}

// Reestimate makes a job's estimate from what is known of its shape now.
func (sn View) Reestimate(j *Job) {
	l := sn.Shape(j.Shape)
	j.Estimate, j.HostEstimate = EstimateBy(j, l)
	j.EstimatedAt = l.Revision()
}

// Learned is the measured peak of a shape; 0 when none is known.
func (sn View) Learned(shape string) int64 {
	if l := sn.Shape(shape); l != nil {
		return l.Peak
	}
	return 0
}

// Drained returns the cards that take no new jobs.
func (sn View) Drained() map[plans.CardID]bool {
	out := map[plans.CardID]bool{}
	for d := range each[*Drain](sn.txn.Get, tableDrains, indexID) {
		if d.On {
			out[d.card()] = true
		}
	}
	return out
}

// Attempt returns one attempt, or nil.
func (sn View) Attempt(id string) *Attempt { return ownLookup(sn, tableAttempts, &sn.own.attempts, id) }

// Attempts returns a job's attempts in order.
func (sn View) Attempts(job string) []*Attempt {
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

// Running returns the attempts that hold cards, by id.
func (sn View) Running() []*Attempt { return slices.Collect(sn.EachRunning()) }

// EachRunning yields the attempts that hold cards, as Running returns them: in a batch,
// as they are when it is called, later writes of the batch not showing.
func (sn View) EachRunning() iter.Seq[*Attempt] {
	if sn.live != nil {
		return slices.Values(sn.live.give())
	}
	return slices.Values(sn.running)
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

// JobIDs are the ids of every job, for the refusals above.
func (sn View) JobIDs() []string {
	var ids []string
	for _, j := range sn.Jobs() {
		ids = append(ids, j.ID)
	}
	return ids
}

// JobsOf yields a sweep's jobs.
func (sn View) JobsOf(sweep string) iter.Seq[*Job] {
	return func(yield func(*Job) bool) {
		for j := range sn.own.jobs.prefixed(sweep + ".") {
			if j.Sweep == sweep && !yield(j) {
				return
			}
		}
	}
}
