package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/gpuq/gpuq/launcher"
	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler"
	"github.com/gpuq/gpuq/scheduler/gpu"
	"github.com/gpuq/gpuq/scheduler/runner"
)

type daemonOptions struct {
	io           ioStreams
	settings     *settings
	stop         bool
	stopTrainers bool
	poll         time.Duration
}

func newDaemonCmd(io ioStreams, st *settings) *cobra.Command {
	opts := &daemonOptions{io: io, settings: st}
	cmd := &cobra.Command{
		Use:   "daemon",
		Short: "Run the scheduler for submitted sweeps, in the foreground",
		Long: `Run gpuq's scheduler for the sweeps that gpuq submit sends it, until it is stopped.
It runs in the foreground, for systemd or a terminal; gpuq submit starts one in the
background when none runs.

Its state lives in the state directory (--state-dir, GPUQ_STATE_DIR, default
$XDG_STATE_HOME/gpuq): a journal of every change, each attempt's config and log under
attempts/, and the socket gpuq's other verbs talk to (mode 0600; only your user may
connect). Every trainer runs under a small supervisor process of its own, so trainers
keep running when the daemon stops or is killed; a daemon started again on the same
state directory takes them up and finishes the sweeps. One daemon per state directory.

The machine's cards, plan and headroom come from --gpus, --gpu-plan and --headroom
(GPUQ_GPUS, GPUQ_GPU_PLAN, GPUQ_HEADROOM, or the config file); default every card, no
slot limit, ` + plans.DefaultHeadroom.String() + ` headroom. Each sweep's own gpus and gpu_plan limit its jobs further.

gpuq daemon --stop stops a running daemon and leaves its trainers running; with
--stop-trainers it stops them too (their jobs end cancelled; queued jobs stay queued).`,
		Example: `  gpuq daemon --gpus 0,1,2,3,4,5,6 --gpu-plan 2,2,2,2,1,1,1
  gpuq daemon --stop`,
		Args: noArgs,
		RunE: func(*cobra.Command, []string) error {
			if opts.stop {
				return stopDaemon(opts)
			}
			if opts.stopTrainers {
				return badInput("--stop-trainers goes with --stop")
			}
			return runDaemon(opts)
		},
	}
	cmd.Flags().BoolVar(&opts.stop, "stop", false, "stop the running daemon; its trainers keep running")
	cmd.Flags().BoolVar(&opts.stopTrainers, "stop-trainers", false, "with --stop: stop every running trainer too")
	cmd.Flags().DurationVar(&opts.poll, "poll", time.Second, "how often the cards are sampled between events")
	return cmd
}

func stopDaemon(opts *daemonOptions) error {
	c, err := dialDaemon(opts.settings)
	if err != nil {
		return err
	}
	if err := c.call(http.MethodPost, "/v1/shutdown", shutdownRequest{StopTrainers: opts.stopTrainers}, nil); err != nil {
		return err
	}
	// The daemon's lock is free once it has exited.
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if daemonGone(c.dir) {
			fmt.Fprintln(opts.io.Err, "gpuq: the daemon has stopped")
			return nil
		}
	}
	return errors.New("the daemon was asked to stop but still answers after a minute")
}

// daemon is a running gpuq daemon: the engine over a journaled store, the supervised
// runner, and the API.
type daemon struct {
	dir     string
	store   *scheduler.Store
	eng     *scheduler.Engine
	cards   []gpu.Card
	started time.Time
	log     *eventLog
	// stop ends Serve; stopTrainers says whether Serve stops the trainers first.
	stop         context.CancelFunc
	stopTrainers atomic.Bool
}

type eventLog struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *eventLog) printf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, time.Now().Format("2006-01-02 15:04:05 ")+format+"\n", args...)
}

func (l *eventLog) event(ev scheduler.Event) {
	if ev.Attempt > 0 {
		l.printf("%s #%d %s: %s", ev.Job, ev.Attempt, ev.Kind, ev.Message)
	} else {
		l.printf("%s %s: %s", ev.Job, ev.Kind, ev.Message)
	}
}

