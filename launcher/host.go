package launcher

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// HostMemory reads the machine's RAM from /proc/meminfo: its total, and what is
// available to new processes without swapping (MemAvailable).
func HostMemory() (total, available int64, err error) {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, 0, err
	}
	total, okT := meminfoField(data, "MemTotal:")
	available, okA := meminfoField(data, "MemAvailable:")
	if !okT || !okA {
		return 0, 0, fmt.Errorf("/proc/meminfo has no MemTotal or MemAvailable")
	}
	return total, available, nil
}

// meminfoField reads a "Key:   123 kB" line in bytes.
func meminfoField(data []byte, key string) (int64, bool) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == key {
			n, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return 0, false
			}
			if len(f) >= 3 && f[2] == "kB" {
				n <<= 10
			}
			return n, true
		}
	}
	return 0, false
}

// SessionMemory is what the processes of each session (named by its leader, as
// attempts are) hold of host RAM now: the sum of their proportional set sizes, so that
// the pages a data loader's forked workers share with their parent count once, or their
// resident sets where the kernel has no smaps_rollup. Sessions with no process left are
// absent.
func SessionMemory(leaders []int) map[int]int64 {
	want := make(map[int]bool, len(leaders))
	for _, l := range leaders {
		want[l] = true
	}
	out := map[int]int64{}
	dir, err := os.ReadDir("/proc")
	if err != nil {
		return out
	}
	page := int64(os.Getpagesize())
	for _, d := range dir {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		sid, rss, ok := statOf(pid)
		if !ok || !want[sid] {
			continue
		}
		if pss, ok := pssOf(pid); ok {
			out[sid] += pss
		} else {
			out[sid] += rss * page
		}
	}
	return out
}

// statOf reads a process's session and resident pages from /proc/<pid>/stat.
func statOf(pid int) (sid int, rssPages int64, ok bool) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, false
	}
	// The command name may hold spaces and parentheses: fields start after the last ')'.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 22 {
		return 0, 0, false
	}
	sid, err1 := strconv.Atoi(f[3])              // state ppid pgrp session
	rss, err2 := strconv.ParseInt(f[21], 10, 64) // field 24 of stat(5)
	return sid, rss, err1 == nil && err2 == nil
}

func pssOf(pid int) (int64, bool) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0, false
	}
	return meminfoField(data, "Pss:")
}
