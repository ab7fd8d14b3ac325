package launcher

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gpuq/gpuq/plans"
	"golang.org/x/sys/unix"
)

// A supervisor is a small process (gpuq-supervisor, or gpuq's own binary in a hidden
// mode: see SupervisorCommand) that holds one attempt for a daemon: it owns the
// trainer's pty, writes its log, keeps the last of its output for attach, and records
// how it ended in the attempt's directory. It is the leader of a session of its own,
// so the trainer outlives a daemon that is killed or restarted; a new daemon finds it
// again through the directory.
//
// The attempt's directory holds:
//
//	spec.json        what to run, written by the daemon before it starts the supervisor;
//	                 also the attempt's lock, locked (flock) from before it holds a word
//	                 until the supervisor exits: the daemon takes the lock and the
//	                 supervisor inherits it, so that a daemon started again tells a
//	                 supervisor that has not recorded itself yet from one that never
//	                 started. (An earlier gpuq kept the lock in a file of its own,
//	                 lock, which is still honoured.)
//	log              the trainer's output, after a header to rerun it by hand
//	supervisor.json  the supervisor's and the trainer's pids, once the trainer runs (as
//	                 soon as there is room: a full disk does not stop the trainer); its
//	                 modification time is renewed every aliveEvery while the trainer
//	                 runs (see markAlive)
//	sock             the supervisor's unix socket (see the requests below), mode 0600,
//	                 serving only processes of its own user
//	exit.json        how the attempt ended, written (renamed, synced) before the
//	                 supervisor exits; it waits for room to write it, if it must, and
//	                 holds the lock meanwhile
//
// spec.json and supervisor.json are not synced: they tell of processes that a crash of
// the machine ends, so a copy lost with it is lost with what it told of.
//
// The supervisor tells the daemon that started it, on its standard output, the
// trainer's pid once the trainer runs; or, where the machine's want of room or
// descriptors kept it from starting the trainer (see MachineFault), "unstarted", the
// errno and the error: nothing of the attempt ran, and its job waits.
//
// A client of sock writes one line, a request, then:
//
//	wait       reads nothing until the attempt has ended, then how it ended (exit.json's
//	           JSON, told once exit.json is in place, before it is synced, and even
//	           where it cannot be written), then EOF
//	stop       the supervisor stops the trainer's process group (SIGTERM, then SIGKILL)
//	attach     reads the last 64 KiB of output then the live output; what it writes
//	           goes to the trainer's terminal
//	attach-ro  the same without input
const (
	specFile       = "spec.json"
	lockFile       = "lock"
	supervisorFile = "supervisor.json"
	exitFile       = "exit.json"
	sockFile       = "sock"
	// SupervisorMode is the hidden argument that makes gpuq's binary, or
	// SupervisorBinary, a supervisor.
	SupervisorMode = "__supervise"
)

// Spec is what a supervisor runs.
type Spec struct {
	Command Command `json:"command"`
	Header  string  `json:"header"`
	// Lease, if set, is the lease file the trainer runs under (see Lease).
	Lease string `json:"lease,omitempty"`
}

// Ended is how a supervised attempt ended, as exit.json records it.
type Ended struct {
	Outcome plans.Outcome   `json:"outcome"`
	OOM     *plans.OOMFacts `json:"oom,omitempty"`
	Detail  string          `json:"detail"`
	// Fenced: the supervisor stopped the trainer because its lease lapsed.
	Fenced bool `json:"fenced,omitempty"`
	// Exit is how the trainer's process ended, where it ran; Command what it ran.
	Exit    *plans.ProcessExit `json:"exit,omitempty"`
	Command []string           `json:"command,omitempty"`
	// At is when the trainer ended, by the clock of the machine it ran on: a daemon
	// that hears of the end later (it was stopped meanwhile) dates it so. Zero where
	// no trainer ran, and in an exit.json written before it was kept. An attempt lost
	// while no one watched it is dated by its files (see Wait).
	At time.Time `json:"at,omitzero"`
}

