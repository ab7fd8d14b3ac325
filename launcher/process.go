package launcher

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/gpuq/gpuq/plans"
)

// Process is one running attempt: the leader of its own session and process group, on
// the slave side of a pty whose output goes to the log file and a ring buffer.
type Process struct {
	cmd  *exec.Cmd
	ptmx *os.File
	log  *os.File
	ring *Ring
	done chan struct{}
	// cancelled: a Stop was asked; termed: the attempt's processes were sent SIGTERM,
	// by a Stop or, once the leader exited, by stopRest. Each is sent it once.
	cancelled, termed atomic.Bool
	oomBefore         oomKills
	exit              Exit
	started           time.Time
	// dir is the attempt's GPUQ_ATTEMPT_DIR, which tells its processes that left the
	// group (see procs.go).
	dir string
	// logLost is how much of the output the log could not take, and logErr why.
	logLost int64
	logErr  error
	// metrics reads training metrics from the output; nil outside an attempt's
	// directory.
	metrics *outputMetrics
	// outside are the processes of the attempt outside its group that Stop signalled:
	// one that died of it before the leader did can no longer be told by its
	// environment, and is reaped by pid (see remains.stop).
	outside sync.Map
	// attached counts the attach clients that type at the trainer's terminal, whose
	// size it takes while they do (see Attached).
	attached atomic.Int32
}

// A trainer's terminal's size while nobody who types at it is attached: wide enough
// that a progress bar or a table in its log is not cut.
const (
	terminalRows = 50
	terminalCols = 160
)

// GroupGrace is how long a process group has between SIGTERM and SIGKILL.
var GroupGrace = 10 * time.Second

