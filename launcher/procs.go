package launcher

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
	"unsafe"

	"golang.org/x/sys/unix"
)

// An attempt's processes are those that inherit its identity, GPUQ_ATTEMPT_DIR in the
// environment, not those of its session: torchrun, accelerate and deepspeed start their
// workers in new sessions (start_new_session=True). /proc/<pid>/environ is the
// environment a process was started with; what it does to its environment later does not
// change it, so no process of an attempt can leave. Where a process's environment names
// no attempt or cannot be read (another user's, a non-dumpable one, a zombie) its parent
// speaks for it.
//
// Only the processes that can be an attempt's are read, not every process on the
// machine (a GPU node shared with data loaders, notebooks and other users has
// thousands): gpuq run, a supervisor, a daemon and a worker are subreapers, so that
// every process a trainer starts stays under them, and an attempt's processes are
// among their descendants (see scope). A supervisor that is gone, or a gpuq run
// killed, leaves its attempts' processes anywhere: what is left of them is looked for
// among every process.
//
// The directory, unlike GPUQ_JOB_ID and GPUQ_ATTEMPT, is unique to one gpuq: two runs
// of one sweep at once have the same job ids, not the same attempt directories.
const attemptDirVar = "GPUQ_ATTEMPT_DIR"

// procFS reads processes from a proc filesystem: "/proc", or a fake tree in tests.
type procFS string

const hostProcs procFS = "/proc"

// maxAncestors bounds the walk up a parent chain: process trees are shallow, and a
// chain that changes while it is read must not loop.
const maxAncestors = 64

func (fs procFS) path(pid int, name string) string {
	return filepath.Join(string(fs), strconv.Itoa(pid), name)
}

// stat reads a process's state, parent, group, session and resident pages from
// /proc/<pid>/stat.
func (fs procFS) stat(pid int) (st procStat, ok bool) {
	data, err := os.ReadFile(fs.path(pid, "stat"))
	if err != nil {
		return st, false
	}
	// The command name may hold spaces and parentheses: fields start after the last ')'.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return st, false
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 22 {
		return st, false
	}
	// Fields of stat(5) from the third: state ppid pgrp session ... starttime (the
	// 22nd) vsize rss.
	ppid, err1 := strconv.Atoi(f[1])
	pgrp, err2 := strconv.Atoi(f[2])
	sid, err3 := strconv.Atoi(f[3])
	start, err4 := strconv.ParseUint(f[19], 10, 64)
	rss, err5 := strconv.ParseInt(f[21], 10, 64)
	st.zombie, st.ppid, st.pgrp, st.sid, st.start, st.rssPages = f[0] == "Z", ppid, pgrp, sid, start, rss
	return st, err1 == nil && err2 == nil && err3 == nil && err4 == nil && err5 == nil
}

type procStat struct {
	// zombie: it has exited, its memory and files are released, and it waits for its
	// parent to reap it.
	zombie          bool
	ppid, pgrp, sid int
	// start is when it started, in clock ticks after boot: with the pid, it names one
	// process.
	start    uint64
	rssPages int64
}

// envValue returns the value of the variable name in a process's environment, "" where
// it names none or cannot be read (another user's, a zombie's).
func (fs procFS) envValue(pid int, name string) string {
	data, err := os.ReadFile(fs.path(pid, "environ"))
	if err != nil {
		return ""
	}
	for kv := range bytes.SplitSeq(data, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte(name+"=")); ok {
			return string(v)
		}
	}
	return ""
}

// A mark tells a group of processes by a variable of the environment they inherit: an
// attempt's (GPUQ_ATTEMPT_DIR, its directory), a notify hook's. match says which values
// of the variable name belong to the group.
type mark struct {
	name  string
	match func(value string) bool
}

// attemptMark tells the processes of the attempt in dir.
func attemptMark(dir string) mark {
	return mark{attemptDirVar, func(v string) bool { return v == dir }}
}

// attemptsUnder tells the processes of every attempt laid out under root.
func attemptsUnder(root string) mark {
	return mark{attemptDirVar, func(v string) bool {
		_, ok := attemptIn(root, v)
		return ok
	}}
}

