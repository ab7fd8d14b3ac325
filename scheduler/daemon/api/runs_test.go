package api

import (
	"encoding/json"
	"io"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/gpuq/gpuq/scheduler/state"
)

// TestARecordSaysWhenItsRunEnded: a gpuq run's record holds when the run ended, which
// LastEnded, ForgetEnded (gpuq clean --older-than) and the pruning of old records go
// by, however the file's modification time was moved since (a copy of the state
// directory that does not keep times, a restore, a touch). A record left by a gpuq from
// before it held the time ended when its file was last modified, as before; a gpuq of
// before reads the new record as its own, the time passed over.
func TestARecordSaysWhenItsRunEnded(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(RunsDir(dir), 0o700); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	cards := []GPUInfo{{Index: 0, Name: "H200", TotalBytes: 141 << 30}}
	// left is the record of a run of w1 of pid that ended at ended, its file touched at
	// touched since, as a copy without the times does.
	left := func(pid int, ended, touched time.Time) Run {
		r := Run{Sweep: "w1", PID: pid, Socket: RunSocket(dir, "w1", pid)}
		err := r.WriteRecord(func(w io.Writer) error { return WriteRunRecord(w, state.View{}, nil, cards, nil, ended) })
		if err == nil {
			err = os.Chtimes(r.Record(), touched, touched)
		}
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	twoHours, tenDays := left(4242, now.Add(-2*time.Hour), now), left(4343, now.Add(-10*24*time.Hour), now)
	before := Run{Sweep: "w1", PID: 4141, Socket: RunSocket(dir, "w1", 4141)} // an older gpuq's
	hourAgo := now.Add(-time.Hour)
	err := before.WriteRecord(func(w io.Writer) error { _, err := io.WriteString(w, `{"gpus":[],"jobs":[]}`); return err })
	if err == nil {
		err = os.Chtimes(before.Record(), hourAgo, hourAgo)
	}
	if err != nil {
		t.Fatal(err)
	}

	rec, err := twoHours.ReadRecord()
	if err != nil || !rec.Ended.Equal(now.Add(-2*time.Hour)) || !slices.Equal(rec.GPUs, cards) || len(rec.Jobs) != 0 {
		t.Errorf("the record of a run that ended 2h ago: %+v, %v", rec, err)
	}
	data, err := os.ReadFile(twoHours.Record())
	var older struct {
		Jobs []Job     `json:"jobs"`
		GPUs []GPUInfo `json:"gpus,omitempty"`
	}
	if err == nil {
		err = json.Unmarshal(data, &older)
	}
	if err != nil || !slices.Equal(older.GPUs, cards) {
		t.Errorf("the record as a gpuq of before reads it: %+v, %v", older, err)
	}

	noDamage := func(path string, err error) { t.Errorf("%s said damaged: %v", path, err) }
	last, _, at, ok := LastEnded(dir, "w1", noDamage)
	if !ok || last.PID != before.PID || at.Sub(hourAgo).Abs() > time.Second {
		t.Errorf("w1's last run: %+v that ended %v, %v; want pid %d's, an older gpuq's record, which ended when written (%v)", last, at, ok, before.PID, hourAgo)
	}
	if err := os.Remove(before.Record()); err != nil {
		t.Fatal(err)
	}
	if last, _, at, ok := LastEnded(dir, "w1", noDamage); !ok || last.PID != twoHours.PID || !at.Equal(now.Add(-2*time.Hour)) {
		t.Errorf("w1's last run: %+v that ended %v, %v; want pid %d's, that ended %v", last, at, ok, twoHours.PID, now.Add(-2*time.Hour))
	}

	gone, err := ForgetEnded(dir, "", now.Add(-7*24*time.Hour))
	if err != nil || len(gone) != 1 || gone[0].PID != tenDays.PID {
		t.Errorf("forgetting the runs that ended more than 7d ago: %+v, %v; want pid %d's alone", gone, err, tenDays.PID)
	}
	threeDays := left(4444, now.Add(-3*24*time.Hour), now)
	Runs(dir) // prunes the records older than a day but each sweep's latest
	kept := func(r Run) bool { _, err := os.Stat(r.Record()); return err == nil }
	if kept(threeDays) || !kept(twoHours) {
		t.Errorf("once pruned, the record of 3 days ago kept: %v, of 2h ago (w1's latest): %v; want the latest alone", kept(threeDays), kept(twoHours))
	}
}

// TestARunHoldingItsNameIsStarting: a sweep's name held by a gpuq run (Reserve) reads
// as a run starting, without taking the name from it; let go, it does not, and the
// name is free again.
func TestARunHoldingItsNameIsStarting(t *testing.T) {
	dir := t.TempDir()
	if RunStarting(dir, "s") {
		t.Fatal("a name nobody held is starting")
	}
	f, ok, err := Reserve(dir, "s")
	if err != nil || !ok {
		t.Fatalf("Reserve: %v %v", ok, err)
	}
	if !RunStarting(dir, "s") || RunStarting(dir, "other") {
		t.Errorf("held: s starting %v, other %v; want s alone", RunStarting(dir, "s"), RunStarting(dir, "other"))
	}
	if _, again, _ := Reserve(dir, "s"); again {
		t.Error("a name held was held again")
	}
	f.Close()
	if RunStarting(dir, "s") {
		t.Error("a name let go is starting")
	}
	if g, ok, err := Reserve(dir, "s"); err != nil || !ok {
		t.Errorf("a name let go could not be held again: %v %v", ok, err)
	} else {
		g.Close()
	}
}