// Start runs c in a pty. The log begins with a header that lets a person rerun the
// attempt by hand. live, if not nil, also receives the output.
func Start(c Command, logPath, header string, live io.Writer) (*Process, error) {
	lf, err := createPrivate(logPath)
	if err != nil {
		return nil, err
	}
	// A log without its header would not say how to rerun the attempt: a disk without
	// room for it now fails the start, before anything runs.
	if err := write(lf, []byte(header)); err != nil {
		lf.Close()
		return nil, err
	}
	cmd := exec.Command(c.Argv[0], c.Argv[1:]...)
	cmd.Dir, cmd.Env = c.Dir, c.Env
	findIn(cmd, c.Env)
	p := &Process{cmd: cmd, log: lf, ring: NewRing(64 << 10), done: make(chan struct{}), started: time.Now(),
		dir: envValue(c.Env, attemptDirVar)}
	p.oomBefore = hostOOMKills()
	if p.dir != "" {
		freshMetrics(p.dir)
		p.metrics = newOutputMetrics(p.dir)
	}
	// pty.Start makes the child a session leader with the pty as its controlling
	// terminal, so -pid is its whole process group.
	p.ptmx, err = pty.StartWithSize(cmd, &pty.Winsize{Rows: terminalRows, Cols: terminalCols})
	if errors.Is(err, syscall.E2BIG) {
		err = fmt.Errorf("%w: %w", err, tooBig(c))
	}
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

// tooBig says why execve refused c as too big (E2BIG, "argument list too long"): one
// argument or environment variable too long (see fitsExec), or, where none is, all of
// them together, whose limit (ARG_MAX) is a quarter of the stack size limit, at most
// 6 MiB.
func tooBig(c Command) error {
	if err := fitsExec(c); err != nil {
		return err
	}
	n := 0
	for _, s := range slices.Concat(c.Argv, c.Env) {
		n += len(s) + 1 + strconv.IntSize/8 // with its NUL, and the pointer to it
	}
	return fmt.Errorf("its arguments and environment, %s in all, are more than Linux passes a program (ARG_MAX: a quarter of the stack size limit, ulimit -s, and at most 6 MiB): "+
		"pass large values in a file the trainer reads, such as its rendered config (--config \"{config}\")", plans.FormatSize(int64(n)))
}

// copyOutput tees the pty to the log and the ring until the last holder of the slave
// side is gone.
func (p *Process) copyOutput(live io.Writer, copied chan<- struct{}) {
	defer close(copied)
	if p.metrics != nil {
		defer p.metrics.Close()
		live = alsoTo{live, p.metrics}
	}
	log := &lineEnds{w: p.log}
	p.logLost, p.logErr = tee(p.ptmx, log, p.ring, live)
	if err := log.Flush(); err != nil && p.logErr == nil {
		p.logErr = err
	}
}

// tee copies an attempt's output from src to the ring and live (if not nil) first, and
// then to the log, until src ends (on Linux a pty's read ends with EIO, not EOF). A log
// that cannot be written (a full disk) must not keep the output from the ring, from
// which gpuq learns how the attempt ended: tee goes on, and returns how many bytes the
// log lacks and why.
func tee(src io.Reader, log io.Writer, ring *Ring, live io.Writer) (lost int64, err error) {
	buf := make([]byte, 32<<10)
	for {
		n, rerr := src.Read(buf)
		if n > 0 {
			ring.Write(buf[:n])
			if live != nil {
				live.Write(buf[:n])
			}
			if w, werr := log.Write(buf[:n]); werr != nil {
				lost += int64(n - w)
				if err == nil {
					err = werr
				}
			}
		}
		if rerr != nil {
			return lost, err
		}
	}
}

// wait is the one goroutine that waits for the leader. Then the rest of the attempt is
// stopped and reaped, so nothing the trainer started outlives it.
func (p *Process) wait(copied <-chan struct{}) {
	err := p.cmd.Wait()
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
	// Cancelled if asked to stop before the leader ended: a Stop that comes as what it
	// left is being stopped does not make a trainer that finished a cancelled one.
	cancelled := p.cancelled.Load()
	p.stopRest(GroupGrace)
	select {
	case <-copied:
	case <-time.After(2 * time.Second): // a process outside the group still holds the pty
	}
	p.ptmx.Close()
	p.exit.Cancelled = cancelled
	// The kernel's counts tell only how a failure ended (see Classify): a success's,
	// or a cancelled attempt's, are not read again, which was a tenth of a supervisor's
	// CPU where trainers are short.
	if (p.exit.Code != 0 || p.exit.Signal != 0) && !p.exit.Cancelled {
		p.exit.OOMKill = p.oomBefore.since(hostOOMKills())
	}
	fmt.Fprintf(p.log, "\ngpuq: exited %s after %s\n", p.exit, time.Since(p.started).Round(time.Second))
	p.log.Close()
	close(p.done)
}

// stopRest ends what is left of the attempt once its leader has exited. After a Stop,
// what is left had its SIGTERM from it, and is not sent another (see signal): a worker
// in a session of its own that saves as its leader exits would start its save again;
// nor is it by a Stop that comes meanwhile.
func (p *Process) stopRest(grace time.Duration) {
	seen := map[int]bool{}
	p.outside.Range(func(pid, _ any) bool {
		seen[pid.(int)] = true
		return true
	})
	r := p.remains()
	r.termed = p.termed.Swap(true)
	r.stop(seen, grace)
}

// remains are the processes of an attempt, or of a notify hook: its process group
// (pgid; 0 when unknown) and the processes that left it for sessions of their own but
// carry its mark (torchrun's workers).
type remains struct {
	pgid int
	mark mark
	fs   procFS
	// top is the process they are all under (see scope), so that only its descendants
	// are read; 0: they may be anywhere, and every process is read (a supervisor
	// that is gone, a gpuq run killed).
	top int
	// outside, if not nil, learns the processes outside the group that signal reaches.
	outside *sync.Map
	// termed: they were sent SIGTERM already; stop sends them SIGKILL alone.
	termed bool
}

func (p *Process) remains() remains {
	r := remains{pgid: p.PID(), fs: hostProcs, top: scope(), outside: &p.outside}
	if p.dir != "" {
		r.mark = attemptMark(p.dir)
	}
	return r
}

// stopRemains stops whatever still runs of the attempt in dir, whose supervisor is gone,
// and reports whether anything did: its trainer's group too, where the leader recorded
// in supervisor.json is still that process (alive, or a zombie gpuq reaps as the
// subreaper it was handed to), not one that took its pid after it.
func stopRemains(dir string, grace time.Duration) bool {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return false
	}
	r := remains{mark: attemptMark(abs), fs: hostProcs}
	if info := readInfo(dir); info.LeaderStart != 0 {
		if st, ok := hostProcs.stat(info.Leader); ok && st.start == info.LeaderStart {
			r.pgid = info.Leader
		}
	}
	return r.stop(map[int]bool{}, grace)
}