// endedOf is how an attempt's process p, which ran argv, ended: classified from its
// exit and output.
func endedOf(p *Process, argv []string) Ended {
	outcome, facts := Classify(p.Exit(), p.Output())
	return Ended{Outcome: outcome, OOM: facts, Detail: p.Ended(), Exit: ProcessExit(p.Exit(), p.Output()), Command: argv, At: time.Now()}
}

// RecordEnd is how p, an attempt's process that ran argv in dir and has ended, ended,
// written to dir's exit.json as a supervisor writes it, so that whoever follows the
// attempt's log (gpuq logs -f) learns that nothing more comes: gpuq run's attempts, which
// no supervisor watches, end there too.
func RecordEnd(dir string, p *Process, argv []string) (Ended, error) {
	e := endedOf(p, argv)
	return e, WriteJSON(filepath.Join(dir, exitFile), e)
}

type supervisorInfo struct {
	PID    int `json:"pid"`
	Leader int `json:"leader"`
	// LeaderStart is when the leader started (stat(5)'s starttime), which tells it
	// from a process that took its pid after it.
	LeaderStart uint64 `json:"leader_start,omitempty"`
}

// LogPath is an attempt directory's log.
func LogPath(dir string) string { return filepath.Join(dir, "log") }

// SocketPath is an attempt directory's socket.
func SocketPath(dir string) string { return filepath.Join(dir, sockFile) }

// Supervise is the supervisor's main: it runs the attempt in dir to its end.
func Supervise(dir string) error {
	lock, err := holdLock(dir)
	if err != nil {
		return err
	}
	defer lock.Close()
	data, err := os.ReadFile(filepath.Join(dir, specFile))
	if err != nil {
		return err
	}
	var spec Spec
	if err := json.Unmarshal(data, &spec); err != nil {
		return fmt.Errorf("%s: %w", specFile, err)
	}
	// The daemon's terminal closing, or a Ctrl-C meant for it, is not for the trainer.
	// They are caught, not ignored: a trainer starts with the dispositions exec leaves
	// of caught signals, the defaults (an ignored one would stay ignored, and Ctrl-C
	// through gpuq attach would do nothing).
	signal.Notify(make(chan os.Signal, 1), syscall.SIGHUP, syscall.SIGINT, syscall.SIGPIPE)
	BecomeSubreaper()
	// The lease is read before the trainer starts: one that has lapsed already (its
	// worker's daemon may run the job elsewhere by now) starts nothing.
	var lease Lease
	if spec.Lease != "" {
		var ok bool
		if lease, ok = holdLease(spec.Lease); !ok {
			return WriteJSON(filepath.Join(dir, exitFile), Ended{Outcome: plans.Lost, Fenced: true, Detail: notStartedFenced})
		}
	}
	ln, p, h, err := begin(dir, spec)
	if err != nil {
		if MachineFault(err) {
			// Nothing ran: the daemon keeps the job waiting for the machine.
			var errno syscall.Errno
			errors.As(err, &errno)
			fmt.Printf("%s%d %s\n", unstartedLine, errno, strings.ReplaceAll(err.Error(), "\n", " "))
			return err
		}
		return WriteJSON(filepath.Join(dir, exitFile), Ended{Outcome: plans.Lost, Detail: err.Error()})
	}
	pids, info := filepath.Join(dir, supervisorFile), supervisorInfo{PID: os.Getpid(), Leader: p.PID()}
	if st, ok := hostProcs.stat(p.PID()); ok {
		info.LeaderStart = st.start
	}
	if err := replaceJSON(pids, info); err != nil {
		go keepRecord(pids, info, err, p.Done())
	}
	// The daemon that started this supervisor reads the trainer's pid from stdout.
	fmt.Println(p.PID())
	os.Stdout.Close()

	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	go func() {
		for range term {
			p.Stop(GroupGrace)
		}
	}()
	end := &ending{done: make(chan struct{})}
	var waiting sync.WaitGroup
	go accept(ln, p, h, end, &waiting)
	var fenced <-chan bool
	if spec.Lease != "" {
		fenced = keepLease(spec.Lease, lease, p)
	}
	markAlive(pids, p.Done())
	h.close()
	end.ended = endedOf(p, spec.Command.Argv)
	// A trainer that succeeded as its lease lapsed has succeeded.
	if fenced != nil && <-fenced && end.ended.Outcome != plans.Success {
		end.ended = Ended{Outcome: plans.Lost, Fenced: true, Exit: end.ended.Exit, Command: spec.Command.Argv, At: end.ended.At,
			Detail: "stopped: its worker lost touch with the daemon, which runs the job again elsewhere"}
	}
	// The clients waiting hear the end once exit.json is in place, before it is synced,
	// which would keep a daemon's next start on the card waiting for the disk: the
	// daemon that hears it journals it. They hear it even where exit.json cannot be
	// written. One that comes later finds exit.json, or waits for it while this
	// supervisor lives (its lock) and writes it, trying again where there is no room.
	exit := filepath.Join(dir, exitFile)
	sync, err := placeJSON(exit, end.ended)
	close(end.done)
	drainBacklog(dir)
	ln.Close()
	if err == nil {
		err = sync()
	}
	if err != nil {
		err = record(exit, end.ended, err)
	}
	waiting.Wait()
	return err
}

