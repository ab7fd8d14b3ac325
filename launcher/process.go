package launcher

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/creack/pty"
)

// Process is one running attempt: the leader of its own session and process group, on
// the slave side of a pty whose output goes to the log file and a ring buffer.
type Process struct {
	cmd       *exec.Cmd
	ptmx      *os.File
	log       *os.File
	ring      *Ring
	done      chan struct{}
	cancelled atomic.Bool
	oomBefore int64
	exit      Exit
	started   time.Time
}

// GroupGrace is how long a process group has between SIGTERM and SIGKILL.
var GroupGrace = 10 * time.Second

// Start runs c in a pty. The log begins with a header that lets a person rerun the
// attempt by hand. live, if not nil, also receives the output.
func Start(c Command, logPath, header string, live io.Writer) (*Process, error) {
	lf, err := createPrivate(logPath)
	if err != nil {
		return nil, err
	}
	fmt.Fprint(lf, header)
	cmd := exec.Command(c.Argv[0], c.Argv[1:]...)
	cmd.Dir, cmd.Env = c.Dir, c.Env
	p := &Process{cmd: cmd, log: lf, ring: NewRing(64 << 10), done: make(chan struct{}), started: time.Now()}
	p.oomBefore, _ = cgroupOOMKills()
	// pty.Start makes the child a session leader with the pty as its controlling
	// terminal, so -pid is its whole process group.
	p.ptmx, err = pty.StartWithSize(cmd, &pty.Winsize{Rows: 50, Cols: 160})
	if err != nil {
		fmt.Fprintf(lf, "gpuq: could not start %s: %v\n", c.Argv[0], err)
		lf.Close()
		return nil, fmt.Errorf("start %s: %w", c.Argv[0], err)
	}
	copied := make(chan struct{})
	go p.copyOutput(live, copied)
	go p.wait(copied)
	return p, nil
}

// copyOutput tees the pty to the log and the ring until the last holder of the slave
// side is gone: on Linux that read ends with EIO, not EOF.
func (p *Process) copyOutput(live io.Writer, copied chan<- struct{}) {
	defer close(copied)
	w := io.MultiWriter(p.log, p.ring)
	if live != nil {
		w = io.MultiWriter(p.log, p.ring, live)
	}
	buf := make([]byte, 32<<10)
	for {
		n, err := p.ptmx.Read(buf)
		if n > 0 {
			w.Write(buf[:n])
		}
		if err != nil {
			return // EIO or EOF: the end of output
		}
	}
}

// wait is the one goroutine that waits for the leader. Then the rest of the group is
// stopped and reaped, so nothing the trainer started outlives it.
func (p *Process) wait(copied <-chan struct{}) {
	err := p.cmd.Wait()
	pgid := p.cmd.Process.Pid
	var ee *exec.ExitError
	switch {
	case err == nil:
		p.exit.Code = 0
	case errors.As(err, &ee):
		ws := ee.Sys().(syscall.WaitStatus)
		p.exit.Code = ws.ExitStatus()
		if ws.Signaled() {
			p.exit.Signal = ws.Signal()
		}
	default:
		p.exit.Code = -1
	}
	stopGroup(pgid, GroupGrace)
	select {
	case <-copied:
	case <-time.After(2 * time.Second): // a process outside the group still holds the pty
	}
	p.ptmx.Close()
	if after, ok := cgroupOOMKills(); ok && after > p.oomBefore {
		p.exit.CgroupOOMKill = true
	}
	p.exit.Cancelled = p.cancelled.Load()
	fmt.Fprintf(p.log, "\ngpuq: exited %s after %s\n", p.exit, time.Since(p.started).Round(time.Second))
	p.log.Close()
	close(p.done)
}

