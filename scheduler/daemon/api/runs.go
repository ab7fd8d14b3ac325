package api

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// A gpuq run in the foreground serves the daemon's API for its one sweep, read and act
// (status, why, logs, attach, top, cancel, hold...), on a socket of its own in the
// state directory, so that the verbs find it as they find the daemon: runs/<sweep>.<pid>.sock.

// RunsDir is where the sockets of the gpuq runs of a state directory are.
func RunsDir(dir string) string { return filepath.Join(dir, "runs") }

// Reserve holds a sweep's name for a gpuq run, from before it serves the sweep (its
// socket tells the others its name) until it closes the file returned or ends: two
// one-offs started at once, each finding a name free, must not both take it. It
// returns false, and no file, where another run holds the name.
func Reserve(dir, sweep string) (*os.File, bool, error) {
	names := filepath.Join(RunsDir(dir), ".names") // out of sight: runs' logs may be beside it
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
	return f, true, nil
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

// Runs lists the gpuq runs of a state directory, by sweep. The socket of a run that no
// longer runs (killed with SIGKILL, it could not remove it) is removed.
func Runs(dir string) []Run {
	entries, err := os.ReadDir(RunsDir(dir))
	if err != nil {
		return nil
	}
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
