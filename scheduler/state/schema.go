package state

import (
	"fmt"
	"maps"

	memdb "github.com/hashicorp/go-memdb"
)

// Tables and indexes of the state store.
const (
	tableSweeps   = "sweeps"
	tableJobs     = "jobs"     // not memdb's: see Store.own
	tableAttempts = "attempts" // the same
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
		// Jobs and attempts are not here: the store keeps them in tables of its own
		// (see rows), by id, jobs "<sweep>.<n>" (a sweep's jobs are those whose ids
		// begin with "<sweep>."), attempts "<job>/<n>". It keeps no index of the jobs
		// that wait (its queue groups them as the packer reads them, see Queue), nor of
		// the attempts that hold cards (a set of its own, see runningSet).
		tableShapes: {Name: tableShapes, Indexes: map[string]*memdb.IndexSchema{
			indexID: {Name: indexID, Unique: true, Indexer: stringIndexer[*Shape](func(l *Shape) string { return l.Name })},
		}},
		tableDrains: {Name: tableDrains, Indexes: map[string]*memdb.IndexSchema{
			indexID: {Name: indexID, Unique: true, Indexer: stringIndexer[*Drain](func(d *Drain) string { return d.card().String() })},
		}},
	}}
	maps.Copy(s.Tables, allocTables())
	maps.Copy(s.Tables, tallyTables())
	maps.Copy(s.Tables, idleTables())
	return s
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
