package launcher

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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

// stat reads a process's parent, session and resident pages from /proc/<pid>/stat.
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
	// Fields of stat(5) from the third: state ppid pgrp session ... rss (the 24th).
	ppid, err1 := strconv.Atoi(f[1])
	sid, err2 := strconv.Atoi(f[3])
	rss, err3 := strconv.ParseInt(f[21], 10, 64)
	st.ppid, st.sid, st.rssPages = ppid, sid, rss
	return st, err1 == nil && err2 == nil && err3 == nil
}

type procStat struct {
	ppid, sid int
	rssPages  int64
}

// attemptDir returns the attempt directory in a process's environment, "" where it
// names none or cannot be read (another user's, a zombie's).
func (fs procFS) attemptDir(pid int) string {
	data, err := os.ReadFile(fs.path(pid, "environ"))
	if err != nil {
		return ""
	}
	for kv := range bytes.SplitSeq(data, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte(attemptDirVar+"=")); ok {
			return string(v)
		}
	}
	return ""
}

// owner returns the attempt directory of the attempt a process belongs to: the one in
// its environment or, where that names none or cannot be read (a trainer may start a
// helper with a clean environment), its parent's. known, if not nil, holds what earlier
// calls of one scan found, and learns what this one finds.
func (fs procFS) owner(pid int, known map[int]string) (string, bool) {
	var walked []int
	dir := ""
	for range maxAncestors {
		if d, ok := known[pid]; ok {
			dir = d
			break
		}
		walked = append(walked, pid)
		if d := fs.attemptDir(pid); d != "" {
			dir = d
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
			known[p] = dir
		}
	}
	return dir, dir != ""
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

// members returns the live processes of the attempt in dir.
func (fs procFS) members(dir string) []int {
	if dir == "" {
		return nil
	}
	var out []int
	known := map[int]string{}
	for _, pid := range fs.pids() {
		if d, ok := fs.owner(pid, known); ok && d == dir {
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
		dir, ok := fs.owner(pid, known)
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
// daemon's <state dir>/attempts, gpuq run's --log-dir) in root/<job>/attempt-<n>/.

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
	dir, ok := hostProcs.owner(pid, nil)
	if !ok {
		return "", false
	}
	return attemptIn(root, dir)
}

// AttemptMemory is what the processes of each attempt under root hold of host RAM now,
// by attempt id (see procFS.memory).
func AttemptMemory(root string) map[string]int64 { return hostProcs.memory(root) }
