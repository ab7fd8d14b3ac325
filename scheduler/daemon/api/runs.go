package api

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpuq/gpuq/scheduler"
)

// A gpuq run in the foreground serves the daemon's API for its one sweep, read and act
// (status, why, logs, attach, top, cancel, hold...), on a socket of its own in the
// state directory, so that the verbs find it as they find the daemon: runs/<sweep>.<pid>.sock.

// RunsDir is where the sockets of the gpuq runs of a state directory are.
func RunsDir(dir string) string { return filepath.Join(dir, "runs") }

// Reserve holds a sweep's name for a gpuq run, from before it serves the sweep (its
// socket tells the others its name) until it closes the file returned or ends: two
// runs started at once, each finding a name free, must not both take it. It returns
// false, and no file, where another run holds the name. The file says which process
// holds it (see RunStarting).
func Reserve(dir, sweep string) (*os.File, bool, error) {
	names := namesDir(dir)
	if err := os.MkdirAll(names, 0o700); err != nil {
		return nil, false, err
	}
	f, err := os.OpenFile(filepath.Join(names, sweep), os.O_CREATE|os.O_RDWR|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, false, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, false, nil
		}
		return nil, false, err
	}
	// Held all the same where it cannot be written: RunStarting cannot tell it.
	if f.Truncate(0) == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())), 0)
	}
	return f, true, nil
}

// namesDir holds the files of the names runs hold (see Reserve): out of sight, since
// runs' logs may be beside it.
func namesDir(dir string) string { return filepath.Join(RunsDir(dir), ".names") }

// RunStarting reports whether a gpuq run holds sweep's name on the state directory dir
// (see Reserve): from before it opens its cards until it ends. One that does not serve
// the sweep yet is starting. It takes no lock, which would refuse a run that tried to
// meanwhile.
func RunStarting(dir, sweep string) bool {
	_, ok := RunHolder(dir, sweep)
	return ok
}

// RunHolder is the pid of the gpuq run that holds sweep's name on the state directory
// dir (see Reserve), whether it serves the sweep yet or not; false where none does.
func RunHolder(dir, sweep string) (int, bool) {
	return holder(filepath.Join(namesDir(dir), sweep))
}

// RunSocket is the socket of the gpuq run of a sweep, of pid.
func RunSocket(dir, sweep string, pid int) string {
	return filepath.Join(RunsDir(dir), fmt.Sprintf("%s.%d.sock", sweep, pid))
}

// Run is a gpuq run that serves the API for its sweep.
type Run struct {
	Sweep  string `json:"sweep"`
	PID    int    `json:"pid"`
	Socket string `json:"-"`
}

// Record is where a gpuq run that has ended left its jobs as they ended, beside its
// socket: a gpuq wait or logs -f that followed them learns there how they ended.
func (r Run) Record() string { return strings.TrimSuffix(r.Socket, ".sock") + recordSuffix }

const recordSuffix = ".ended.json"

// recordKept is how long a gpuq run's record is kept where a later run of its sweep
// left one too: for the wait and logs -f that followed its jobs as it ended. The
// latest record of each sweep is kept until another replaces it: gpuq results and
// report read a sweep's from it, days later too (see LastEnded).
const recordKept = 24 * time.Hour

// RunRecord is what a gpuq run leaves as it ends (see Record).
type RunRecord struct {
	// Ended is when the run ended; zero in a record left by a gpuq from before it was
	// kept, which ended when the file was last modified (see records).
	Ended time.Time `json:"ended,omitzero"`
	Jobs  []Job     `json:"jobs"`
	// GPUs are the cards it ran on, which gpuq report sizes each card's chart by; none
	// in a record left by a gpuq from before they were kept.
	GPUs []GPUInfo `json:"gpus,omitempty"`
	// Events are the run's latest events as it ended, oldest first, as its overview
	// had them (gpuq top shows them once the run has ended); none in a record left by
	// a gpuq from before they were kept.
	Events []Event `json:"events,omitempty"`
}

// ReadRecord reads what a gpuq run left as it ended; an error where it left nothing
// (it was killed: fs.ErrNotExist) or what it left cannot be read.
func (r Run) ReadRecord() (RunRecord, error) {
	var rec RunRecord
	data, err := os.ReadFile(r.Record())
	if err == nil {
		err = json.Unmarshal(data, &rec)
	}
	if err != nil {
		return RunRecord{}, err
	}
	return rec, nil
}