// stop ends the remains: SIGTERM (unless termed), then SIGKILL after grace (to what it
// has seen of them too, whose environment may no longer say so), until none is left;
// gpuq's own children among them (orphans re-parented to it as a subreaper) are
// reaped, so none is left a zombie. seen holds processes of the remains already known.
// It reports whether anything was left.
func (r remains) stop(seen map[int]bool, grace time.Duration) bool {
	if !r.left(seen) {
		return false
	}
	if !r.termed {
		r.signal(syscall.SIGTERM)
	}
	deadline := time.Now().Add(grace)
	for r.left(seen) {
		if time.Now().After(deadline) {
			r.signal(syscall.SIGKILL)
			for pid := range seen {
				syscall.Kill(pid, syscall.SIGKILL)
			}
			deadline = time.Now().Add(time.Hour)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// signal sends sig to the attempt's processes outside its group, which outside learns
// first, and then to the group: once the leader has ended, one of them that ended too
// is known by its pid alone. A call reaches each process once: a trainer that traps
// SIGTERM to save a checkpoint and is sent it again while it saves runs its handler
// again, and the second signal to the group kills what the first handler started.
func (r remains) signal(sig syscall.Signal) {
	for _, pid := range r.outsiders() {
		if r.outside != nil {
			r.outside.Store(pid, true)
		}
		syscall.Kill(pid, sig)
	}
	if r.pgid > 0 {
		syscall.Kill(-r.pgid, sig)
	}
}

// outsiders are the processes with the attempt's mark that a signal to its group does
// not reach: those that left it (torchrun's workers in sessions of their own, a shell's
// jobs in groups of their own), or all of them where the group is not known.
func (r remains) outsiders() []int {
	pids := r.fs.members(r.mark, r.top)
	if r.pgid <= 0 {
		return pids
	}
	out := pids[:0]
	for _, pid := range pids {
		if st, ok := r.fs.stat(pid); ok && st.pgrp == r.pgid {
			continue
		}
		out = append(out, pid)
	}
	return out
}

// left reaps what has ended of the remains and reports whether anything is left: a
// member of the group, a live process with the mark, or one that had it and is not yet
// gone (seen collects them). An exiting process reads an empty environment from the
// moment its memory is released, while it still closes its files (a card's, which the
// driver may take seconds to free) and long before it is a zombie. A zombie that is not
// gpuq's to reap (its parent is another subreaper, or init) has let go of everything.
func (r remains) left(seen map[int]bool) bool {
	alive := false
	if r.pgid > 0 {
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-r.pgid, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
		alive = syscall.Kill(-r.pgid, 0) == nil
	}
	for _, pid := range r.fs.members(r.mark, r.top) {
		seen[pid] = true
		alive = true
	}
	for pid := range seen {
		// Its state first, then reap it: a process that becomes a zombie between a
		// reap that found it still exiting and a look that finds it a zombie would be
		// left one.
		if st, ok := r.fs.stat(pid); ok && !st.zombie {
			alive = true
			continue
		}
		var ws syscall.WaitStatus
		syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
		delete(seen, pid)
	}
	return alive
}

// Stop ends the attempt: SIGTERM to its whole group and its processes outside it,
// SIGKILL after grace. It returns at once; Done closes when they are gone. SIGTERM is
// sent once: a second Stop (the lease lapsed, then a person cancelled), or one that
// comes once the leader has ended and stopRest has sent it to what it left, only sets
// its own time to SIGKILL, for a trainer that saves on the first would be cut short by
// another (see signal).
func (p *Process) Stop(grace time.Duration) {
	if p.cancelled.Store(true); !p.termed.Swap(true) {
		p.remains().signal(syscall.SIGTERM)
	}
	go func() {
		select {
		case <-p.done:
		case <-time.After(grace):
			p.remains().signal(syscall.SIGKILL)
		}
	}()
}

// PID is the leader's process id, which is also its process group and session id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Done closes when the attempt and its whole group have ended.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exit is how the leader ended; valid after Done.
func (p *Process) Exit() Exit { return p.exit }

// Ended says how the attempt ended, for people: its exit, and what its log lacks.
// Valid after Done.
func (p *Process) Ended() string {
	s := "exited " + p.exit.String()
	if p.logErr != nil {
		s += fmt.Sprintf("; its log lacks %s of its output (%v)", plans.FormatSize(p.logLost), p.logErr)
	}
	return s
}

// Input is the trainer's terminal: what is written to it, the trainer reads as typed.
func (p *Process) Input() io.Writer { return p.ptmx }

// Attached notes an attach client that types at the trainer's terminal (and gives it
// its own size: see Resize), and returns what notes it gone. As the last goes, the
// terminal takes its own size again: what the trainer draws into its log after is not
// as narrow as a phone that attached once.
func (p *Process) Attached() (gone func()) {
	p.attached.Add(1)
	return func() {
		if p.attached.Add(-1) == 0 {
			p.Resize(terminalRows, terminalCols)
		}
	}
}

// Resize sets the size of the trainer's terminal, which tells its foreground process
// group (SIGWINCH). It holds the terminal while it does: one closed meanwhile, as the
// attempt ends, is not resized, nor is whatever took its descriptor's number. (pty's
// Setsize takes the descriptor by Fd, which would also put the terminal, read through
// the runtime's poller, in blocking mode.)
func (p *Process) Resize(rows, cols uint16) error {
	rc, err := p.ptmx.SyscallConn()
	if err != nil {
		return err
	}
	if cerr := rc.Control(func(fd uintptr) {
		err = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, &unix.Winsize{Row: rows, Col: cols})
	}); cerr != nil {
		return cerr
	}
	return err
}

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
func Header(c Command, a Attempt, effectiveBatch string) string {
	var b strings.Builder
	job := a.JobID
	if a.JobName != "" {
		job += " (" + a.JobName + ")"
	}
	fmt.Fprintf(&b, "# gpuq attempt %d of job %s, tier %d, cards", a.N, job, a.Tier)
	for _, cd := range a.Cards {
		fmt.Fprintf(&b, " %d", cd.Index)
	}
	if effectiveBatch != "" {
		fmt.Fprintf(&b, ", effective batch %s", effectiveBatch)
	}
	fmt.Fprintf(&b, "\n# started %s\n# config: %s\n# to rerun by hand:\ncd %s && env \\\n", time.Now().Format(time.RFC3339), c.Config, ShellQuote(c.Dir))
	for _, kv := range c.Set {
		k, v, _ := strings.Cut(kv, "=")
		fmt.Fprintf(&b, "  %s=%s \\\n", k, ShellQuote(v))
	}
	quoted := make([]string, len(c.Argv))
	for i, a := range c.Argv {
		quoted[i] = ShellQuote(a)
	}
	fmt.Fprintf(&b, "  %s\n\n", strings.Join(quoted, " "))
	return b.String()
}

// ShellQuote quotes s for a POSIX shell (and for sbatch's #SBATCH lines), for what people
// read or run by hand: gpuq itself starts no program through a shell.
func ShellQuote(s string) string {
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
// so that stopRest can reap them and none is left a zombie. Call once at start.
func BecomeSubreaper() {
	subreaper.Do(func() {
		const prSetChildSubreaper = 36
		syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0)
	})
}