func runDaemon(opts *daemonOptions) error {
	st := opts.settings
	dir, err := st.stateDir()
	if err != nil {
		return err
	}
	if err := makeStateDir(dir); err != nil {
		return err
	}
	lock, err := lockState(dir)
	if err != nil {
		return err
	}
	defer lock.Close()
	lock.Truncate(0)
	fmt.Fprintf(lock, "%d\n", os.Getpid())
	log := &eventLog{w: opts.io.Err}
	store, sweeps, err := scheduler.OpenState(dir, func(w string) { log.printf("warning: %s", w) })
	if err != nil {
		return err
	}
	defer store.Close()
	m, err := st.machine(opts.io)
	if err != nil {
		return err
	}
	defer m.inv.Close()
	reserve, err := st.hostReserve()
	if err != nil {
		return err
	}
	launcher.BecomeSubreaper()
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("cannot find gpuq's own binary for the supervisors: %w", err)
	}
	ro := runner.Options{Dir: filepath.Join(dir, "attempts")}
	if m.inv.Simulated() != "" {
		ro.Ledger = st.ledger()
	}
	d := &daemon{dir: dir, store: store, cards: m.cards, started: time.Now(), log: log}
	d.eng = scheduler.NewEngine(store, m.inv, runner.NewSupervised(ro, []string{self}), scheduler.RealClock{},
		scheduler.Config{Slots: m.slots, Headroom: m.headroom, Poll: opts.poll, Host: launcher.HostMemory, HostReserve: reserve}, log.event)
	for _, sw := range sweeps {
		d.eng.Resume(sw)
		if l, err := sweepLimit(sw, m.cards); err != nil {
			log.printf("warning: sweep %s: %v; its jobs may use every card", sw.Name, err)
		} else {
			d.eng.SetLimit(sw.Name, l)
		}
	}
	adopted, err := d.eng.Adopt()
	if err != nil {
		return err
	}

	// The API may ask to stop as soon as it serves.
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	d.stop = cancel
	ln, err := listenAPI(dir)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: d.routes(), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	snap := store.Snapshot()
	log.printf("gpuq daemon %s (pid %d) on %s: %s; %d sweeps, %d jobs known, %d attempts taken up; state in %s",
		version, os.Getpid(), m.spec, cardsText(m.cards, m.slots), len(sweeps), len(snap.Jobs()), adopted, dir)

	err = d.eng.Serve(ctx, d.stopTrainers.Load)
	shutCtx, done := context.WithTimeout(context.Background(), 5*time.Second)
	defer done()
	srv.Shutdown(shutCtx)
	if cerr := store.Compact(); cerr != nil {
		log.printf("warning: %v", cerr)
	}
	if errors.Is(err, context.Canceled) {
		left := len(store.Snapshot().Running())
		log.printf("gpuq daemon stopped; %d trainers left running under their supervisors", left)
		return nil
	}
	return err
}

// machine is the daemon's cards and their settings.
type machine struct {
	inv      *gpu.Inventory
	spec     plans.GPUSpec
	cards    []gpu.Card
	slots    []int
	headroom plans.Headroom
}

// machine opens the cards the daemon schedules on, with the machine's plan and
// headroom: flags, GPUQ_* and the config file, never a sweep.
func (s *settings) machine(io ioStreams) (*machine, error) {
	ov := s.overrides()
	spec, err := plans.ParseGPUs(ov.GPUs.Value)
	if err != nil {
		return nil, badInput("%s: %v", ov.GPUs.Source, err)
	}
	m := &machine{spec: spec, headroom: plans.DefaultHeadroom}
	if ov.Headroom.Value != "" {
		if m.headroom, err = plans.ParseHeadroom(ov.Headroom.Value); err != nil {
			return nil, badInput("%s: %v", ov.Headroom.Source, err)
		}
	}
	m.inv, err = s.openInventory(spec, io)
	if err != nil {
		return nil, err
	}
	if m.cards, err = m.inv.Snapshot(); err != nil {
		m.inv.Close()
		return nil, err
	}
	plan := plans.GPUPlan{plans.NoSlotLimit}
	if ov.Plan.Value != "" {
		if plan, err = plans.ParsePlan(ov.Plan.Value); err != nil {
			m.inv.Close()
			return nil, badInput("%s: %v", ov.Plan.Source, err)
		}
	}
	if m.slots, err = plan.For(len(m.cards)); err != nil {
		m.inv.Close()
		return nil, badInput("%s: %v", ov.Plan.Source, err)
	}
	return m, nil
}

func cardsText(cards []gpu.Card, slots []int) string {
	parts := make([]string, len(cards))
	for i, c := range cards {
		limit := "no slot limit"
		if slots[i] != plans.NoSlotLimit {
			limit = fmt.Sprintf("%d slots", slots[i])
		}
		parts[i] = fmt.Sprintf("GPU %d %s (%s)", c.Index, plans.FormatSize(c.Total), limit)
	}
	return strings.Join(parts, ", ")
}

