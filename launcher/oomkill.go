package launcher

// What the kernel counts of OOM kills: the memory cgroup's count (v2 memory.events,
// v1 memory.oom_control) and the machine's own (/proc/vmstat, from Linux 4.13), read
// when an attempt starts and when it ends.

import (
	"bufio"
	"bytes"
	"io/fs"
	"os"
	"path"
	"strconv"
	"strings"
)

// KernelOOM is what the kernel's counts say of OOM kills while an attempt ran.
type KernelOOM int

const (
	// KernelUnknown: no count could be read (before Linux 4.13, or not Linux).
	KernelUnknown KernelOOM = iota
	// KernelNoKill: the kernel counted no OOM kill on the machine or in gpuq's cgroup.
	KernelNoKill
	// KernelKilled: the OOM killer killed a process, in gpuq's cgroup or on the
	// machine.
	KernelKilled
)

// oomKills are the kernel's counts of OOM kills at one moment; -1 where unreadable.
type oomKills struct {
	cgroup, machine int64
}

// readOOMKills reads the counts from the root of a Linux filesystem.
func readOOMKills(root fs.FS) oomKills {
	return oomKills{cgroup: cgroupOOMKills(root), machine: counter(root, "proc/vmstat", "oom_kill")}
}

// hostOOMKills reads this machine's counts (a variable: tests count the reads).
var hostOOMKills = func() oomKills { return readOOMKills(os.DirFS("/")) }

// since says what the counts read at the end, after, tell of the time since k.
func (k oomKills) since(after oomKills) KernelOOM {
	rose := func(a, b int64) bool { return a >= 0 && b > a }
	read := func(a, b int64) bool { return a >= 0 && b >= 0 }
	switch {
	case rose(k.cgroup, after.cgroup) || rose(k.machine, after.machine):
		return KernelKilled
	// The machine's count sees every OOM kill, whatever the cgroup of its victim: a
	// cgroup's alone says nothing of a trainer that moved to another.
	case read(k.machine, after.machine):
		return KernelNoKill
	}
	return KernelUnknown
}

// cgroupOOMKills reads the oom_kill count of gpuq's memory cgroup, which its trainers
// share: v2's memory.events counts the kills in the cgroup and below it, v1's
// memory.oom_control those of the cgroup.
func cgroupOOMKills(root fs.FS) int64 {
	data, err := fs.ReadFile(root, "proc/self/cgroup")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(data), "\n") {
		// hierarchy-ID:controllers:path; v2's is "0::path".
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		dir := strings.TrimPrefix(path.Clean(f[2]), "/")
		if f[0] == "0" && f[1] == "" {
			if n := counter(root, path.Join("sys/fs/cgroup", dir, "memory.events"), "oom_kill"); n >= 0 {
				return n
			}
		}
		for _, c := range strings.Split(f[1], ",") {
			if c == "memory" {
				return counter(root, path.Join("sys/fs/cgroup/memory", dir, "memory.oom_control"), "oom_kill")
			}
		}
	}
	return -1
}

// counter reads a "key value" line of a kernel file; -1 where there is none.
func counter(root fs.FS, name, key string) int64 {
	data, err := fs.ReadFile(root, name)
	if err != nil {
		return -1
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), key+" "); ok {
			if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
				return n
			}
		}
	}
	return -1
}
