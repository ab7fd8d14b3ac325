package daemon

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/gpuq/gpuq/launcher"
	"github.com/gpuq/gpuq/scheduler/runner"
	"github.com/gpuq/gpuq/scheduler/state"
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

// lockState takes the state directory's lock, held as long as the daemon runs; the
// kernel drops it with the process, however it ends. The daemon writes its pid in it.
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
			return nil, fmt.Errorf("another gpuq daemon (pid %s) runs on %s; stop it with gpuq daemon --stop, or give this one another --state-dir",
				strings.TrimSpace(string(pid)), dir)
		}
		return nil, fmt.Errorf("daemon lock %s: %w", path, err)
	}
	return f, nil
}

// Gone reports whether no daemon holds the state directory's lock, which a daemon
// drops only as it exits.
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

// Salvage rebuilds the damaged state of a directory (see state.Salvage) under its
// lock, so that no daemon starts on it meanwhile, from its good records and what its
// attempts' directories show.
func Salvage(dir string) (state.Salvaged, error) {
	dir, err := MakeStateDir(dir)
	if err != nil {
		return state.Salvaged{}, err
	}
	lock, err := lockState(dir)
	if err != nil {
		return state.Salvaged{}, err
	}
	defer lock.Close()
	found, err := runner.Found(attemptsIn(dir))
	if err != nil {
		return state.Salvaged{}, fmt.Errorf("reading the attempts' directories: %w", err)
	}
	return state.Salvage(dir, found)
}

// attemptsIn is where a daemon on a state directory lays out its attempts (see
// launcher.AttemptDir).
func attemptsIn(stateDir string) string { return filepath.Join(stateDir, "attempts") }

// stateLost refuses a state directory whose state is gone, though the attempts of an
// earlier daemon on it are there: a daemon would start without their jobs, and write
// its empty state over what could still be put back.
func stateLost(dir string) error {
	if state.Begun(dir) {
		return nil
	}
	entries, err := os.ReadDir(attemptsIn(dir))
	if err != nil || len(entries) == 0 {
		return nil // a new state
	}
	return fmt.Errorf("the state in %s is missing: its marker, snapshot and journal are not there, though %s holds the attempts of an earlier daemon (moved or deleted?): "+
		"put them back; or gpuq daemon --salvage starts from the copies of the sweeps in sweeps/ and what the attempts' directories show; or give gpuq a fresh --state-dir",
		dir, attemptsIn(dir))
}
