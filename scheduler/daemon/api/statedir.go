package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gpuq/gpuq/launcher"
	"golang.org/x/sys/unix"
)

// MakeStateDir makes a daemon's state directory, mode 0700, and returns its real path,
// for the daemon to use from then on (see launcher.ResolveDir): the socket's mode alone
// does not keep others out on every system; the directory's does. It refuses one that
// is not the user's own, that lies inside a directory others may change, or that is
// reached through another user's link (see launcher.OwnDir).
func MakeStateDir(dir string) (string, error) {
	real, err := launcher.ResolveDir(dir)
	if err != nil {
		return "", fmt.Errorf("state directory: %w", err)
	}
	if err := os.MkdirAll(real, 0o700); err != nil {
		return "", fmt.Errorf("state directory: %w", err)
	}
	if err := launcher.OwnDir(real); err != nil {
		return "", fmt.Errorf("state directory: %w", err)
	}
	if err := os.Chmod(real, 0o700); err != nil {
		return "", fmt.Errorf("state directory: %w", err)
	}
	return real, nil
}

// LockState takes the state directory's lock, held as long as the daemon runs; the
// kernel drops it with the process, however it ends. The daemon writes its pid in it.
func LockState(dir string) (*os.File, error) {
	f, err := lockState(dir)
	if err != nil {
		return nil, err
	}
	// A daemon that said it stopped and then ended left its word behind: it holds no
	// more, and no daemon holds the lock but this one.
	os.Remove(filepath.Join(dir, stoppingFile))
	return f, nil
}

// lockState takes the state directory's lock, as LockState does, and leaves the word
// of a daemon that stopped before (see Stopped).
func lockState(dir string) (*os.File, error) {
	path := filepath.Join(dir, "daemon.lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("daemon lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		pid, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			if pid, stopping := Stopping(dir); stopping {
				return nil, fmt.Errorf("a gpuq daemon (pid %d) is stopping on %s; start this one once it has ended", pid, dir)
			}
			return nil, fmt.Errorf("another gpuq daemon (pid %s) runs on %s; stop it with gpuq daemon --stop, or give this one another --state-dir",
				strings.TrimSpace(string(pid)), dir)
		}
		return nil, fmt.Errorf("daemon lock %s: %w", path, err)
	}
	return f, nil
}

// stoppingFile names the pid of a daemon that stops (see MarkStopping). It is a file
// of its own, not a line in the lock: a gpuq that predates it reads the lock's pid as
// before, and takes a daemon that stops for one that starts, as it always did.
const stoppingFile = "daemon.stopping"

// MarkStopping says in the state directory that its daemon, pid, which holds the
// lock, stops, and whether a person asked it to (gpuq daemon --stop; else a signal,
// as a restart sends): it is about to stop answering, and a client then waits for it
// to end (its trainers stopped, its state written) rather than to answer (see
// Stopping); once it has, a gpuq wait waits for another only where none asked (see
// Stopped). Written whole or not at all (a rename), so that a reader never reads half
// a pid.
func MarkStopping(dir string, pid int, asked bool) error {
	tmp, err := os.CreateTemp(dir, stoppingFile+".*")
	if err != nil {
		return err
	}
	word := fmt.Sprintf("%d\n", pid)
	if asked {
		word += askedWord + "\n"
	}
	_, err = tmp.WriteString(word)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(dir, stoppingFile))
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

// askedWord follows the pid in stoppingFile where a person asked the daemon to stop.
const askedWord = "asked"

// stoppingWord is what stoppingFile says: the pid of the daemon that stops or
// stopped, whether a person asked it to, and when it was written (ok false: nothing
// that can be read).
func stoppingWord(dir string) (pid int, asked bool, at time.Time, ok bool) {
	path := filepath.Join(dir, stoppingFile)
	fi, err := os.Stat(path)
	if err != nil {
		return 0, false, time.Time{}, false
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, false, time.Time{}, false
	}
	first, rest, _ := strings.Cut(string(data), "\n")
	pid, err = strconv.Atoi(strings.TrimSpace(first))
	if err != nil || pid <= 0 {
		return 0, false, time.Time{}, false
	}
	return pid, strings.TrimSpace(rest) == askedWord, fi.ModTime(), true
}

// Starting reports the pid of a daemon that holds the state directory's lock and may
// not answer yet: it reads its state before it listens.
func Starting(dir string) (int, bool) {
	pid, ok := Holder(dir)
	return pid, ok && !saysStopping(dir, pid)
}