// aliveEvery is how often a supervisor renews the modification time of its
// supervisor.json while the trainer runs (see markAlive). Tests make it shorter.
var aliveEvery = 30 * time.Second

// markAlive renews the modification time of path (supervisor.json) every aliveEvery
// until done closes, as the trainer ends: an attempt lost with its supervisor while no
// daemon watched (the machine rebooted) is dated by when its files were last written
// (see lastWritten), which is so within aliveEvery of its end however long its trainer
// wrote nothing. One utimes each time, never synced (a crash may cost the latest, not
// yet written out), on the goroutine that waits for the trainer anyway: hundreds of
// supervisors on a node cost nothing worth counting. A file not there yet (a disk
// without room: see keepRecord) is left so.
func markAlive(path string, done <-chan struct{}) {
	tick := time.NewTicker(aliveEvery)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case now := <-tick.C:
			os.Chtimes(path, time.Time{}, now)
		}
	}
}

// drainBacklog lets the clients that connected as the attempt ended, still in the
// listener's backlog, hear how it ended (end.done is closed) rather than find their
// connection reset as the listener closes: accepted in order, they are served before
// one more, dialed here, is. A listener that no longer accepts answers nothing: it is
// given up after a while.
func drainBacklog(dir string) {
	c, err := Dial(dir, "wait")
	if err != nil {
		return
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.Copy(io.Discard, c)
}

// unstartedLine begins what a supervisor tells its daemon instead of the trainer's pid
// when the machine's want of room or descriptors kept it from starting the trainer (see
// MachineFault): the errno, and the error.
const unstartedLine = "unstarted "

// begin starts the attempt in dir: the supervisor's socket, then the trainer with its
// log. Its error, if any, comes before the trainer runs.
func begin(dir string, spec Spec) (net.Listener, *Process, *hub, error) {
	sock := SocketPath(dir)
	os.Remove(sock)
	if err := diskRefuses("bind", sock); err != nil {
		return nil, nil, nil, err
	}
	ln, err := listenOwn(sock)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("supervisor socket: %w", err)
	}
	h := newHub(64 << 10)
	p, err := Start(spec.Command, LogPath(dir), spec.Header, h)
	if err != nil {
		ln.Close()
		return nil, nil, nil, err
	}
	return ln, p, h, nil
}

// keepRecord writes the supervisor's and its trainer's pids (supervisor.json), which
// failed once with err, once the trainer runs. A disk without room does not stop the
// trainer for it: the daemon that started the supervisor has the pid already, and a
// daemon started later waits for the attempt all the same. It tries again every second
// until the record is written or the attempt has ended (done).
func keepRecord(path string, info supervisorInfo, err error, done <-chan struct{}) {
	fmt.Fprintf(os.Stderr, "cannot record the trainer's pid (%v); trying again every second\n", err)
	for {
		select {
		case <-done:
			return
		case <-time.After(time.Second):
		}
		if replaceJSON(path, info) == nil {
			return
		}
	}
}