// owner returns the value of the variable name (GPUQ_ATTEMPT_DIR: the directory of
// the attempt a process belongs to) that a process inherited: the one in its environment
// or, where that names none or cannot be read (a trainer may start a helper with a clean
// environment), its parent's. known, if not nil, holds what earlier calls of one scan
// for the same variable found, and learns what this one finds.
func (fs procFS) owner(pid int, name string, known map[int]string) (string, bool) {
	var walked []int
	value := ""
	for range maxAncestors {
		if v, ok := known[pid]; ok {
			value = v
			break
		}
		walked = append(walked, pid)
		if v := fs.envValue(pid, name); v != "" {
			value = v
			break
		}
		st, ok := fs.stat(pid)
		if !ok || st.ppid <= 1 {
			break
		}
		pid = st.ppid
	}
	if known != nil {
		for _, p := range walked {
			known[p] = value
		}
	}
	return value, value != ""
}

// children lists a process's children: every thread's, since a child belongs to the
// thread that started it, and an orphan handed to a subreaper to one of its threads
// (/proc/PID/task/TID/children, Linux 3.5 and later with CONFIG_PROC_CHILDREN). A
// thread that ends while they are read has none left. ok is false where the kernel
// lists no children this way, or the process is gone.
func (fs procFS) children(pid int) (kids []int, ok bool) {
	tasks, err := os.ReadDir(fs.path(pid, "task"))
	if err != nil {
		return nil, false
	}
	for _, t := range tasks {
		data, err := os.ReadFile(filepath.Join(string(fs), strconv.Itoa(pid), "task", t.Name(), "children"))
		if err != nil {
			continue
		}
		ok = true
		for f := range strings.FieldsSeq(string(data)) {
			if kid, err := strconv.Atoi(f); err == nil {
				kids = append(kids, kid)
			}
		}
	}
	return kids, ok
}

// descendants lists the processes under top: its children, theirs, and so on. What it
// reads grows with them, not with the machine's processes, where the kernel lists
// children; where it does not, every process's parent is read once instead.
//
// The tree is read twice: a process whose parent dies moves up to a subreaper above it
// (top, say), and one that moved there from a part of the tree not read yet after top's
// children were read is in neither list the first time, and in top's the second.
func (fs procFS) descendants(top int) []int {
	first, ok := fs.walk(top)
	if !ok {
		// A top that is gone has nothing under it: what it left moved up. Only where
		// the kernel lists no children is every process read, not for each supervisor
		// that ended since it was listed (hundreds a second with short trainers).
		if _, alive := fs.stat(top); !alive {
			return nil
		}
		return fs.descendantsByParent(top)
	}
	second, _ := fs.walk(top)
	seen := make(map[int]bool, len(first))
	for _, pid := range first {
		seen[pid] = true
	}
	for _, pid := range second {
		if !seen[pid] {
			first = append(first, pid)
		}
	}
	return first
}

// walk lists the processes under top from their children; ok is false where the kernel
// lists no children.
func (fs procFS) walk(top int) (out []int, ok bool) {
	for next := []int{top}; len(next) > 0; {
		pid := next[len(next)-1]
		next = next[:len(next)-1]
		kids, listed := fs.children(pid)
		if !listed {
			if pid == top {
				return nil, false
			}
			continue // gone since its parent listed it
		}
		out = append(out, kids...)
		next = append(next, kids...)
	}
	return out, true
}

// descendantsByParent lists the processes under top from every process's parent.
func (fs procFS) descendantsByParent(top int) []int {
	kids := map[int][]int{}
	for _, pid := range fs.pids() {
		if st, ok := fs.stat(pid); ok {
			kids[st.ppid] = append(kids[st.ppid], pid)
		}
	}
	var out []int
	for next := []int{top}; len(next) > 0; {
		pid := next[len(next)-1]
		next = append(next[:len(next)-1], kids[pid]...)
		out = append(out, kids[pid]...)
	}
	return out
}