// Stopping reports the pid of a daemon that holds the state directory's lock and no
// longer answers, or is about to, as it stops (see MarkStopping).
func Stopping(dir string) (int, bool) {
	pid, ok := Holder(dir)
	return pid, ok && saysStopping(dir, pid)
}

// Stopped reports the daemon that stopped last on the state directory, where it said
// so as it stopped (see MarkStopping), when it began to, and whether a person asked it
// to: no daemon holds the lock now (the next to take it clears the word, see
// LockState). A daemon that was killed (kill -9, a crash) said nothing.
func Stopped(dir string) (pid int, at time.Time, asked, ok bool) {
	pid, asked, at, ok = stoppingWord(dir)
	if !ok {
		return 0, time.Time{}, false, false
	}
	if _, held := Holder(dir); held {
		return 0, time.Time{}, false, false // it stops yet, or another took the lock
	}
	return pid, at, asked, true
}

// saysStopping reports whether the daemon pid, which holds the lock, said it stops: a
// word left by another that ended is not its.
func saysStopping(dir string, pid int) bool {
	said, _, _, ok := stoppingWord(dir)
	return ok && said == pid
}

// Holder reports the pid of the daemon that holds the state directory's lock, whether
// it starts, runs or stops.
func Holder(dir string) (int, bool) { return holder(filepath.Join(dir, "daemon.lock")) }

// holder is the pid a lock file names (see LockState and Reserve), where that process
// holds the file open. It takes no lock, so that a process taking it meanwhile is not
// refused its own.
func holder(path string) (int, bool) {
	lock, err := os.Stat(path)
	if err != nil {
		return 0, false
	}
	data, _ := os.ReadFile(path)
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 0 {
		return 0, false
	}
	fds := filepath.Join("/proc", strconv.Itoa(pid), "fd")
	ents, err := os.ReadDir(fds)
	if err != nil {
		return 0, false
	}
	for _, e := range ents {
		if fi, err := os.Stat(filepath.Join(fds, e.Name())); err == nil && os.SameFile(fi, lock) {
			return pid, true
		}
	}
	return 0, false
}

// Gone reports whether no daemon holds the state directory's lock, which a daemon
// drops only as it exits. It takes the lock only to drop it, and leaves the word of
// a daemon that stopped (see Stopped): no daemon has taken its place.
func Gone(dir string) bool {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return true
	}
	f, err := lockState(dir)
	if err != nil {
		return false
	}
	f.Close()
	return true
}

// ListenFile holds the address the daemon listens on, while it does.
const ListenFile = "listen"

// MachineFile holds the machine settings the last daemon was given, and the cards it
// read as it started.
const MachineFile = "machine.json"

// LastCards are the cards the last daemon on the state directory dir read as it
// started (none where it had none of its own, or before daemons recorded them): what
// a report drawn while no daemon runs sizes each card by.
func LastCards(dir string) []GPUInfo {
	var rec struct {
		Cards []GPUInfo `json:"cards"`
	}
	data, err := os.ReadFile(filepath.Join(dir, MachineFile))
	if err != nil || json.Unmarshal(data, &rec) != nil {
		return nil
	}
	return rec.Cards
}

// SocketPath is the API's socket in a state directory.
func SocketPath(dir string) string { return filepath.Join(dir, "gpuq.sock") }

// CleanedDir is where gpuq clean moves the logs of the sweeps it forgets, in a state
// directory: one directory for each clean (see MakeCleaned), named for its time by
// CleanedLayout, with each forgotten job's directory in it.
func CleanedDir(dir string) string { return filepath.Join(dir, "cleaned") }

// CleanedLayout is the time layout of the name of a clean's directory in CleanedDir.
// A second clean within a second of another has a number after it, ".001" on (see
// MakeCleaned), which time.Parse reads as a fraction of a second with this layout: the
// names sort, and read, in the order the cleans were.
const CleanedLayout = "20060102-150405"

// MakeCleaned makes a clean's directory in the state directory dir, of its own: named
// for the time at (see CleanedLayout), never one that another clean made, whose logs
// a job of the same id would overwrite or fail to join.
func MakeCleaned(dir string, at time.Time) (string, error) {
	root := CleanedDir(dir)
	if err := os.MkdirAll(root, 0o700); err != nil {
		return "", err
	}
	name := at.Format(CleanedLayout)
	for n := 1; ; n++ {
		kept := filepath.Join(root, name)
		err := os.Mkdir(kept, 0o700)
		if !errors.Is(err, fs.ErrExist) || n == 1000 {
			return kept, err
		}
		name = fmt.Sprintf("%s.%03d", at.Format(CleanedLayout), n)
	}
}