// MachineFault reports whether err is the machine's want of room or descriptors, not
// the job's fault: a full disk or quota (ENOSPC, EDQUOT), a read-only one (EROFS), no
// file descriptor free (EMFILE, ENFILE). An attempt that did not start for one never
// ran, and may start once the machine has them again.
func MachineFault(err error) bool {
	for _, errno := range []syscall.Errno{syscall.ENOSPC, syscall.EDQUOT, syscall.EROFS, syscall.EMFILE, syscall.ENFILE} {
		if errors.Is(err, errno) {
			return true
		}
	}
	return false
}

// unstartedError is a supervisor's word that it did not start its trainer for the
// machine's want (see unstartedLine): errors.Is finds its errno.
type unstartedError struct {
	msg   string
	errno syscall.Errno
}

func (e *unstartedError) Error() string { return e.msg }
func (e *unstartedError) Unwrap() error { return e.errno }

// ending is how the attempt ended, once done is closed.
type ending struct {
	done  chan struct{}
	ended Ended
}

// record writes how the attempt ended to path (exit.json), which failed once with err
// (a disk without room): it tries again every second for as long as the attempt's
// directory is there, since a daemon started again later must find the end.
func record(path string, e Ended, err error) error {
	fmt.Fprintf(os.Stderr, "cannot record how the attempt ended (%v); trying again every second\n", err)
	for {
		time.Sleep(time.Second)
		if _, serr := os.Stat(filepath.Dir(path)); serr != nil {
			return err
		}
		if err = WriteJSON(path, e); err == nil {
			return nil
		}
	}
}

// holdLock returns the attempt's lock, which the daemon took and handed down as
// descriptor 3 (see StartSupervisor): spec.json, or the lock file of an older daemon. A
// supervisor started otherwise (by a daemon older still) takes the lock file itself.
// The trainer does not inherit it.
func holdLock(dir string) (*os.File, error) {
	// Descriptor 3 is not this process's to wrap unless it is the lock: the Go runtime
	// may have taken it for itself.
	var inherited unix.Stat_t
	if unix.Fstat(3, &inherited) == nil {
		for _, name := range lockFiles {
			path := filepath.Join(dir, name)
			var file unix.Stat_t
			if unix.Stat(path, &file) == nil && inherited.Dev == file.Dev && inherited.Ino == file.Ino {
				syscall.CloseOnExec(3)
				return os.NewFile(3, path), nil
			}
		}
	}
	path := filepath.Join(dir, lockFile)
	f, err := openPrivate(path, os.O_RDWR)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("another supervisor holds %s: %w", dir, err)
	}
	return f, nil
}

// lockFiles are the files an attempt's lock may be held on: spec.json, and the lock
// file of a supervisor that an older gpuq started (see holdLock).
var lockFiles = [...]string{specFile, lockFile}

// Alive reports whether a supervisor holds the attempt in dir, or is being started for
// it: whether its lock is held.
func Alive(dir string) bool {
	for _, name := range lockFiles {
		if locked(filepath.Join(dir, name)) {
			return true
		}
	}
	return false
}

// locked reports whether another holds the flock of the file at path.
func locked(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	return errors.Is(unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB), unix.EWOULDBLOCK)
}

// NeverStarted reports whether the attempt in dir never started and never will: no
// supervisor holds it or is being started for it, and neither its end nor a process
// of it is there. A daemon that died between recording an attempt and starting its
// supervisor leaves one so; one whose supervisor had not yet said that its trainer
// runs does not.
func NeverStarted(dir string) bool {
	if Alive(dir) {
		return false
	}
	if _, err := os.Stat(filepath.Join(dir, exitFile)); !errors.Is(err, os.ErrNotExist) {
		return false
	}
	abs, err := filepath.Abs(dir)
	return err == nil && len(hostProcs.members(attemptMark(abs), 0)) == 0
}