// stopGroup ends what is left of a process group: SIGTERM, then SIGKILL after grace,
// reaping members that were re-parented to gpuq, until none is left.
func stopGroup(pgid int, grace time.Duration) {
	if !groupAlive(pgid) {
		return
	}
	syscall.Kill(-pgid, syscall.SIGTERM)
	deadline := time.Now().Add(grace)
	for groupAlive(pgid) {
		if time.Now().After(deadline) {
			syscall.Kill(-pgid, syscall.SIGKILL)
			deadline = time.Now().Add(time.Hour)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// groupAlive reaps the group's exited members that are gpuq's children (as a subreaper,
// orphans become so) and reports whether any member is left.
func groupAlive(pgid int) bool {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-pgid, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			break
		}
	}
	return syscall.Kill(-pgid, 0) == nil
}

// Stop ends the attempt: SIGTERM to its whole group, SIGKILL after grace. It returns at
// once; Done closes when the group is gone.
func (p *Process) Stop(grace time.Duration) {
	p.cancelled.Store(true)
	pgid := p.cmd.Process.Pid
	syscall.Kill(-pgid, syscall.SIGTERM)
	go func() {
		select {
		case <-p.done:
		case <-time.After(grace):
			syscall.Kill(-pgid, syscall.SIGKILL)
		}
	}()
}

// PID is the leader's process id, which is also its process group and session id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Done closes when the attempt and its whole group have ended.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exit is how the leader ended; valid after Done.
func (p *Process) Exit() Exit { return p.exit }

// Input is the trainer's terminal: what is written to it, the trainer reads as typed.
func (p *Process) Input() io.Writer { return p.ptmx }

// Output is the last of the attempt's output.
func (p *Process) Output() []byte { return p.ring.Bytes() }

func (e Exit) String() string {
	switch {
	case e.Signal != 0:
		return "by signal " + e.Signal.String()
	default:
		return fmt.Sprintf("with status %d", e.Code)
	}
}

// Header is the start of an attempt's log: enough to rerun it by hand.
func Header(c Command, jobID string, n, tier int, cards []Card, effectiveBatch string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# gpuq attempt %d of job %s, tier %d, cards", n, jobID, tier)
	for _, cd := range cards {
		fmt.Fprintf(&b, " %d", cd.Index)
	}
	if effectiveBatch != "" {
		fmt.Fprintf(&b, ", effective batch %s", effectiveBatch)
	}
	fmt.Fprintf(&b, "\n# started %s\n# config: %s\n# to rerun by hand:\ncd %s && env \\\n", time.Now().Format(time.RFC3339), c.Config, shellQuote(c.Dir))
	for _, kv := range c.Set {
		k, v, _ := strings.Cut(kv, "=")
		fmt.Fprintf(&b, "  %s=%s \\\n", k, shellQuote(v))
	}
	quoted := make([]string, len(c.Argv))
	for i, a := range c.Argv {
		quoted[i] = shellQuote(a)
	}
	fmt.Fprintf(&b, "  %s\n\n", strings.Join(quoted, " "))
	return b.String()
}

// shellQuote quotes s for a POSIX shell; the header is for people, gpuq never uses one.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r == '/' || r == '.' || r == '-' || r == '_' || r == ':' || r == ',' || r == '=' || r == '+' ||
			r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

var subreaper sync.Once

// BecomeSubreaper makes orphaned trainer processes gpuq's children rather than init's,
// so that stopGroup can reap them and none is left a zombie. Call once at start.
func BecomeSubreaper() {
	subreaper.Do(func() {
		const prSetChildSubreaper = 36
		syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0)
	})
}

// cgroupOOMKills reads the oom_kill counter of gpuq's cgroup (v2), which its trainers
// share; ok is false where it cannot be read.
func cgroupOOMKills() (int64, bool) {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(data), "\n") {
		if path, ok := strings.CutPrefix(line, "0::"); ok {
			ev, err := os.ReadFile("/sys/fs/cgroup" + strings.TrimSpace(path) + "/memory.events")
			if err != nil {
				return 0, false
			}
			for _, l := range strings.Split(string(ev), "\n") {
				var n int64
				if _, err := fmt.Sscanf(l, "oom_kill %d", &n); err == nil {
					return n, true
				}
			}
		}
	}
	return 0, false
}

// SessionOf returns the session id of a process: for a trainer and everything it
// started, the pid of the attempt's leader.
func SessionOf(pid int) (int, bool) {
	sid, _, ok := statOf(pid)
	return sid, ok
}