// Ended reads the jobs a gpuq run left as they ended (see ReadRecord).
func (r Run) Ended() ([]Job, bool) {
	rec, err := r.ReadRecord()
	return rec.Jobs, err == nil
}

// LastEnded is what the gpuq run of a sweep that ended last left in a state directory
// (see Record), of the runs whose record can be read, with the run and the time it
// ended; false where none can. damaged is told of each later record that cannot be
// read (empty, cut short), which it passes over.
func LastEnded(dir, sweep string, damaged func(path string, err error)) (Run, RunRecord, time.Time, bool) {
	recs := records(dir)
	slices.SortFunc(recs, func(a, b record) int { return b.ended.Compare(a.ended) })
	for _, rec := range recs {
		if rec.run.Sweep != sweep {
			continue
		}
		got, err := rec.run.ReadRecord()
		switch {
		case err == nil:
			return rec.run, got, rec.ended, true
		case !errors.Is(err, fs.ErrNotExist): // not removed meanwhile
			damaged(rec.run.Record(), err)
		}
	}
	return Run{}, RunRecord{}, time.Time{}, false
}

// EndedSweeps are the sweeps of the gpuq runs that left their record (see Record) in a
// state directory as they ended, each once.
func EndedSweeps(dir string) []string {
	var out []string
	for _, rec := range records(dir) {
		if !slices.Contains(out, rec.run.Sweep) {
			out = append(out, rec.run.Sweep)
		}
	}
	return out
}

// record is a gpuq run's record, found in a state directory: the run it is of, and
// when it ended.
type record struct {
	run   Run
	ended time.Time
}

// records lists the records of the gpuq runs of a state directory. Each ended when its
// record says (see storedEnd); one left by a gpuq from before it said so, when the file
// was last modified, which a copy of the directory that does not keep the times moves.
func records(dir string) []record {
	entries, err := os.ReadDir(RunsDir(dir))
	if err != nil {
		return nil
	}
	var out []record
	for _, e := range entries {
		base, ok := strings.CutSuffix(e.Name(), recordSuffix)
		dot := strings.LastIndexByte(base, '.')
		if !ok || dot < 0 || !e.Type().IsRegular() {
			continue
		}
		pid, err := strconv.Atoi(base[dot+1:])
		info, ierr := e.Info()
		if err != nil || ierr != nil {
			continue
		}
		r := Run{Sweep: base[:dot], PID: pid, Socket: filepath.Join(RunsDir(dir), base+".sock")}
		ended, ok := storedEnd(r.Record())
		if !ok {
			ended = info.ModTime()
		}
		out = append(out, record{r, ended})
	}
	return out
}

// storedEnd is the end time a gpuq run's record holds, read from its first field, where
// WriteRunRecord puts it, so that listing records does not read their jobs; false where
// the record has none there (an older gpuq's) or cannot be read.
func storedEnd(path string) (time.Time, bool) {
	f, err := os.Open(path)
	if err != nil {
		return time.Time{}, false
	}
	defer f.Close()
	dec := json.NewDecoder(io.LimitReader(f, 1<<10))
	var ended time.Time
	if open, err := dec.Token(); err != nil || open != json.Delim('{') {
		return time.Time{}, false
	}
	if key, err := dec.Token(); err != nil || key != "ended" {
		return time.Time{}, false
	}
	if err := dec.Decode(&ended); err != nil || ended.IsZero() {
		return time.Time{}, false
	}
	return ended.Local(), true
}

// EndedJob is job id among the jobs a gpuq run left as they ended (see Run.Ended).
func EndedJob(jobs []Job, id string) (Job, error) {
	for _, j := range jobs {
		if j.ID == id {
			return j, nil
		}
	}
	ids := make([]string, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
	}
	return Job{}, scheduler.NoJob(id, ids)
}

// listed are the jobs of a sweep ("" for every sweep) in the given states (none: every
// state), as a daemon lists them.
func listed(jobs []Job, sweep string, states []string) []Job {
	out := []Job{}
	for _, j := range jobs {
		if (sweep == "" || j.Sweep == sweep) && (len(states) == 0 || slices.Contains(states, j.State)) {
			out = append(out, j)
		}
	}
	return out
}

