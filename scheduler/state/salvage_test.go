package state

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gpuq/gpuq/plans"
)

// longJournal makes a long journal: fill's history, a second sweep, then j.3 held and
// released again and again, so that damage early in the journal has much after it.
func longJournal(t *testing.T, dir string) {
	t.Helper()
	s, _, _ := openState(t, dir)
	fill(t, s)
	sw, err := plans.DecodeSweep("k.yaml", []byte(strings.Replace(journalSweep, "name: j", "name: k", 1)), plans.Overrides{})
	must(t, err)
	must(t, s.Submit(&Submission{Sweep: sw}))
	for i := range 50 {
		j := *s.View().Job("j.3")
		j.Held = i%2 == 0
		must(t, s.Put(Change{Jobs: []*Job{&j}}))
	}
	s.Close()
}

// damageLine flips a byte in the middle of line n (from 1) of a state file.
func damageLine(t *testing.T, path string, n int) {
	t.Helper()
	data, err := os.ReadFile(path)
	must(t, err)
	lines := bytes.SplitAfter(data, []byte("\n"))
	l := lines[n-1]
	l[len(l)/2] ^= 0x20
	must(t, os.WriteFile(path, bytes.Join(lines, nil), 0o600))
}

// TestDamageBeforeTheEndStopsStartUp: only a torn last record is a crash's trace.
// Damage anywhere else stops start-up with a message naming the record and the way
// out, changes nothing and keeps a copy; gpuq daemon --salvage (Salvage) starts from
// every good record, says what it skipped, and the state opens again.
func TestDamageBeforeTheEndStopsStartUp(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, dir string)
		file   string
		record int
		why    string
		// skipped is what Salvage reports it left out, in order (prefixes).
		skipped []string
		// sweeps is what the salvaged state holds.
		sweeps string
	}{{
		name:    "a flipped byte in record 3 of the journal",
		damage:  func(t *testing.T, dir string) { damageLine(t, filepath.Join(dir, journalFile), 3) },
		file:    journalFile,
		record:  3,
		why:     "its checksum does not match",
		skipped: []string{"journal record 3 (at byte "},
		sweeps:  "j k",
	}, {
		name: "a flipped byte in the snapshot's first sweep",
		damage: func(t *testing.T, dir string) {
			s, _, _ := openState(t, dir)
			must(t, s.Compact())
			s.Close()
			damageLine(t, filepath.Join(dir, snapshotFile), 2)
		},
		file:   snapshotFile,
		record: 2,
		why:    "its checksum does not match",
		// Its copy at the end of the snapshot stands in for it: nothing else is lost.
		skipped: []string{"snapshot record 2 (at byte "},
		sweeps:  "j k",
	}, {
		// What the message of an older gpuq advised.
		name: "the snapshot moved aside",
		damage: func(t *testing.T, dir string) {
			s, _, _ := openState(t, dir)
			must(t, s.Compact())
			j := *s.View().Job("j.2")
			j.State = JobSucceeded
			must(t, s.Put(Change{Jobs: []*Job{&j}}))
			s.Close()
			must(t, os.Rename(filepath.Join(dir, snapshotFile), filepath.Join(t.TempDir(), "aside")))
		},
		file: snapshotFile,
		why:  "missing, though compaction 1 wrote it (moved or deleted?): put it back",
		// The sweeps come back from their copies (see keepSweep), and the journal's
		// record of j.2 applies to them; what only the snapshot held is lost.
		skipped: []string{"snapshot: missing, though compaction 1 wrote it"},
		sweeps:  "j k",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			longJournal(t, dir)
			tc.damage(t, dir)
			before := readFiles(t, dir)
			for range 2 { // a daemon restarted on the same damage keeps one copy
				_, err := OpenState(dir, func(w string) { t.Errorf("warning %q", w) })
				var d *Damaged
				if !errors.As(err, &d) || d.File != filepath.Join(dir, tc.file) || d.Record != tc.record || d.Why != tc.why {
					t.Fatalf("OpenState: %v; want record %d of %s damaged: %s", err, tc.record, tc.file, tc.why)
				}
				for _, want := range []string{"gpuq daemon --salvage", fmt.Sprintf("record %d of ", tc.record), filepath.Join(dir, keptDir)} {
					if tc.record == 0 && strings.HasPrefix(want, "record") {
						want = tc.file + ": " + tc.why
					}
					if !strings.Contains(err.Error(), want) {
						t.Errorf("the message lacks %q: %v", want, err)
					}
				}
			}
			if after := readFiles(t, dir); !reflect.DeepEqual(after, before) {
				t.Errorf("a refused start changed the state files")
			}
			kept, _ := filepath.Glob(filepath.Join(dir, keptDir, "*"))
			if len(kept) != len(before) {
				t.Errorf("copies kept: %v; want one of each of %d files", kept, len(before))
			}
			for _, k := range kept {
				data, _ := os.ReadFile(k)
				if name, _, _ := strings.Cut(filepath.Base(k), "-"); string(data) != before[name] {
					t.Errorf("%s is not a copy of %s", k, name)
				}
			}

			got, err := Salvage(dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Skipped) != len(tc.skipped) {
				t.Fatalf("skipped %q; want %q", got.Skipped, tc.skipped)
			}
			for i, want := range tc.skipped {
				if !strings.HasPrefix(got.Skipped[i], want) {
					t.Errorf("skipped[%d] = %q, want %q...", i, got.Skipped[i], want)
				}
			}
			s, sweeps, warnings := openState(t, dir)
			var names []string
			for _, sub := range sweeps {
				names = append(names, sub.Sweep.Name)
			}
			if strings.Join(names, " ") != tc.sweeps || len(warnings) != 0 {
				t.Errorf("salvaged sweeps %v (warnings %q), want %s", names, warnings, tc.sweeps)
			}
			// Every record after the damage is kept: j.3 was released last.
			if j := s.View().Job("j.3"); j != nil && j.Held {
				t.Errorf("j.3 is held: a later record was lost")
			}
		})
	}
}

func readFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, name := range []string{snapshotFile, journalFile, markerFile} {
		if data, err := os.ReadFile(filepath.Join(dir, name)); err == nil {
			out[name] = string(data)
		}
	}
	return out
}

// TestTakingAnAttemptUp: the job and the attempt a salvage writes for an attempt its
// records do not account for. One recorded to have succeeded ends its job then. One
// recorded to have ended otherwise is written running, for the daemon to read its end
// from exit.json again: how its trainer exited goes with it, and what it ran, what it
// reported and why it was being stopped early stay. One found in its directory alone
// runs the argv its spec.json names. No job taken up waits for what it runs after, nor
// is being cancelled or retried as an attempt before was.
func TestTakingAnAttemptUp(t *testing.T) {
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	// What cancel and retry marked of its attempt 1 goes with that attempt.
	j := &Job{Job: &plans.Job{ID: "k.1", After: []string{"pretrain"}}, Sweep: "k",
		Status: Status{State: JobQueued, Shape: "k\x00s", Estimate: 10 * gib, Awaiting: true, Queued: at, Attempts: 1, Cancelling: true, RetryOnStop: true}}
	metrics, _ := Metrics(nil).Add([]plans.Reading{{Step: 10, Name: "loss", Value: 2}})
	failed := Attempt{ID: "k.1/2", Job: "k.1", Shape: j.Shape, N: 2, Started: at, Ended: at.Add(time.Hour), Outcome: plans.Failed,
		Exit: &plans.ProcessExit{Code: 1, Error: "ValueError: loss is NaN"}, Command: []string{"python3", "train.py"},
		Metrics: metrics, StopReason: "stopped early at step 10"}
	succeeded := failed
	succeeded.Outcome, succeeded.Exit, succeeded.StopReason = plans.Success, &plans.ProcessExit{}, ""
	reopened := failed
	reopened.Outcome, reopened.Ended, reopened.Exit = "", time.Time{}, nil
	found := Found{Job: "k.1", N: 2, GPUs: []int{3}, Started: at, Command: []string{"python3", "train.py", "--seed", "1"}}
	for _, tc := range []struct {
		name        string
		recorded    *Attempt
		state       JobState
		ended       time.Time
		wantAttempt Attempt
	}{
		{"recorded to have succeeded", &succeeded, JobSucceeded, succeeded.Ended, succeeded},
		{"recorded to have failed", &failed, JobRunning, time.Time{}, reopened},
		{"found in its directory", nil, JobRunning, time.Time{}, Attempt{ID: "k.1/2", Job: "k.1", Shape: j.Shape, N: 2, GPUs: []int{3},
			Estimate: 10 * gib, Reserve: 10 * gib, Started: at, PeakUnknown: true, Command: found.Command}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job, a := j.take(tc.recorded, found, 2)
			if job.State != tc.state || !job.Ended.Equal(tc.ended) || job.Awaiting || job.Attempts != 2 || !job.Queued.Equal(at) || job.Cancelling || job.RetryOnStop {
				t.Errorf("job %+v; want %s after 2, ended at %v, waiting for nothing", job.Status, tc.state, tc.ended)
			}
			if !reflect.DeepEqual(*a, tc.wantAttempt) {
				t.Errorf("attempt\n %+v\nwant\n %+v", *a, tc.wantAttempt)
			}
		})
	}
	if !j.Awaiting || !j.Cancelling || failed.Exit == nil {
		t.Error("take changed what it was given")
	}
}
