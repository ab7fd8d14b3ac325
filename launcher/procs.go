package launcher

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"
)

// An attempt's processes are those that inherit its identity, GPUQ_ATTEMPT_DIR in the
// environment, not those of its session: torchrun, accelerate and deepspeed start their
// workers in new sessions (start_new_session=True). /proc/<pid>/environ is the
// environment a process was started with; what it does to its environment later does not
// change it, so no process of an attempt can leave. Where a process's environment names
// no attempt or cannot be read (another user's, a non-dumpable one, a zombie) its parent
// speaks for it.
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

// stat reads a process's state, parent, session and resident pages from
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
	sid, err2 := strconv.Atoi(f[3])
	start, err3 := strconv.ParseUint(f[19], 10, 64)
	rss, err4 := strconv.ParseInt(f[21], 10, 64)
	st.zombie, st.ppid, st.sid, st.start, st.rssPages = f[0] == "Z", ppid, sid, start, rss
	return st, err1 == nil && err2 == nil && err3 == nil && err4 == nil
}

type procStat struct {
	// zombie: it has exited, its memory and files are released, and it waits for its
	// parent to reap it.
	zombie    bool
	ppid, sid int
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

// members returns the live processes that m tells.
func (fs procFS) members(m mark) []int {
	if m.match == nil {
		return nil
	}
	var out []int
	known := map[int]string{}
	for _, pid := range fs.pids() {
		if v, ok := fs.owner(pid, m.name, known); ok && m.match(v) {
			out = append(out, pid)
		}
	}
	return out
}

// memory is what the processes of each attempt under root hold of host RAM, by attempt
// id: the sum of their proportional set sizes, so that the pages a data loader's forked
// workers share with their parent count once, or their resident sets where the kernel
// has no smaps_rollup. Attempts with no process left are absent.
func (fs procFS) memory(root string) map[string]int64 {
	out := map[string]int64{}
	page := int64(os.Getpagesize())
	known := map[int]string{}
	for _, pid := range fs.pids() {
		dir, ok := fs.owner(pid, attemptDirVar, known)
		if !ok {
			continue
		}
		attempt, ok := attemptIn(root, dir)
		if !ok {
			continue
		}
		if pss, ok := fs.pss(pid); ok {
			out[attempt] += pss
		} else if st, ok := fs.stat(pid); ok {
			out[attempt] += st.rssPages * page
		}
	}
	return out
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
// '∕', a leading '.' is '_', and it is cut to 200 bytes.
func LinkName(root, sweep, name, job string) error {
	if _, err := JobDir(root, job); err != nil || !filepath.IsLocal(sweep) || strings.ContainsRune(sweep, filepath.Separator) {
		return fmt.Errorf("job %q of sweep %q cannot name a link", job, sweep)
	}
	dir := filepath.Join(root, byName, sweep)
	link := filepath.Join(dir, fileName(name))
	target := filepath.Join("..", "..", job)
	if old, err := os.Readlink(link); err == nil && old == target {
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
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

// fileName is a job's name as one element of a path.
func fileName(name string) string {
	name = strings.ReplaceAll(name, "/", "∕")
	if strings.HasPrefix(name, ".") {
		name = "_" + name[1:]
	}
	for len(name) > 200 {
		_, size := utf8.DecodeLastRuneInString(name)
		name = name[:len(name)-size]
	}
	return name
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
// by attempt id (see procFS.memory).
func AttemptMemory(root string) map[string]int64 { return hostProcs.memory(root) }
