package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strconv"
)

// The marker is what a state directory knows of itself outside its snapshot and its
// journal, so that losing either is told from a state that has not begun: written when
// the state begins (a daemon's first start), it says which compaction the snapshot in
// place is of (0: none yet) and how much of the journal since is known to have been
// written and synced. A state with a marker and without the snapshot it names lost
// its snapshot; a journal shorter than the marker says lost records after they were
// written (a file cut, a copy of an older one put back), which no crash does: a crash
// tears at most the record it was writing, after the marker's length.
//
// It is one line of fixed width, a record's checksum and JSON padded with spaces, made
// whole (a temporary file renamed into place) and then rewritten in place: after every
// record the journal syncs, without a sync of its own (it then lags, which makes its
// length a bound the journal is at least as long as, never more), and synced at each
// compaction and start.
const (
	markerFile = "marker"
	markerSize = 128
)

type marker struct {
	V int `json:"v"`
	// Epoch is the compaction the snapshot in place is of; 0 before the first.
	Epoch uint64 `json:"epoch"`
	// Journal and Records are how many bytes and whole records the journal of that
	// compaction held, synced, when the marker was last written.
	Journal int64 `json:"journal"`
	Records int   `json:"records"`
}

// encode is the marker's line, markerSize bytes with its newline.
func (m marker) encode() []byte {
	m.V = stateVersion
	data, _ := json.Marshal(m) // integers alone
	line := fmt.Appendf(make([]byte, 0, markerSize), "%08x %s", crc32.Checksum(data, crcTable()), data)
	line = append(line, bytes.Repeat([]byte{' '}, markerSize-1-len(line))...)
	return append(line, '\n')
}

// readMarker reads dir's marker; nil when there is none. One that does not read back
// (its checksum, its width) is damage, as a damaged record is.
func readMarker(dir string) (*marker, error) {
	path := filepath.Join(dir, markerFile)
	data, err := readPrivate(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	sum, body, _ := bytes.Cut(bytes.TrimRight(data, " \n"), []byte(" "))
	want, perr := strconv.ParseUint(string(sum), 16, 32)
	var m marker
	switch {
	case len(data) != markerSize || perr != nil || uint32(want) != crc32.Checksum(body, crcTable()):
		return nil, &Damaged{File: path, Why: "its checksum does not match"}
	case json.Unmarshal(body, &m) != nil:
		return nil, &Damaged{File: path, Why: "not a marker"}
	case m.V > stateVersion:
		return nil, fmt.Errorf("%s: state written by a newer gpuq (state version %d; this gpuq reads up to %d): upgrade gpuq", path, m.V, stateVersion)
	}
	return &m, nil
}

// markerWriter is a state directory's marker, open to be rewritten.
type markerWriter struct {
	f *os.File
}

// writeMarker makes dir's marker say m, durably, and returns it open for later writes:
// one there is rewritten in place, a missing one made whole.
func writeMarker(dir string, m marker) (*markerWriter, error) {
	path := filepath.Join(dir, markerFile)
	f, err := openFile(path, os.O_WRONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		if err = writeNew(path, m.encode()); err == nil {
			err = syncDir(dir)
		}
		if err == nil {
			f, err = openFile(path, os.O_WRONLY, 0)
		}
		if err != nil {
			return nil, fmt.Errorf("marker: %w", err)
		}
		return &markerWriter{f: f}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("marker: %w", err)
	}
	mf := &markerWriter{f: f}
	if err := mf.set(m, true); err != nil {
		f.Close()
		return nil, err
	}
	return mf, nil
}

// set rewrites the marker in place; with sync, durably. Rewriting a block in place
// takes no room on the disk, and the marker is a bound that may lag: a failure to
// write it without sync costs only how much a later start can tell, and is not said.
func (mf *markerWriter) set(m marker, sync bool) error {
	_, err := mf.f.WriteAt(m.encode(), 0)
	if err == nil && sync {
		err = mf.f.Sync()
	}
	if err != nil {
		return fmt.Errorf("marker: %w", err)
	}
	return nil
}

func (mf *markerWriter) Close() error { return mf.f.Close() }

// Begun reports whether a state has begun in dir: whether its marker, its snapshot or
// a journal with anything in it is there. A daemon that finds none of them, and the
// files of an earlier daemon beside them, has lost its state rather than found none.
func Begun(dir string) bool {
	for _, name := range []string{markerFile, snapshotFile, journalFile} {
		if fi, err := os.Lstat(filepath.Join(dir, name)); err == nil && (name != journalFile || fi.Size() > 0) {
			return true
		}
	}
	return false
}