func serveClient(c net.Conn, p *Process, h *hub, end *ending) {
	defer c.Close()
	r := bufio.NewReader(c)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	req, err := r.ReadString('\n')
	if err != nil {
		return
	}
	c.SetReadDeadline(time.Time{})
	switch strings.TrimSpace(req) {
	case "stop":
		p.Stop(GroupGrace)
	case "wait":
		<-end.done
		json.NewEncoder(c).Encode(end.ended)
	case "attach", "attach-ro":
		scrollback, s := h.subscribe()
		defer h.unsubscribe(s)
		var keys io.Writer // what the client types goes to the trainer's terminal
		if strings.TrimSpace(req) == "attach" {
			keys = p.Input()
			defer p.Attached()()
		}
		attach(c, r, keys, scrollback, s.next, func() { h.unsubscribe(s) })
	default:
		if rows, cols, ok := sizeOf(req); ok {
			p.Resize(rows, cols)
		}
	}
}

// SizeRequest asks an attempt's supervisor (see Dial) to give its trainer's terminal
// the size of the one an attach client shows it on, as tmux gives a window its
// client's: the trainer hears of it (SIGWINCH), and what it draws next fits.
func SizeRequest(rows, cols int) string { return fmt.Sprintf("size %d %d", rows, cols) }

// sizeOf reads a SizeRequest; a size of nothing is none.
func sizeOf(req string) (rows, cols uint16, ok bool) {
	_, err := fmt.Sscanf(req, "size %d %d\n", &rows, &cols)
	return rows, cols, err == nil && rows > 0 && cols > 0
}

// KeysGrace is how long an attach whose client has gone still reads what the client
// sent before it went, for the trainer: keys typed just before a detach, which the
// client's going must not drop.
const KeysGrace = time.Second

// attach sends an attach client the scrollback, then the live output that next gives
// until it has no more or the client goes, and sends what the client sends (from r,
// c's reader) to keys, where keys is not nil. A client gone while output was on its way
// to it may have sent keys just before: they are read until r ends, for up to
// KeysGrace, before c closes. A client that types is gone once what it sends ends:
// then gone is called, for next to say there is no more, rather than wait for output
// to find the client gone (a trainer quiet for an hour).
func attach(c net.Conn, r io.Reader, keys io.Writer, scrollback []byte, next func() ([]byte, bool), gone func()) {
	typed := make(chan struct{})
	if keys != nil {
		go func() {
			io.Copy(keys, r)
			close(typed)
			gone()
		}()
	} else {
		close(typed)
	}
	_, err := c.Write(scrollback)
	for err == nil {
		b, more := next()
		if !more {
			return
		}
		_, err = c.Write(b)
	}
	select {
	case <-typed:
	case <-time.After(KeysGrace):
	}
}

// StartSupervisor starts a supervisor for spec in dir, as SpawnSupervisor does, and
// returns the trainer's pid.
func StartSupervisor(self []string, dir string, spec Spec) (leader int, err error) {
	s, err := SpawnSupervisor(self, dir, spec)
	return s.Leader, err
}

// Supervisor is a supervisor SpawnSupervisor started, once its trainer runs.
type Supervisor struct {
	Proc   Proc // the supervisor's process, under which all of the attempt's are
	Leader int  // the trainer's pid
	// Started is when the supervisor said that the trainer runs.
	Started time.Time
}

// SpawnSupervisor starts a supervisor (self is gpuq's binary and any arguments before
// the mode) for spec in dir, and returns once the trainer runs.
func SpawnSupervisor(self []string, dir string, spec Spec) (Supervisor, error) {
	leader, proc, err := spawn(self, dir, spec)
	return Supervisor{Proc: proc, Leader: leader, Started: time.Now()}, err
}