// pids lists the processes of the tree.
func (fs procFS) pids() []int {
	ents, err := os.ReadDir(string(fs))
	if err != nil {
		return nil
	}
	out := make([]int, 0, len(ents))
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// members returns the live processes that m tells, among those under top (see
// scope), or among every process where top is 0.
func (fs procFS) members(m mark, top int) []int {
	if m.match == nil {
		return nil
	}
	var out []int
	known := map[int]string{}
	for _, pid := range fs.candidates(top) {
		if v, ok := fs.owner(pid, m.name, known); ok && m.match(v) {
			out = append(out, pid)
		}
	}
	return out
}

// candidates are the processes under top, or every process where top is 0.
func (fs procFS) candidates(top int) []int {
	if top == 0 {
		return fs.pids()
	}
	if fs == hostProcs && top == os.Getpid() && !hasChildren() {
		// Nothing is under it: the usual end of a supervisor's trainer, which leaves
		// nothing running. Its /proc is not read, for the kernel pays for what was
		// read there (its threads' entries, cached) as it is reaped: half a millisecond
		// of its daemon's CPU a supervisor, measured.
		return nil
	}
	return fs.descendants(top)
}

// hasChildren reports whether this process has a child: running, stopped, or ended and
// not yet reaped (WNOWAIT reaps none), whether it started it or it was handed to it as
// a subreaper.
func hasChildren() bool {
	var info unix.Siginfo
	err := unix.Waitid(unix.P_ALL, 0, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT|unix.WALL, nil)
	return !errors.Is(err, unix.ECHILD)
}

// scope is the process whose descendants are all that this process's attempts (and
// hooks) can have: itself, where it is a subreaper (see BecomeSubreaper), since every
// process a trainer starts, in whatever session, stays under it: a child's parent
// changes only when the parent dies, and then to the nearest subreaper above it. Where
// it is not one, 0: a process of an attempt may be anywhere, and every process is read.
func scope() int {
	var on int32
	if err := unix.Prctl(unix.PR_GET_CHILD_SUBREAPER, uintptr(unsafe.Pointer(&on)), 0, 0, 0); err != nil || on == 0 {
		return 0
	}
	return os.Getpid()
}

// memory is what the processes of each attempt under root hold of host RAM, by attempt
// id, among the processes under tops (see descendants): the sum of their proportional
// set sizes, so that the pages a data loader's forked workers share with their parent
// count once, or their resident sets where the kernel has no smaps_rollup. Attempts
// with no process left are absent.
func (fs procFS) memory(root string, tops []int) map[string]int64 {
	out := map[string]int64{}
	page := int64(os.Getpagesize())
	known := map[int]string{}
	seen := map[int]bool{}
	for _, top := range tops {
		for _, pid := range fs.descendants(top) {
			if seen[pid] {
				continue
			}
			seen[pid] = true
			fs.addMemory(out, root, pid, known, page)
		}
	}
	return out
}

// addMemory adds what process pid holds to its attempt's, where it is of an attempt
// under root. page is the size of a page, for a resident set.
func (fs procFS) addMemory(out map[string]int64, root string, pid int, known map[int]string, page int64) {
	dir, ok := fs.owner(pid, attemptDirVar, known)
	if !ok {
		return
	}
	attempt, ok := attemptIn(root, dir)
	if !ok {
		return
	}
	if pss, ok := fs.pss(pid); ok {
		out[attempt] += pss
	} else if st, ok := fs.stat(pid); ok {
		out[attempt] += st.rssPages * page
	}
}

func (fs procFS) pss(pid int) (int64, bool) {
	data, err := os.ReadFile(fs.path(pid, "smaps_rollup"))
	if err != nil {
		return 0, false
	}
	return meminfoField(data, "Pss:")
}

// The attempts' layout, defined here alone: attempt n of a job lives under a root (the
// daemon's <state dir>/attempts, gpuq run's run directory) in root/<job>/attempt-<n>/,
// and root/by-name/<sweep>/<job's name> links to root/<job>, so that a person finds a
// job's logs by its point (ls attempts/by-name/gla-e1/).

// byName is the directory of the links by name under a root: not a job id, which ends
// in .<n>.
const byName = "by-name"

// LinkName links root/by-name/<sweep>/<name> to the job's directory, or leaves the link
// that does already; a link of that name to another job (a sweep of the same name,
// submitted again after gpuq clean) is replaced. A name is made a file name: '/' is
// '∕', a leading '.' is '_', and one past 200 bytes is cut in its middle (see fileName).
func LinkName(root, sweep, name, job string) error {
	if _, err := JobDir(root, job); err != nil || !filepath.IsLocal(sweep) || strings.ContainsRune(sweep, filepath.Separator) {
		return fmt.Errorf("job %q of sweep %q cannot name a link", job, sweep)
	}
	dir := filepath.Join(root, byName, sweep)
	link := filepath.Join(dir, fileName(name))
	target := filepath.Join("..", "..", job)
	// Made at once where there is none, as for most jobs (a job's first attempt): one
	// call, where looking first took five, and a daemon links a job a start.
	err := os.Symlink(target, link)
	if errors.Is(err, fs.ErrNotExist) { // the sweep's first
		if err = os.MkdirAll(dir, 0o700); err == nil {
			err = os.Symlink(target, link)
		}
	}
	if !errors.Is(err, fs.ErrExist) {
		return err
	}
	if old, err := os.Readlink(link); err == nil && old == target {
		return nil
	}
	tmp := link + ".new"
	os.Remove(tmp)
	if err := os.Symlink(target, tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, link); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// UnlinkNames removes the links by name of a sweep's jobs under root (gpuq clean).
func UnlinkNames(root, sweep string) error {
	if !filepath.IsLocal(sweep) || strings.ContainsRune(sweep, filepath.Separator) {
		return fmt.Errorf("sweep %q cannot name a directory", sweep)
	}
	return os.RemoveAll(filepath.Join(root, byName, sweep))
}

// fileName is a job's name as one element of a path. A name longer than 200 bytes
// keeps its start and its end (where a seed tells points apart) around a hash of the
// whole, so that two long names cut alike stay two files.
func fileName(name string) string {
	name = strings.ReplaceAll(name, "/", "∕")
	if strings.HasPrefix(name, ".") {
		name = "_" + name[1:]
	}
	if len(name) <= 200 {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	mid := "…" + hex.EncodeToString(sum[:4]) + "…"
	end := name[len(name)-60:]
	for !utf8.ValidString(end) { // begin at a rune's start
		end = end[1:]
	}
	start := name[:200-len(mid)-len(end)]
	for !utf8.ValidString(start) {
		start = start[:len(start)-1]
	}
	return start + mid + end
}

// JobOf is the gpuq job a process belongs to, by the GPUQ_JOB_ID and GPUQ_JOB_NAME it
// inherited (or its parent's, where its environment names none): of any gpuq of this
// user, whatever its root. ok is false for a process of no job, or another user's.
func JobOf(pid int) (id, name string, ok bool) {
	if id, ok = hostProcs.owner(pid, "GPUQ_JOB_ID", nil); ok {
		name, _ = hostProcs.owner(pid, "GPUQ_JOB_NAME", nil)
	}
	return id, name, ok
}

// AttemptDir is where attempt n of a job lives under root.
func AttemptDir(root, job string, n int) (string, error) {
	dir, err := JobDir(root, job)
	if err != nil || n < 1 {
		return "", fmt.Errorf("attempt %d of job %q cannot name a directory", n, job)
	}
	return filepath.Join(dir, "attempt-"+strconv.Itoa(n)), nil
}

// JobDir is where a job's attempts live under root. Job ids are "<sweep>.<n>" with a
// sweep name of [a-z0-9._-], so a job is one local path element; anything else is
// refused rather than joined.
func JobDir(root, job string) (string, error) {
	if !filepath.IsLocal(job) || strings.ContainsRune(job, filepath.Separator) {
		return "", fmt.Errorf("job %q cannot name a directory", job)
	}
	return filepath.Join(root, job), nil
}

// attemptIn is the attempt whose directory under root is dir, as AttemptDir lays it out.
func attemptIn(root, dir string) (string, bool) {
	root, err := filepath.Abs(root)
	if err != nil {
		return "", false
	}
	rel, err := filepath.Rel(root, dir)
	if err != nil {
		return "", false
	}
	job, leaf, ok := strings.Cut(rel, string(filepath.Separator))
	n, isAttempt := strings.CutPrefix(leaf, "attempt-")
	if !ok || !isAttempt || !filepath.IsLocal(job) || strings.ContainsRune(n, filepath.Separator) {
		return "", false
	}
	return job + "/" + n, true
}

// OwnerIn returns the attempt, among those laid out under root, that process pid
// belongs to.
func OwnerIn(root string, pid int) (attempt string, ok bool) {
	dir, ok := hostProcs.owner(pid, attemptDirVar, nil)
	if !ok {
		return "", false
	}
	return attemptIn(root, dir)
}

// AttemptMemory is what the processes of each attempt under root hold of host RAM now,
// by attempt id, among the processes under tops (see procFS.memory): the supervisors
// of a daemon's or a worker's attempts, or gpuq run itself. Nothing is read where tops
// is empty.
func AttemptMemory(root string, tops []int) map[string]int64 { return hostProcs.memory(root, tops) }

// Owners tells which attempt laid out under root each process belongs to, as OwnerIn
// does, and whether it is a trainer of another gpuq (an attempt laid out elsewhere),
// and keeps what it found by pid and start time, which together name one process: a
// process an engine sees on a card at every round is read once, and a stranger's,
// whose parents are read up to init, too.
type Owners struct {
	root  string
	fs    procFS
	mu    sync.Mutex
	known map[Proc]owner
}

// owner is what a process was found to be: its attempt under an Owners' root, or
// another gpuq's trainer.
type owner struct {
	attempt string
	trainer bool
}

// maxOwners bounds what Owners keeps: it forgets everything past it, since the
// processes that come and go on a machine's cards are far fewer.
const maxOwners = 1 << 14

// NewOwners tells the processes of the attempts under root.
func NewOwners(root string) *Owners {
	return &Owners{root: root, fs: hostProcs, known: map[Proc]owner{}}
}

// Of is the attempt process pid belongs to.
func (o *Owners) Of(pid int) (attempt string, ok bool) {
	w := o.find(pid)
	return w.attempt, w.attempt != ""
}

// Trainer reports whether process pid is a trainer of any gpuq, its own or
// another's (another daemon's, a gpuq run's): one whose environment, or an ancestor's,
// names an attempt's directory, wherever that is.
func (o *Owners) Trainer(pid int) bool { return o.find(pid).trainer }

// find is what process pid is, as kept or read now; nothing for a process gone.
func (o *Owners) find(pid int) owner {
	st, alive := o.fs.stat(pid)
	if !alive {
		return owner{}
	}
	key := Proc{PID: pid, Start: st.start}
	o.mu.Lock()
	w, known := o.known[key]
	o.mu.Unlock()
	if !known {
		if dir, ok := o.fs.owner(pid, attemptDirVar, nil); ok {
			w.attempt, _ = attemptIn(o.root, dir)
			w.trainer = true
		}
		o.mu.Lock()
		if len(o.known) >= maxOwners {
			clear(o.known)
		}
		o.known[key] = w
		o.mu.Unlock()
	}
	return w
}

// Proc is one process: its pid, and when it started, which tells it from a process
// that took the pid after it ended.
type Proc struct {
	PID   int
	Start uint64
}

// FindProc is the process pid now; ok is false where there is none.
func FindProc(pid int) (p Proc, ok bool) {
	st, ok := hostProcs.stat(pid)
	return Proc{PID: pid, Start: st.start}, ok
}

// Alive reports whether p runs still (or has ended and waits to be reaped).
func (p Proc) Alive() bool {
	st, ok := hostProcs.stat(p.PID)
	return ok && st.start == p.Start
}
