package state

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuq/gpuq/plans"
)

// BenchmarkRestart measures what a daemon's restart spends on its state: OpenState of
// a state directory of 100,000 jobs (a sweep of 1,000 shapes and 100 seeds), as a
// clean stop leaves it (the snapshot alone) and as a kill -9 does (the snapshot of the
// last compaction and the journal since), with every job queued as submitted, every
// job finished, or every job held, released, cancelled and retried by its sweep (as
// gpuq-bench's daemon at scale leaves them before its kill -9).
//
//	go test -run '^$' -bench Restart -benchtime 3x ./scheduler/state/
func BenchmarkRestart(b *testing.B) {
	for _, tc := range []struct {
		name  string
		h     befell
		clean bool
	}{
		{"queued/clean", queued, true},
		{"queued/killed", queued, false},
		{"finished/clean", finished, true},
		{"finished/killed", finished, false},
		{"retried/clean", retried, true},
		{"retried/killed", retried, false},
	} {
		b.Run(tc.name, func(b *testing.B) {
			dir := b.TempDir()
			makeHistory(b, dir, 100_000, tc.h, tc.clean)
			b.ResetTimer()
			var cpu time.Duration
			for range b.N {
				before := cpuTime()
				s, err := OpenState(dir, func(string) {})
				if err != nil {
					b.Fatal(err)
				}
				cpu += cpuTime() - before
				b.StopTimer()
				if n := len(s.View().Jobs()); n != 100_000 {
					b.Fatalf("%d jobs", n)
				}
				s.Close()
				b.StartTimer()
			}
			// On a machine others share, the CPU it took says more than the wall time.
			b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
		})
	}
}

// BenchmarkCompact measures what a clean stop (and every 20,000 records, the engine)
// spends writing the snapshot of 100,000 jobs, queued or finished.
//
//	go test -run '^$' -bench Compact -benchtime 3x ./scheduler/state/
func BenchmarkCompact(b *testing.B) {
	for _, h := range []befell{queued, finished, retried} {
		b.Run(h.String(), func(b *testing.B) {
			dir := b.TempDir()
			makeHistory(b, dir, 100_000, h, true)
			s, err := OpenState(dir, func(string) {})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			b.ResetTimer()
			for range b.N {
				if err := s.Compact(); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			fi, _ := os.Stat(filepath.Join(dir, snapshotFile))
			b.ReportMetric(float64(fi.Size())/1e6, "snapshot-MB")
		})
	}
}

// befell is what befell the jobs of a state that makeHistory writes.
type befell int

const (
	queued   befell = iota // nothing: queued as submitted
	finished               // each started and ended
	retried                // held, released, cancelled and retried, by the sweep
)

func (h befell) String() string { return [...]string{"queued", "finished", "retried"}[h] }

// makeHistory writes a state of n jobs to dir: submitted, and then as h says: each
// started in rounds of 64 (one record a round) and ended one record each, with its
// count, as the engine writes them; or each held, released, cancelled and retried a
// record each, as the engine's verbs of a sweep write them. With clean the state is
// compacted at the end, as a clean stop does.
func makeHistory(tb testing.TB, dir string, n int, h befell, clean bool) {
	tb.Helper()
	seeds := make([]string, n/1000)
	for i := range seeds {
		seeds[i] = fmt.Sprint(i)
	}
	lrs := make([]string, 1000)
	for i := range lrs {
		lrs[i] = fmt.Sprintf("%g", 1e-5*float64(i+1))
	}
	src := fmt.Sprintf("name: big\ncommand: [train, \"{lr}\", \"{seed}\"]\nmatrix: {lr: [%s], seed: [%s]}\nshape_ignores: [seed]\nmemory: 4GiB\n",
		strings.Join(lrs, ", "), strings.Join(seeds, ", "))
	sw, err := plans.DecodeSweep(filepath.Join(dir, "big.yaml"), []byte(src), plans.Overrides{})
	if err != nil {
		tb.Fatal(err)
	}
	s, err := OpenState(dir, func(string) {})
	if err != nil {
		tb.Fatal(err)
	}
	// Each record is synced as the engine does not: what is measured is the reading.
	s.WrapJournal(func(f JournalFile) JournalFile { return unsynced{f} })
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	if err := s.Submit(&Submission{Sweep: sw, Environ: os.Environ(), Submitted: at}); err != nil {
		tb.Fatal(err)
	}
	if h == retried {
		bySweep(tb, s, at)
	}
	for start := 0; h == finished && start < n; start += 64 {
		var round Change
		snap := s.View()
		for i := start; i < min(n, start+64); i++ {
			j := *snap.Job(sw.Jobs[i].ID)
			j.State, j.Attempts = JobRunning, 1
			round.Jobs = append(round.Jobs, &j)
			round.Attempts = append(round.Attempts, &Attempt{ID: AttemptID(j.ID, 1), Job: j.ID, Shape: j.Shape, N: 1, GPUs: []int{i % 8},
				Params: j.Current, Estimate: j.Estimate, Reserve: j.Estimate, Leader: 1000 + i, Started: at,
				Log: filepath.Join(dir, "attempts", j.ID, "attempt-1", "log")})
		}
		if err := s.Put(round); err != nil {
			tb.Fatal(err)
		}
		for k, j := range round.Jobs {
			done, a := *j, *round.Attempts[k]
			done.State, done.Ended = JobSucceeded, at.Add(time.Hour)
			a.Outcome, a.Ended, a.Peak = plans.Success, at.Add(time.Hour), 3<<30
			a.Memory = Samples{{At: time.Minute, Bytes: 2 << 30}, {At: 10 * time.Minute, Bytes: 3 << 30}}
			ended := Change{Jobs: []*Job{&done}, Attempts: []*Attempt{&a}, Tallies: []*Tally{s.View().Counted(&a)}}
			if err := s.Put(ended); err != nil {
				tb.Fatal(err)
			}
		}
	}
	if clean {
		if err := s.Compact(); err != nil {
			tb.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		tb.Fatal(err)
	}
}

// bySweep holds, releases, cancels and retries every job of the store, a record each,
// as the engine's verbs of a sweep change them.
func bySweep(tb testing.TB, s *Store, at time.Time) {
	tb.Helper()
	for _, change := range []func(*Job){
		func(j *Job) { j.Held = true },
		func(j *Job) { j.Held = false },
		func(j *Job) { j.State, j.Reason, j.Ended = JobCancelled, "cancelled while queued", at.Add(time.Minute) },
		func(j *Job) { j.State, j.Reason, j.Ended, j.Queued = JobQueued, "", time.Time{}, at.Add(2*time.Minute) },
	} {
		var c Change
		for _, j := range s.View().Jobs() {
			cp := *j
			change(&cp)
			c.Jobs = append(c.Jobs, &cp)
		}
		if err := s.Put(c); err != nil {
			tb.Fatal(err)
		}
	}
}

// unsynced is a journal file whose records are not synced one by one.
type unsynced struct{ JournalFile }

func (unsynced) Sync() error { return nil }

// cpuTime is the CPU time the process has taken, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