func spawn(self []string, dir string, spec Spec) (leader int, proc Proc, err error) {
	lock, err := writeSpec(dir, spec)
	if err != nil {
		return 0, proc, err
	}
	defer lock.Close() // the supervisor holds the lock on
	args := append(append([]string(nil), self[1:]...), SupervisorMode, dir)
	cmd := exec.Command(self[0], args...)
	// A session of its own: no signal meant for the daemon's terminal or group
	// reaches it, and it outlives the daemon.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.ExtraFiles = []*os.File{lock} // descriptor 3; see holdLock
	errLog, err := openPrivate(filepath.Join(dir, "supervisor.log"), os.O_WRONLY|os.O_APPEND)
	if err != nil {
		return 0, proc, err
	}
	defer errLog.Close()
	cmd.Stderr = errLog
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, proc, err
	}
	if err := cmd.Start(); err != nil {
		return 0, proc, fmt.Errorf("start supervisor: %w", err)
	}
	// Not reaped before cmd.Wait: it is there to be read.
	proc, _ = FindProc(cmd.Process.Pid)
	done := make(chan struct{})
	line, readErr := bufio.NewReader(out).ReadString('\n')
	go func() {
		cmd.Wait()
		close(done)
	}()
	if readErr != nil {
		<-done
		if e, err := ReadEnded(dir); err == nil && e != nil {
			return 0, proc, errors.New(e.Detail)
		}
		return 0, proc, fmt.Errorf("supervisor of %s ended before its trainer started; see %s", dir, errLog.Name())
	}
	if said, ok := strings.CutPrefix(strings.TrimSpace(line), unstartedLine); ok {
		<-done
		errno, msg, _ := strings.Cut(said, " ")
		n, _ := strconv.Atoi(errno)
		return 0, proc, &unstartedError{msg: msg, errno: syscall.Errno(n)}
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		return 0, proc, fmt.Errorf("supervisor of %s: %q is not a pid", dir, line)
	}
	return pid, proc, nil
}