// statesOf answers a StatesRequest from jobs, as a daemon does.
func statesOf(jobs []Job, req StatesRequest) ([]JobState, error) {
	var out []JobState
	if len(req.IDs) == 0 {
		for _, j := range listed(jobs, req.Sweep, nil) {
			out = append(out, JobState{ID: j.ID, State: j.State})
		}
		return out, nil
	}
	for _, id := range req.IDs {
		j, err := EndedJob(jobs, id)
		if err != nil {
			return nil, err
		}
		out = append(out, JobState{ID: id, State: j.State})
	}
	return out, nil
}

// WriteRecord writes what a gpuq run leaves as it ends (see Record): the RunRecord write
// writes (WriteRunRecord), in a file this user alone reads (they hold the trainers'
// commands), whole or not at all.
func (r Run) WriteRecord(write func(io.Writer) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(r.Socket), ".record-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := write(tmp); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), r.Record())
}

// Runs lists the gpuq runs of a state directory, by sweep. The socket of a run that no
// longer runs (killed with SIGKILL, it could not remove it) is removed, and so is the
// record of one that ended more than recordKept ago where a later run of its sweep
// left one.
func Runs(dir string) []Run {
	entries, err := os.ReadDir(RunsDir(dir))
	if err != nil {
		return nil
	}
	pruneRecords(dir)
	var out []Run
	for _, e := range entries {
		base, ok := strings.CutSuffix(e.Name(), ".sock")
		dot := strings.LastIndexByte(base, '.')
		if !ok || dot < 0 || e.Type()&os.ModeSocket == 0 {
			continue
		}
		pid, err := strconv.Atoi(base[dot+1:])
		if err != nil {
			continue
		}
		r := Run{Sweep: base[:dot], PID: pid, Socket: filepath.Join(RunsDir(dir), e.Name())}
		if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
			os.Remove(r.Socket)
			continue
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b Run) int { return strings.Compare(a.Sweep, b.Sweep) })
	return out
}

// pruneRecords removes the records of a state directory that ended more than
// recordKept ago, but the latest of each sweep.
func pruneRecords(dir string) {
	recs := records(dir)
	latest := map[string]time.Time{}
	for _, rec := range recs {
		if rec.ended.After(latest[rec.run.Sweep]) {
			latest[rec.run.Sweep] = rec.ended
		}
	}
	for _, rec := range recs {
		if rec.ended.Before(latest[rec.run.Sweep]) && time.Since(rec.ended) > recordKept {
			os.Remove(rec.run.Record())
		}
	}
}

// ForgetEnded removes the records (see Record) of the gpuq runs of a sweep ("" every
// sweep) in a state directory that ended before before (zero: whenever), as gpuq clean
// forgets the daemon's ended sweeps: gpuq results and report no longer read them. It
// returns the runs whose records it removed, by sweep.
func ForgetEnded(dir, sweep string, before time.Time) ([]Run, error) {
	var gone []Run
	var errs []error
	for _, rec := range records(dir) {
		if sweep != "" && rec.run.Sweep != sweep || !before.IsZero() && !rec.ended.Before(before) {
			continue
		}
		if err := os.Remove(rec.run.Record()); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		gone = append(gone, rec.run)
	}
	slices.SortFunc(gone, func(a, b Run) int { return cmp.Or(strings.Compare(a.Sweep, b.Sweep), a.PID-b.PID) })
	return gone, errors.Join(errs...)
}

// DialRun connects to a gpuq run's API.
func DialRun(dir string, r Run) (*Client, error) {
	c, err := dialSocket(dir, r.Socket, os.Getuid())
	if err != nil {
		return nil, fmt.Errorf("the gpuq run of sweep %s (pid %d): %w", r.Sweep, r.PID, err)
	}
	c.run = &r
	return c, nil
}

// Run is the gpuq run the client talks to; nil for a daemon.
func (c *Client) Run() *Run { return c.run }

// RunsText names runs for people: "qs (pid 12), gla (pid 14)".
func RunsText(runs []Run) string {
	parts := make([]string, len(runs))
	for i, r := range runs {
		parts[i] = fmt.Sprintf("%s (pid %d)", r.Sweep, r.PID)
	}
	return strings.Join(parts, ", ")
}
