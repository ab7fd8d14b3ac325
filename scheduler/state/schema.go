package state

import (
	"fmt"
	"maps"

	memdb "github.com/hashicorp/go-memdb"
)

// Tables and indexes of the state store.
const (
	tableSweeps   = "sweeps"
	tableJobs     = "jobs"
	tableAttempts = "attempts"
	tableShapes   = "shapes"
	tableDrains   = "drains"

	indexID = "id"
)

func schema() *memdb.DBSchema {
	s := &memdb.DBSchema{Tables: map[string]*memdb.TableSchema{
		// Submissions by sweep name: the engine's lookups of a job's sweep.
		tableSweeps: {Name: tableSweeps, Indexes: map[string]*memdb.IndexSchema{
			indexID: {Name: indexID, Unique: true, Indexer: stringIndexer[*Submission](func(s *Submission) string { return s.Sweep.Name })},
		}},
		tableJobs:     jobsTable(),
		tableAttempts: attemptsTable(),
		tableShapes: {Name: tableShapes, Indexes: map[string]*memdb.IndexSchema{
			indexID: {Name: indexID, Unique: true, Indexer: stringIndexer[*Shape](func(l *Shape) string { return l.Name })},
		}},
		tableDrains: {Name: tableDrains, Indexes: map[string]*memdb.IndexSchema{
			indexID: {Name: indexID, Unique: true, Indexer: stringIndexer[*Drain](func(d *Drain) string { return d.card().String() })},
		}},
	}}
	maps.Copy(s.Tables, allocTables())
	maps.Copy(s.Tables, tallyTables())
	return s
}

func jobsTable() *memdb.TableSchema {
	return &memdb.TableSchema{Name: tableJobs, Indexes: map[string]*memdb.IndexSchema{
		// Look up one job: status, cancel, logs.
		indexID: {Name: indexID, Unique: true, Indexer: stringIndexer[*Job](func(j *Job) string { return j.ID })},
		// No index by sweep: every index is paid for on every write, and ids are
		// "<sweep>.<n>", so a prefix scan of this one finds a sweep's jobs (checking
		// Sweep, since a sweep "a" would also match the jobs of a sweep "a.b"). Nor of
		// the jobs that wait: the store's queue keeps those, grouped as the packer reads
		// them (see Queue).
	}}
}

func attemptsTable() *memdb.TableSchema {
	return &memdb.TableSchema{Name: tableAttempts, Indexes: map[string]*memdb.IndexSchema{
		// Look up one attempt by "<job>/<n>".
		indexID: {Name: indexID, Unique: true, Indexer: stringIndexer[*Attempt](func(a *Attempt) string { return a.ID })},
		// No index by job: a job's attempts are "<job>/1" to "<job>/<Attempts>".
		// Nor of those holding cards now: the store keeps them in a set of its own,
		// which every view reads as of its transaction (see runningSet).
	}}
}

// stringIndexer keys objects by a string field, as memdb.StringFieldIndex does (the
// string and a NUL, so that a prefix query can tell "a.1" from "a.10"), without
// reflection: every write computes every index key.
type stringIndexer[T any] func(T) string

func (field stringIndexer[T]) FromObject(obj any) (bool, []byte, error) {
	o, ok := obj.(T)
	if !ok {
		return false, nil, fmt.Errorf("string index: %T is not a %T", obj, o)
	}
	v := field(o)
	if v == "" {
		return false, nil, nil
	}
	return true, append([]byte(v), 0), nil
}

func (stringIndexer[T]) FromArgs(args ...any) ([]byte, error) {
	if len(args) != 1 {
		return nil, fmt.Errorf("string index takes one argument, got %d", len(args))
	}
	s, ok := args[0].(string)
	if !ok {
		return nil, fmt.Errorf("string index: argument %#v is not a string", args[0])
	}
	return append([]byte(s), 0), nil
}

func (field stringIndexer[T]) PrefixFromArgs(args ...any) ([]byte, error) {
	key, err := field.FromArgs(args...)
	if err != nil {
		return nil, err
	}
	return key[:len(key)-1], nil
}