// writeSpec writes spec to dir's spec.json, which is also the attempt's lock (one file
// made for an attempt less), and returns it open and locked: locked before it holds a
// word, so that it is never seen unlocked with a spec whose supervisor may start. It
// refuses an attempt that a supervisor holds already. A daemon that dies as it writes
// leaves a spec.json that no supervisor ran, cut short or whole: either is an attempt
// that never started (see NeverStarted, LaidOut).
func writeSpec(dir string, spec Spec) (*os.File, error) {
	data, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	if Alive(dir) {
		return nil, fmt.Errorf("a supervisor holds %s already", dir)
	}
	f, err := createPrivate(filepath.Join(dir, specFile))
	if err != nil {
		return nil, err
	}
	if err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err == nil {
		err = write(f, data)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// ReadEnded reads how the attempt in dir ended; nil when exit.json is not there.
func ReadEnded(dir string) (*Ended, error) {
	data, err := os.ReadFile(filepath.Join(dir, exitFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var e Ended
	if err := json.Unmarshal(data, &e); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, exitFile), err)
	}
	return &e, nil
}

// SupervisedLeader is the trainer's pid recorded in dir; 0 when none is.
func SupervisedLeader(dir string) int { return readInfo(dir).Leader }

// SupervisorOf is the supervisor recorded in dir, where it still holds the attempt.
func SupervisorOf(dir string) (Proc, bool) {
	info := readInfo(dir)
	if info.PID == 0 || !Alive(dir) {
		return Proc{}, false
	}
	return FindProc(info.PID)
}

// readInfo reads supervisor.json in dir; zero when it is not there.
func readInfo(dir string) supervisorInfo {
	var info supervisorInfo
	data, err := os.ReadFile(filepath.Join(dir, supervisorFile))
	if err != nil || json.Unmarshal(data, &info) != nil {
		return supervisorInfo{}
	}
	return info
}

// Wait blocks until the attempt in dir has ended and returns how: as its supervisor
// tells it, or exit.json says (an older supervisor tells nothing). An attempt whose
// supervisor is gone without saying (killed, or the machine rebooted) ended Lost, once
// whatever of it still runs has been stopped, so that nothing of it holds its card. One
// whose supervisor was gone already at the first look, and of which nothing ran on,
// ended while no one watched it: it is dated by when its files were last written (see
// lastWritten; its supervisor renews one while the trainer runs, see markAlive), not by
// when it was found so, which may be long after (a daemon that was stopped meanwhile).
func Wait(dir string) Ended {
	seen := false // a supervisor was seen holding the attempt
	for {
		c, err := Dial(dir, "wait")
		if err == nil {
			seen = true
			var e Ended
			err := json.NewDecoder(c).Decode(&e)
			c.Close()
			if err == nil && e.Outcome != "" {
				return e
			}
			// A supervisor that stopped listening as this connected (its socket is
			// gone) and lives on is recording the end, on a disk without room for as
			// long as it takes: wait for it as below. One that listens on told nothing.
			if _, err := os.Lstat(SocketPath(dir)); err == nil {
				break
			}
		}
		if !Alive(dir) {
			break
		}
		seen = true
		time.Sleep(50 * time.Millisecond) // a supervisor about to listen, or recording
	}
	e, err := ReadEnded(dir)
	switch {
	case err != nil:
		return Ended{Outcome: plans.Lost, Detail: err.Error()}
	case e != nil:
		return *e
	}
	lost := Ended{Outcome: plans.Lost, Detail: "its supervisor ended without recording how the attempt ended"}
	switch {
	case stopRemains(dir, GroupGrace):
		// What ran on held its card until now: the attempt ends now.
		lost.Detail += "; what it left running of the attempt was stopped"
	case !seen:
		lost.At = lastWritten(dir, time.Now())
	}
	return lost
}

// lastWritten is when the files of the attempt in dir were last written (its log, its
// metrics, supervisor.json, which its supervisor renews every aliveEvery while the
// trainer runs, ...), no later than now: the last the attempt is known to have run, by
// the clock of the machine it ran on. Zero where dir shows none.
func lastWritten(dir string, now time.Time) time.Time {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return time.Time{}
	}
	var last time.Time
	for _, entry := range entries {
		info, err := entry.Info()
		if err != nil || info.IsDir() {
			continue
		}
		if t := info.ModTime(); t.After(last) {
			last = t
		}
	}
	if last.After(now) {
		return now
	}
	return last
}

// Dial connects to the supervisor of the attempt in dir with a request.
func Dial(dir, request string) (net.Conn, error) {
	c, err := DialUnix(context.Background(), SocketPath(dir))
	if err != nil {
		return nil, err
	}
	if _, err := io.WriteString(c, request+"\n"); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// stopMargin is how long past its trainer's grace (GroupGrace) a supervisor asked to
// stop may take to end before it is continued, and then as long again before it is
// killed (see StopSupervised).
var stopMargin = 5 * time.Second

// StopSupervised asks the supervisor of the attempt in dir to stop it, and sees that it
// ends: a supervisor that has not ended GroupGrace plus stopMargin later (stopped with
// SIGSTOP, or hung) is continued (SIGCONT), to stop its trainer as asked, and one that
// has still not ended as long after that is killed; whoever waits for the attempt (see
// Wait) then stops what is left of it.
func StopSupervised(dir string) error {
	c, err := Dial(dir, "stop")
	if err != nil {
		return err
	}
	// The supervisor is the process that listens: a stopped one, which has accepted
	// nothing, too.
	cred, err := peerCred(c)
	c.Close()
	if err != nil {
		return err
	}
	wait := GroupGrace + stopMargin
	go func() {
		for _, sig := range []syscall.Signal{syscall.SIGCONT, syscall.SIGKILL} {
			if endsWithin(dir, wait) {
				return
			}
			syscall.Kill(int(cred.Pid), sig)
		}
	}()
	return nil
}

// endsWithin reports whether the supervisor of the attempt in dir has ended, or ends
// within d.
func endsWithin(dir string, d time.Duration) bool {
	for deadline := time.Now().Add(d); Alive(dir); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}