// sweepLimit is a sweep's own gpus and gpu_plan on the daemon's cards. A simulated
// machine or "all" in the sweep means every card the daemon has.
func sweepLimit(sw *plans.Sweep, cards []gpu.Card) (scheduler.Limit, error) {
	mine := cards
	if sw.GPUs.Indices != nil {
		mine = nil
		for _, idx := range sw.GPUs.Indices {
			i := -1
			for k, c := range cards {
				if c.Index == idx {
					i = k
				}
			}
			if i < 0 {
				return nil, fmt.Errorf("gpus names GPU %d, which the daemon does not schedule on (it has %s)", idx, indicesText(cards))
			}
			mine = append(mine, cards[i])
		}
	}
	plan := sw.Plan
	if plan == nil {
		plan = sw.DefaultPlan()
	}
	slots, err := plan.For(len(mine))
	if err != nil {
		return nil, err
	}
	l := scheduler.Limit{}
	for i, c := range mine {
		l[c.Index] = slots[i]
	}
	return l, nil
}

func indicesText(cards []gpu.Card) string {
	parts := make([]string, len(cards))
	for i, c := range cards {
		parts[i] = strconv.Itoa(c.Index)
	}
	return strings.Join(parts, ",")
}

// stateDir is where the daemon keeps its state: --state-dir, GPUQ_STATE_DIR, the
// config file's state_dir, or $XDG_STATE_HOME/gpuq.
func (s *settings) stateDir() (string, error) {
	dir := s.v.GetString(keyStateDir)
	if dir == "" {
		dir = filepath.Join(xdgDir("XDG_STATE_HOME", filepath.Join(".local", "state")), "gpuq")
	}
	return filepath.Abs(dir)
}

// makeStateDir makes the state directory for a daemon, mode 0700: the socket's mode
// alone does not keep others out on every system; the directory's does.
func makeStateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("state directory: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("state directory: %w", err)
	}
	return nil
}

// lockState takes the state directory's lock, held as long as the daemon runs; the
// kernel drops it with the process, however it ends. The daemon writes its pid in it.
func lockState(dir string) (*os.File, error) {
	path := filepath.Join(dir, "daemon.lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
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

// daemonGone reports whether no daemon holds the state directory's lock, which it
// drops only as it exits.
func daemonGone(dir string) bool {
	f, err := lockState(dir)
	if err != nil {
		return false
	}
	f.Close()
	return true
}

// socketPath is the API's socket in the state directory.
func socketPath(dir string) string { return filepath.Join(dir, "gpuq.sock") }

// listenAPI listens on the state directory's socket, mode 0600, for this user alone.
func listenAPI(dir string) (net.Listener, error) {
	path := socketPath(dir)
	os.Remove(path) // a socket left by a daemon that was killed; the lock is ours
	old := syscall.Umask(0o177)
	ln, err := net.Listen("unix", path)
	syscall.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("API socket: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	return &peerListener{Listener: ln, uid: os.Getuid()}, nil
}

// peerListener accepts only connections from processes of the daemon's own user, as
// the kernel tells them (SO_PEERCRED); others get a 403 and are closed.
type peerListener struct {
	net.Listener
	uid int
}

func (l *peerListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		uid, err := peerUID(c)
		if err == nil && uid == l.uid {
			return c, nil
		}
		msg := fmt.Sprintf("this gpuq daemon belongs to uid %d; uid %d may not use it", l.uid, uid)
		if err != nil {
			msg = "cannot tell who is connecting: " + err.Error()
		}
		go refuse(c, msg)
	}
}

// refuse answers a connection's request, whatever it is, with a 403, and closes it.
// It reads the request's head first: closing on an unread request would reset the
// connection and the client would never see why.
func refuse(c net.Conn, msg string) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	r := bufio.NewReader(io.LimitReader(c, 64<<10))
	for {
		line, err := r.ReadString('\n')
		if err != nil || strings.TrimSpace(line) == "" {
			break
		}
	}
	body := errorBody(msg)
	fmt.Fprintf(c, "HTTP/1.1 403 Forbidden\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
}

func peerUID(c net.Conn) (int, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return -1, fmt.Errorf("%T is not a unix socket", c)
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return -1, err
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return -1, err
	}
	if credErr != nil {
		return -1, credErr
	}
	return int(cred.Uid), nil
}
