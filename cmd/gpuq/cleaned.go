package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
)

// whereCleaned says, of a refused job or sweep that nothing has (err), that gpuq clean
// forgot it and where it moved its logs, from the latest clean that did; "" where err
// names none, the daemon is over the network (its files are not here), or no clean
// moved any of it. A researcher who cleaned before reading a sweep's logs is told
// where they are, not only that the job is unknown.
func (s *settings) whereCleaned(err error) string {
	name, job := unknownOf(err)
	if !cleanable(name, job) || s.remote() {
		return ""
	}
	dir, derr := s.stateDir()
	if derr != nil {
		return ""
	}
	root := api.CleanedDir(dir)
	cleans, _ := os.ReadDir(root) // by name, which is by time
	for i := len(cleans) - 1; i >= 0; i-- {
		at, perr := time.ParseInLocation(api.CleanedLayout, cleans[i].Name(), time.Local)
		if !cleans[i].IsDir() || perr != nil {
			continue
		}
		kept := filepath.Join(root, cleans[i].Name())
		when := at.Format("2006-01-02 15:04")
		if job {
			if fi, err := os.Stat(filepath.Join(kept, name)); err == nil && fi.IsDir() {
				return fmt.Sprintf("%s was forgotten by gpuq clean at %s; its logs are in %s", name, when, filepath.Join(kept, name))
			}
			continue
		}
		if n := jobsOf(kept, name); n > 0 {
			return fmt.Sprintf("sweep %s was forgotten by gpuq clean at %s; the logs of its %s are in %s/%s.*", name, when, plans.Count(n, "job"), kept, name)
		}
	}
	return ""
}

// cleanable reports whether name is a sweep's name, or a job's id (job), that gpuq
// clean could have moved a directory of: one name, no path ("..", "a/b"), a job's
// ending in its number.
func cleanable(name string, job bool) bool {
	if name == "" || !filepath.IsLocal(name) || strings.ContainsRune(name, filepath.Separator) || name == "." {
		return false
	}
	if !job {
		return true
	}
	i := strings.LastIndexByte(name, '.')
	_, err := strconv.Atoi(name[i+1:])
	return i > 0 && err == nil
}

// jobsOf counts the directories of sweep's jobs (<sweep>.<n>) in dir.
func jobsOf(dir, sweep string) int {
	entries, _ := os.ReadDir(dir)
	n := 0
	for _, e := range entries {
		num, ok := strings.CutPrefix(e.Name(), sweep+".")
		if _, err := strconv.Atoi(num); ok && err == nil && e.IsDir() {
			n++
		}
	}
	return n
}

// unknownOf is the job (job set) or sweep that err refuses as unknown: `no job "ID"`,
// `no sweep "NAME"` (see scheduler.NoJob and NoSweep); "" for any other error.
func unknownOf(err error) (name string, job bool) {
	var sweep scheduler.UnknownSweep
	if errors.As(err, &sweep) {
		return sweep.Name, false
	}
	var refused scheduler.Refused
	if !errors.As(err, &refused) {
		return "", false
	}
	for _, p := range []struct {
		prefix string
		job    bool
	}{{"no job ", true}, {"no sweep ", false}} {
		if rest, ok := strings.CutPrefix(string(refused), p.prefix); ok {
			if q, err := strconv.QuotedPrefix(rest); err == nil {
				name, _ = strconv.Unquote(q)
				return name, p.job
			}
		}
	}
	return "", false
}
