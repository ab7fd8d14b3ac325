package scheduler

import (
	"encoding/binary"
	"fmt"

	memdb "github.com/hashicorp/go-memdb"
)

// Tables and indexes of the state store.
const (
	TableJobs     = "jobs"
	TableAttempts = "attempts"

	IndexID      = "id"
	IndexSweep   = "sweep"
	IndexQueue   = "queue"
	IndexJob     = "job"
	IndexRunning = "running"
)

func schema() *memdb.DBSchema {
	return &memdb.DBSchema{Tables: map[string]*memdb.TableSchema{
		TableJobs:     jobsTable(),
		TableAttempts: attemptsTable(),
	}}
}

func jobsTable() *memdb.TableSchema {
	return &memdb.TableSchema{Name: TableJobs, Indexes: map[string]*memdb.IndexSchema{
		// Look up one job: status, cancel, logs.
		IndexID: {Name: IndexID, Unique: true, Indexer: &memdb.StringFieldIndex{Field: "ID"}},
		// List a sweep's jobs: `status --sweep`, a sweep's summary.
		IndexSweep: {Name: IndexSweep, Indexer: &memdb.StringFieldIndex{Field: "Sweep"}},
		// The packer's input: queued jobs only, highest priority first, then submission order.
		IndexQueue: {Name: IndexQueue, AllowMissing: true, Indexer: queueIndexer{}},
	}}
}

func attemptsTable() *memdb.TableSchema {
	return &memdb.TableSchema{Name: TableAttempts, Indexes: map[string]*memdb.IndexSchema{
		// Look up one attempt by "<job>/<n>".
		IndexID: {Name: IndexID, Unique: true, Indexer: &memdb.StringFieldIndex{Field: "ID"}},
		// A job's attempt history, in order.
		IndexJob: {Name: IndexJob, Indexer: &memdb.StringFieldIndex{Field: "Job"}},
		// Attempts holding cards now: what the packer counts as reserved.
		IndexRunning: {Name: IndexRunning, Indexer: &memdb.ConditionalIndex{Conditional: func(obj any) (bool, error) {
			return obj.(*Attempt).Running(), nil
		}}},
	}}
}

// queueIndexer keys queued jobs by (priority descending, submission sequence), and
// leaves every other job out of the index.
type queueIndexer struct{}

func (queueIndexer) FromObject(obj any) (bool, []byte, error) {
	j, ok := obj.(*Job)
	if !ok {
		return false, nil, fmt.Errorf("queue index: %T is not a *Job", obj)
	}
	if j.State != JobQueued {
		return false, nil, nil
	}
	key := make([]byte, 16)
	// Flipping the sign bit orders int64 as unsigned bytes; inverting orders it descending.
	binary.BigEndian.PutUint64(key, ^(uint64(j.Priority) ^ 1<<63))
	binary.BigEndian.PutUint64(key[8:], j.Seq)
	return true, key, nil
}

func (queueIndexer) FromArgs(args ...any) ([]byte, error) {
	if len(args) != 0 {
		return nil, fmt.Errorf("queue index takes no arguments")
	}
	return []byte{}, nil
}

func (q queueIndexer) PrefixFromArgs(args ...any) ([]byte, error) { return q.FromArgs(args...) }
