// Package worker is gpuq worker: one node's cards and attempts, run for a gpuq daemon on
// another machine (a worker inside a Slurm allocation, its daemon on the login node).
// It links to the daemon's network listener and reports the node's cards, RAM and cores;
// it starts and stops attempts under supervisors of their own as the daemon asks, reports
// how each ended and what its processes hold, and serves their logs and terminals
// through the daemon. The daemon packs, recovers and learns across all its workers, as
// on one machine.
//
// Its attempts outlive it, as a daemon's do: started again (or linked again after a
// network failure), it takes them up. They do not outlive its link to the daemon by
// more than a lease (see launcher.Lease and keeper) and their time to stop: past the
// daemon's grace, which is longer, the daemon runs them elsewhere, and nothing runs
// twice. A worker that finds its lease lapsed (it was frozen, or cut off) acts on
// nothing its daemon said before, makes sure its trainers are gone, then links again.
package worker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpuq/gpuq/launcher"
	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/gpu"
	"github.com/gpuq/gpuq/scheduler/gpu/nvidia"
	"github.com/gpuq/gpuq/scheduler/runner"
	"github.com/gpuq/gpuq/scheduler/state"
)

// Config is what a worker runs with.
type Config struct {
	// Server is the daemon's network listener, HOST:PORT.
	Server string
	// Credentials are the daemon's secret and certificate (api.LoadCredentials).
	Credentials api.Credentials
	// Name is the worker's: its cards are NAME:INDEX to the daemon and to people.
	Name string
	// Dir holds its attempts and its lease.
	Dir string
	// GPUs and Plan are its cards and their plan, as gpuq daemon's --gpus and --gpu-plan
	// (default every card, no slot limit).
	GPUs, Plan plans.Override
	// Inventory opens the cards; its Ledger is also the simulated trainers'.
	Inventory nvidia.Options
	// Poll is how often it reads its cards and reports them.
	Poll time.Duration
	// Supervisor is the command that starts an attempt's supervisor (see
	// launcher.SupervisorCommand).
	Supervisor []string
	// Version is its gpuq, as gpuq --version says it: the daemon and the worker tell
	// each other of another build by it (see api.OtherBuilds).
	Version string
	// Log receives what the worker does.
	Log io.Writer
	// IdleTimeout, if set: a worker that has run nothing for this long leaves.
	IdleTimeout time.Duration
	// Ends is when the worker stops taking jobs (its allocation's end); zero: never.
	// Then it stops what still runs, which the daemon runs again elsewhere, and leaves.
	Ends time.Time
	// Allocation is the Slurm job the worker runs in; "" outside one.
	Allocation string
}

// retryAfter bounds how long a worker waits before it tries its daemon again.
const retryAfter = 5 * time.Second

// Run runs a worker until ctx is cancelled, it has left (idle, or drained by its
// daemon), or the daemon refuses it.
func Run(ctx context.Context, cfg Config) error {
	w, err := open(cfg)
	if err != nil {
		return err
	}
	defer func() {
		w.forgetDir()
		w.close()
	}()
	w.log.Printf("gpuq worker %s %s (pid %d): %s, %d cores; attempts in %s; daemon at %s",
		cfg.Name, cfg.Version, os.Getpid(), gpu.CardsText(w.cards, w.plan), runtime.NumCPU(), cfg.Dir, cfg.Server)
	wait, said := time.Duration(0), ""
	for {
		if err := w.fence(ctx); err != nil {
			w.stopping()
			return nil
		}
		err := w.session(ctx)
		switch {
		case ctx.Err() != nil:
			w.stopping()
			return nil
		case errors.Is(err, errLeft):
			w.log.Printf("left: idle, and the daemon starts nothing more here")
			return nil
		case final(err):
			return err
		case errors.Is(err, errLapsed):
			w.log.Printf("out of touch with the daemon for the whole lease (%s): its trainers stop, and it links again", w.lease.length)
			said = ""
		case err != nil && err.Error() != said:
			w.log.Printf("%v; trying again", err)
			said = err.Error()
		}
		if w.linked {
			wait, said, w.linked = 0, "", false
		}
		if w.idleTooLong() {
			// Unlinked, polls that would see it idle do not run: a worker whose daemon
			// was down or mistyped held its allocation until its wall time.
			w.log.Printf("idle for %s, and the daemon at %s cannot be reached: leaving", w.cfg.IdleTimeout, w.cfg.Server)
			return nil
		}
		wait = min(wait+time.Second, retryAfter)
		select {
		case <-ctx.Done():
			w.stopping()
			return nil
		case <-time.After(wait):
		}
	}
}

// stopping says, as the worker stops at a signal (SIGTERM from a person, Slurm or
// systemd), what becomes of its trainers: they are not its children to stop, and
// whoever stopped it must know that they run on, for how long, and how they come back.
func (w *worker) stopping() {
	ids := slices.Sorted(maps.Keys(w.running))
	switch {
	case len(ids) == 0:
		w.log.Printf("stopping, as signalled: no trainer runs here")
	case w.lease.valid():
		left := w.lease.held.Term - w.lease.now()
		w.log.Printf("stopping, as signalled, leaving %s (%s) to run on under the lease until %s (%s), then to stop; "+
			"a worker of this name started again by then takes up what runs, else the daemon runs those jobs again elsewhere",
			plans.Count(len(ids), "trainer"), strings.Join(ids, ", "), time.Now().Add(left).Format("15:04:05"), left.Round(time.Second))
	default:
		w.log.Printf("stopping, as signalled, leaving %s (%s) to stop: the lease has lapsed; the daemon runs those jobs again elsewhere",
			plans.Count(len(ids), "trainer"), strings.Join(ids, ", "))
	}
}

// final reports whether a session's end ends the worker: linking again would end the
// same way (the daemon refused it, or speaks another protocol of the link).
func final(err error) bool {
	return errors.Is(err, api.ErrUnauthorized) || errors.Is(err, errRefused) || errors.Is(err, errOtherProtocol)
}

var (
	errLeft          = errors.New("left")
	errRefused       = errors.New("the daemon refused this worker")
	errOtherProtocol = errors.New("the daemon speaks another protocol of the worker link")
	errLapsed        = errors.New("the lease lapsed")
)

// worker is a running worker.
type worker struct {
	cfg   Config
	inv   *nvidia.Inventory
	cards []gpu.Card // the last reading
	// reported is the state last sent on the link (see poll).
	reported api.WorkerState
	// hostMemory reads the node's RAM: launcher.HostMemory.
	hostMemory func() (total, available int64, err error)
	plan       []int // the slots of each of cards
	runner     *runner.Supervised
	lock       *os.File
	// instance tells this worker from another node's of the same name (Hello.Instance).
	instance string
	// attempts is where its attempts live.
	attempts string
	lease    *keeper
	// hello is the number of the link's Hello as a beat: the Welcome answers it.
	hello uint64
	// sweeps are those the daemon has sent, expanded, by key (StartRequest.SweepKey).
	sweeps map[string]*plans.Sweep
	// running are the attempts it watches; ended those that ended, until the daemon
	// has them.
	running map[string]api.AttemptRef
	ended   map[string]scheduler.Exit
	// starting are the running attempts whose supervisors are being started, each in a
	// goroutine of its own, as the daemon's are (see startAll): true where it was asked
	// to stop meanwhile. started hears how each start went; startSlots bounds how many
	// start at once (runner.Supervised.StartsAtOnce).
	starting   map[string]bool
	started    chan startResult
	startSlots chan struct{}
	// active is when an attempt last ran here.
	active time.Time
	// leaving: it asked to leave; drained: the daemon starts nothing more here.
	leaving, drained bool
	// ending: its end has come (Config.Ends); stopped are the attempts it stopped then,
	// whose jobs go back to the queue.
	ending  bool
	stopped map[string]bool
	// linked: the last session reached the daemon. everLinked: a session did, since
	// it started; fresh: it made its directory (see forgetDir).
	linked, everLinked, fresh bool
	// warned is the daemon's gpuq of another build that it last warned of.
	warned string
	log    *runner.EventLog
}

func open(cfg Config) (*worker, error) {
	if err := api.ValidWorkerName(cfg.Name); err != nil {
		return nil, err
	}
	// What it is given is read before its directory is made: a worker refused for it
	// leaves none.
	spec, err := plans.ParseGPUs(cfg.GPUs.Value)
	if err != nil {
		return nil, plans.Problems{{File: cfg.GPUs.Source, Msg: err.Error()}}
	}
	plan := plans.GPUPlan{plans.NoSlotLimit}
	if cfg.Plan.Value != "" {
		if plan, err = plans.ParsePlan(cfg.Plan.Value); err != nil {
			return nil, plans.Problems{{File: cfg.Plan.Source, Msg: err.Error()}}
		}
	}
	_, err = os.Stat(cfg.Dir)
	fresh := errors.Is(err, os.ErrNotExist)
	// From here on the directory is its real path: a link on the way to it that
	// someone points elsewhere later changes nothing.
	dir, err := launcher.ResolveDir(cfg.Dir)
	if err == nil {
		err = launcher.PrivateDir(dir)
	}
	if err != nil {
		return nil, fmt.Errorf("worker directory: %w", err)
	}
	cfg.Dir = dir
	lock, err := lockDir(cfg.Dir, cfg.Name)
	if err != nil {
		return nil, err
	}
	w := &worker{cfg: cfg, lock: lock, fresh: fresh, log: runner.NewEventLog(cfg.Log), attempts: filepath.Join(cfg.Dir, "attempts"),
		lease: openLease(filepath.Join(cfg.Dir, "lease"), launcher.Uptime), sweeps: map[string]*plans.Sweep{},
		running: map[string]api.AttemptRef{}, ended: map[string]scheduler.Exit{}, stopped: map[string]bool{}, active: time.Now(),
		starting: map[string]bool{}, started: make(chan startResult), hostMemory: launcher.HostMemory}
	// One refused from here on (no driver, a plan for other cards) takes away the
	// directory it made, as one that leaves without linking does.
	refused := func(err error) (*worker, error) {
		w.forgetDir()
		w.close()
		return nil, err
	}
	if w.instance, err = instanceOf(cfg.Dir); err != nil {
		return refused(err)
	}
	// Simulated cards only where asked for: a node without a driver has no cards for
	// the daemon's jobs.
	opt := cfg.Inventory
	opt.RealOnly = true
	if w.inv, err = nvidia.Open(spec, opt); err != nil {
		return refused(err)
	}
	if w.cards, err = w.inv.Read(); err == nil {
		w.plan, err = plan.For(len(w.cards))
	}
	if err != nil {
		return refused(plans.Problems{{File: cfg.Plan.Source, Msg: err.Error()}})
	}
	launcher.BecomeSubreaper()
	ro := runner.Options{Dir: w.attempts, Lease: w.lease.path}
	if w.inv.Simulated() != "" {
		ro.Ledger = cfg.Inventory.Ledger
	}
	w.runner = runner.NewSupervised(ro, cfg.Supervisor)
	w.startSlots = make(chan struct{}, w.runner.StartsAtOnce())
	return w, nil
}

func (w *worker) close() {
	if w.inv != nil {
		w.inv.Close()
	}
	w.lock.Close()
}

// lockDir takes the worker directory's lock, so that two workers of one name never
// share it.
func lockDir(dir, name string) (*os.File, error) {
	path := filepath.Join(dir, "worker.lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		pid, _ := os.ReadFile(path)
		f.Close()
		return nil, fmt.Errorf("another gpuq worker named %s (pid %s) runs in %s: give this one another --name",
			name, strings.TrimSpace(string(pid)), dir)
	}
	f.Truncate(0)
	fmt.Fprintf(f, "%d\n", os.Getpid())
	return f, nil
}

// instanceOf is the id of a worker directory, made the first time: the same for a
// worker started again on its node, another for one of the same name on another node.
func instanceOf(dir string) (string, error) {
	path := filepath.Join(dir, "instance")
	b := make([]byte, 16)
	rand.Read(b)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err == nil {
		_, err = fmt.Fprintln(f, hex.EncodeToString(b))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("worker instance: %w", err)
	}
	id, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("worker instance: %w", err)
	}
	return strings.TrimSpace(string(id)), nil
}

// forgetDir takes away, as the worker leaves or is refused, the directory it made and
// never used: it never linked to its daemon (a mistyped address, a daemon down, a
// refusal, no cards), so nothing ran from it. Every Slurm allocation's worker has a name of its own, and
// those that never linked left a directory each in the state directory. What it did
// not make stays: a directory that was there, or any file in it but its own.
func (w *worker) forgetDir() {
	if !w.fresh || w.everLinked {
		return
	}
	// The lock last: a worker of the name that starts before it goes is refused; one
	// that starts after makes its own files, and the directory, not empty, stays.
	for _, name := range []string{"instance", "lease", "attempts", "worker.lock"} {
		os.Remove(filepath.Join(w.cfg.Dir, name)) // "attempts" only if empty
	}
	os.Remove(w.cfg.Dir)
}

// session links to the daemon and does what it asks until the link breaks, or the
// lease lapses.
func (w *worker) session(ctx context.Context) error {
	// What the session starts ends with it: a reader holding a message no one takes
	// any more (the lease lapsed, a send failed) would otherwise wait for it forever.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	client, err := api.DialRemote(w.cfg.Server, w.cfg.Credentials)
	if err != nil {
		return err
	}
	s, err := client.Stream(ctx, "/v1/worker")
	if err != nil {
		return err
	}
	defer s.Close()
	// The link ends with the session, whatever ends it.
	stop := context.AfterFunc(ctx, func() { s.Close() })
	defer stop()
	defer w.lease.reset()
	out := json.NewEncoder(s)
	hello := w.helloMessage()
	w.reported = hello.State
	w.hello = w.lease.beat()
	if err := out.Encode(api.WorkerMessage{Hello: &hello}); err != nil {
		return err
	}
	msgs, broken := receive(ctx, s)
	poll := time.NewTicker(w.cfg.Poll)
	defer poll.Stop()
	// Beats start once the Welcome says how often.
	beats := time.NewTicker(time.Hour)
	beats.Stop()
	defer beats.Stop()
	for {
		var err error
		var m api.DaemonMessage
		var x scheduler.Exit
		var beat, polled bool
		var st startResult
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err = <-broken:
		case m = <-msgs:
		case x = <-w.runner.Exits():
		case <-beats.C:
			beat = true
		case <-poll.C:
			polled = true
		case st = <-w.started:
		}
		// Whatever woke it, a worker past its lease acts on none of it.
		if gerr := w.guard(); gerr != nil {
			return gerr
		}
		switch {
		case err != nil:
			return fmt.Errorf("link to the daemon at %s: %w", w.cfg.Server, err)
		case beat:
			err = out.Encode(api.WorkerMessage{Beat: w.lease.beat()})
		case polled:
			err = w.poll(out)
		case x.Attempt != "":
			err = w.exited(out, x)
		case st.attempt != nil:
			err = w.startEnded(out, st)
		default:
			if err = w.handle(ctx, client, out, m); err == nil && m.Welcome != nil {
				beats.Reset(m.Welcome.Beat)
			}
		}
		if err != nil {
			return err
		}
	}
}

// helloMessage is what the worker says of itself as it links.
func (w *worker) helloMessage() api.Hello {
	hello := api.Hello{Name: w.cfg.Name, Instance: w.instance, Version: w.cfg.Version, Protocol: api.WorkerProtocol, Dir: w.attempts,
		Cores: runtime.NumCPU(), Allocation: w.cfg.Allocation, Plan: map[int]int{}, State: w.state()}
	for i, c := range w.cards {
		hello.Plan[c.Index] = w.plan[i]
	}
	return hello
}

// receive reads the daemon's messages from s until s breaks, then says why.
func receive(ctx context.Context, s io.Reader) (<-chan api.DaemonMessage, <-chan error) {
	msgs, broken := make(chan api.DaemonMessage), make(chan error, 1)
	go func() {
		dec := json.NewDecoder(s)
		for {
			var m api.DaemonMessage
			if err := dec.Decode(&m); err != nil {
				broken <- err
				return
			}
			select {
			case msgs <- m:
			case <-ctx.Done():
				return
			}
		}
	}()
	return msgs, broken
}

// guard is the first thing a worker does whenever it wakes: past its lease it acts on
// nothing more of this link (errLapsed), and past the lease's kill time (a frozen node
// thawing, its supervisors frozen too) it kills the lease's trainers before that.
func (w *worker) guard() error {
	if !w.lease.lapsed() {
		return nil
	}
	if w.lease.held.KillIn(w.lease.now()) == 0 {
		w.killAll()
	}
	return errLapsed
}

// fence makes sure that nothing runs under a lapsed lease any more: the supervisors
// send their trainers SIGTERM at its term and SIGKILL at its kill time; the worker waits
// for that time, then kills whatever is left (a supervisor killed, or slow to wake).
// Then a new lease can be had.
func (w *worker) fence(ctx context.Context) error {
	if !w.lease.lapsed() {
		return nil
	}
	if wait := w.lease.held.KillIn(w.lease.now()); wait > 0 {
		// Else a worker started again after its lease lapsed waited, saying nothing.
		under := "any trainer under it"
		if ids := slices.Sorted(maps.Keys(w.running)); len(ids) > 0 {
			under = fmt.Sprintf("its %s (%s)", plans.Count(len(ids), "trainer"), strings.Join(ids, ", "))
		}
		w.log.Printf("the lease has lapsed: waiting %s, until the kill time of %s, before linking", wait.Round(time.Second), under)
	}
	for {
		wait := w.lease.held.KillIn(w.lease.now())
		if wait == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(min(wait, time.Second)):
		}
	}
	w.killAll()
	w.lease.fenced()
	return nil
}

// killAll kills every process of the worker's attempts.
func (w *worker) killAll() {
	if n := launcher.KillUnder(w.attempts); n > 0 {
		w.log.Printf("killed every process of the trainers whose lease had lapsed (%d)", n)
	}
}

// exited reports an attempt's end.
func (w *worker) exited(out *json.Encoder, x scheduler.Exit) error {
	if w.stopped[x.Attempt] && x.Outcome != plans.Success {
		x.Outcome, x.Requeue = plans.Lost, true
		x.Detail = fmt.Sprintf("stopped as worker %s's allocation ends: its job runs again elsewhere", w.cfg.Name)
	}
	last := w.lastMetrics(x.Attempt)
	delete(w.running, x.Attempt)
	w.ended[x.Attempt] = x
	w.active = time.Now()
	return out.Encode(endMessage(x, last))
}

// endMessage tells the daemon of an attempt's end, with how long ago it came: an end
// told again when the worker is back after an absence was not then.
func endMessage(x scheduler.Exit, last []plans.Reading) api.WorkerMessage {
	m := api.WorkerMessage{Exit: &x, ExitMetrics: last}
	if !x.At.IsZero() {
		m.ExitAgo = max(time.Since(x.At), 0)
	}
	x.At = time.Time{} // the worker's clock is not the daemon's
	return m
}

// handle does what a message of the daemon's asks.
func (w *worker) handle(ctx context.Context, client *api.Client, out *json.Encoder, m api.DaemonMessage) error {
	switch {
	case m.Error != "":
		return fmt.Errorf("%w: %s", errRefused, m.Error)
	case m.Welcome != nil:
		return w.welcome(out, m.Welcome)
	case m.Ack > 0:
		w.renew(m.Ack)
	case m.Start != nil:
		return w.start(out, m.Start)
	case m.Stop != nil:
		w.stop(api.AttemptRef{ID: m.Stop.ID, Job: m.Stop.Job, N: m.Stop.N})
	case m.Stream != nil:
		go w.serveStream(ctx, client, *m.Stream)
	case m.Drain:
		w.drained = true
	}
	return nil
}

// renew moves the lease on as the daemon answered beat n, and writes it where trainers
// run under it (see saveLease).
func (w *worker) renew(n uint64) {
	if _, err := w.lease.answered(n, len(w.running) > 0); err != nil {
		w.log.Printf("warning: %v", err)
	}
}

// saveLease writes the lease for the supervisors, where the file is behind it: before
// a trainer starts under it, and as a link is welcomed, before its attempts are taken
// up (a worker started again runs none of its own yet, but their supervisors read it).
func (w *worker) saveLease() {
	if err := w.lease.save(); err != nil {
		w.log.Printf("warning: %v", err)
	}
}

// welcome takes up the attempts the daemon holds running here, after a restart of
// either or a broken link: each goes on, is reported ended, or never started. It tells
// how those the daemon asks about ended, if it knows.
func (w *worker) welcome(out *json.Encoder, wel *api.Welcome) error {
	if err := w.knowDaemon(wel); err != nil {
		return err
	}
	if wel.Lease <= 0 || wel.Beat <= 0 {
		return fmt.Errorf("%w: it gives no lease (an older gpuq): run the same gpuq on the daemon and its workers", errRefused)
	}
	w.linked, w.everLinked = true, true
	w.lease.length, w.lease.stop = wel.Lease, wel.Stop
	w.renew(w.hello)
	w.saveLease()
	if !w.lease.valid() {
		return fmt.Errorf("the daemon's welcome came too late for a lease of %s; linking again", wel.Lease)
	}
	held := map[string]bool{}
	for _, ref := range wel.Attempts {
		held[ref.ID] = true
	}
	for _, ref := range slices.Concat(wel.Attempts, wel.Ask) {
		if _, ok := w.running[ref.ID]; ok {
			continue
		}
		x, known := w.ended[ref.ID]
		if !known && !held[ref.ID] {
			x, known = w.endOf(ref)
		}
		if known {
			if err := out.Encode(endMessage(x, nil)); err != nil {
				return err
			}
			continue
		}
		// One asked about that runs still is taken up to tell its end when it comes,
		// and stopped below.
		w.running[ref.ID] = ref
		w.runner.Adopt(&state.Attempt{ID: ref.ID, Job: ref.Job, N: ref.N})
	}
	// An attempt the daemon does not hold running here runs elsewhere, or has ended
	// for it: it must not run on here.
	for id, ref := range w.running {
		if !held[id] {
			w.log.Printf("stopping %s: the daemon no longer runs it here", id)
			w.stop(ref)
		}
	}
	for id := range w.ended {
		if !held[id] {
			delete(w.ended, id)
		}
	}
	w.log.Printf("linked to the daemon at %s (%s); %s taken up; a lease of %s",
		w.cfg.Server, gpuqOf(wel.Version), plans.Count(len(wel.Attempts), "attempt"), wel.Lease)
	// A beat at once says that the Welcome is answered: the daemon gives its cards jobs
	// from then on.
	return out.Encode(api.WorkerMessage{Beat: w.lease.beat()})
}

// knowDaemon leaves a daemon whose Welcome says another protocol of the link than the
// worker's (errOtherProtocol, naming both gpuqs and what to do, which ends the worker
// and gpuq worker prints), since each would misread the other: a daemon from before
// Welcome said it speaks the first. Of a daemon of another build that speaks the
// worker's, it warns, once for each gpuq it links to.
func (w *worker) knowDaemon(wel *api.Welcome) error {
	if p := wel.ProtocolOf(); p != api.WorkerProtocol {
		return fmt.Errorf("%w: the daemon at %s runs %s, which speaks protocol %d of the worker link, and this worker runs gpuq %s, which speaks protocol %d: "+
			"the two would misread each other; run one gpuq on both (install the daemon's on this node, or the worker's on the daemon's and start it again; "+
			"gpuq --version says which each runs), then start the worker again",
			errOtherProtocol, w.cfg.Server, gpuqOf(wel.Version), p, w.cfg.Version, api.WorkerProtocol)
	}
	if api.OtherBuilds(w.cfg.Version, wel.Version) && w.warned != wel.Version {
		w.log.Printf("warning: the daemon at %s runs gpuq %s, and this worker gpuq %s: they speak one protocol of the worker link (%d), "+
			"so it links, but what each does of a job may differ; run one gpuq on both", w.cfg.Server, wel.Version, w.cfg.Version, api.WorkerProtocol)
		w.warned = wel.Version
	}
	return nil
}

// gpuqOf names a daemon's gpuq as its Welcome says it.
func gpuqOf(version string) string {
	if version == "" {
		return "an older gpuq, which does not say its version"
	}
	return "gpuq " + version
}

// endOf is how an attempt the daemon asks about ended, as its directory says, when no
// supervisor holds it any more: its exit.json, or unknown (lost) where it never
// started here; ok is false while a supervisor holds it.
func (w *worker) endOf(ref api.AttemptRef) (x scheduler.Exit, ok bool) {
	x = scheduler.Exit{Attempt: ref.ID, Outcome: plans.Lost, Detail: fmt.Sprintf("worker %s knows no end of it", w.cfg.Name)}
	dir, err := launcher.AttemptDir(w.attempts, ref.Job, ref.N)
	if err != nil {
		return x, true
	}
	if launcher.Alive(dir) {
		return x, false
	}
	if e, err := launcher.ReadEnded(dir); err == nil && e != nil {
		x.Outcome, x.OOM, x.Detail, x.Requeue = e.Outcome, e.OOM, e.Detail, e.Fenced
		x.Process, x.Command, x.At = e.Exit, e.Command, e.At
	}
	return x, true
}

// start starts an attempt as the daemon asks, in a goroutine of its own: the session
// goes on meanwhile, and the daemon's next starts start beside it (startEnded hears how
// it went). One that cannot start is reported lost, and one its supervisor did not start
// for its lease had lapsed goes back to the queue.
func (w *worker) start(out *json.Encoder, req *api.StartRequest) error {
	a := req.Attempt
	if w.ending {
		// Placed before the daemon heard that this worker's end has come.
		x := scheduler.Exit{Attempt: a.ID, Outcome: plans.Lost, Requeue: true, Detail: fmt.Sprintf("worker %s is ending", w.cfg.Name)}
		w.ended[a.ID] = x
		return out.Encode(api.WorkerMessage{Exit: &x})
	}
	l, err := w.launch(req)
	if err != nil {
		return w.notStarted(out, a, err)
	}
	w.saveLease()
	// Running from now: a relink takes up no attempt that is starting, and one whose
	// trainer ends before its start is heard of ends as any other.
	w.running[a.ID] = api.AttemptRef{ID: a.ID, Job: a.Job, N: a.N}
	w.starting[a.ID] = false
	w.active = time.Now()
	go func() {
		w.startSlots <- struct{}{}
		_, err := w.runner.Start(l)
		<-w.startSlots
		w.started <- startResult{attempt: a, err: err}
	}()
	return nil
}

// startResult is how the start of an attempt went.
type startResult struct {
	attempt *state.Attempt
	err     error
}

// startEnded takes up how a start went: an attempt asked to stop while it started is
// stopped now; one that did not start is reported.
func (w *worker) startEnded(out *json.Encoder, r startResult) error {
	a := r.attempt
	stop := w.starting[a.ID]
	delete(w.starting, a.ID)
	if r.err == nil {
		if stop {
			w.runner.Stop(a)
		}
		return nil
	}
	delete(w.running, a.ID)
	return w.notStarted(out, a, r.err)
}

// notStarted reports an attempt that did not start for err: lost, or unstarted where
// its supervisor found its lease lapsed (its job goes back to the queue).
func (w *worker) notStarted(out *json.Encoder, a *state.Attempt, err error) error {
	x := scheduler.Exit{Attempt: a.ID, Outcome: plans.Lost, Detail: fmt.Sprintf("worker %s: %v", w.cfg.Name, err)}
	if dir, derr := launcher.AttemptDir(w.attempts, a.Job, a.N); derr == nil {
		if e, _ := launcher.ReadEnded(dir); e != nil && e.Fenced {
			x.Unstarted = true
		}
	}
	w.ended[a.ID] = x
	return out.Encode(api.WorkerMessage{Exit: &x})
}

// stop stops a running attempt; one still starting is stopped once it has started.
func (w *worker) stop(ref api.AttemptRef) {
	if _, ok := w.starting[ref.ID]; ok {
		w.log.Printf("%s is starting: it stops once it has started", ref.ID)
		w.starting[ref.ID] = true
		return
	}
	w.runner.Stop(&state.Attempt{ID: ref.ID, Job: ref.Job, N: ref.N})
}

// launch is what the runner needs to start the attempt, from the sweep as submitted.
func (w *worker) launch(req *api.StartRequest) (scheduler.Launch, error) {
	if src := req.Sweep; src != nil {
		sw, err := plans.DecodeSweepFiles(src.File, []byte(src.Source), src.Files, src.Overrides)
		if err != nil {
			return scheduler.Launch{}, fmt.Errorf("sweep %s: %w", src.File, err)
		}
		w.sweeps[req.SweepKey] = sw
	}
	sw := w.sweeps[req.SweepKey]
	if sw == nil {
		return scheduler.Launch{}, fmt.Errorf("the daemon did not send sweep %s", req.SweepKey)
	}
	run := *sw
	run.Env = req.Env
	a := req.Attempt
	i := slices.IndexFunc(sw.Jobs, func(j plans.Job) bool { return j.ID == a.Job })
	if i < 0 {
		return scheduler.Launch{}, fmt.Errorf("sweep %s has no job %s", sw.Name, a.Job)
	}
	l := scheduler.Launch{Attempt: a, Job: &state.Job{Job: &sw.Jobs[i], Sweep: sw.Name},
		Submission: &state.Submission{Sweep: &run, Environ: req.Environ}, Sharing: req.Sharing}
	for _, idx := range a.GPUs {
		c := slices.IndexFunc(w.cards, func(c gpu.Card) bool { return c.Index == idx })
		if c < 0 {
			return scheduler.Launch{}, fmt.Errorf("no card %d here", idx)
		}
		l.Cards = append(l.Cards, w.cards[c])
	}
	return l, nil
}

// poll reads the node and reports it; a worker that has been idle past its timeout, or
// whose end has come, asks to leave, and one the daemon has drained leaves once idle.
func (w *worker) poll(out *json.Encoder) error {
	if st := w.state(); !reportsAs(&st, &w.reported) {
		if err := out.Encode(api.WorkerMessage{State: &st}); err != nil {
			return err
		}
		w.reported = st
	}
	if !w.cfg.Ends.IsZero() && !time.Now().Before(w.cfg.Ends) && !w.ending {
		return w.end(out)
	}
	if w.drained && len(w.running) == 0 {
		return errLeft
	}
	if !w.leaving && w.idleTooLong() {
		w.leaving = true
		w.log.Printf("idle for %s: leaving", w.cfg.IdleTimeout)
		return out.Encode(api.WorkerMessage{Leaving: true})
	}
	return nil
}

// idleTooLong reports whether the worker has run nothing for its --idle-timeout.
func (w *worker) idleTooLong() bool {
	return w.cfg.IdleTimeout > 0 && len(w.running) == 0 && time.Since(w.active) > w.cfg.IdleTimeout
}

// reportsAs reports whether the daemon, told last, knows what st says: the same
// cards, processes and attempts' RAM, the node's RAM within hostNoise, and no metrics
// since (they are what trainers reported since the last state, sent once). A poll that
// reads so sends nothing: an idle worker told its daemon the same every second. Beats
// tell the daemon that it is there.
func reportsAs(st, last *api.WorkerState) bool {
	return len(st.AttemptMetrics) == 0 && st.HostTotal == last.HostTotal &&
		abs(st.HostAvailable-last.HostAvailable) <= st.HostTotal/hostNoise &&
		st.Ends.Equal(last.Ends) && maps.Equal(st.AttemptMemory, last.AttemptMemory) &&
		reflect.DeepEqual(st.Cards, last.Cards)
}

// hostNoise: what a host's available RAM moves by, within a 256th of its RAM (96 MiB
// of 24 GiB), is no news to the daemon, which keeps a tenth of it free (see
// plans.Headroom): the page cache breathes by that much while nothing runs.
const hostNoise = 256

func abs(n int64) int64 { return max(n, -n) }

// end stops the attempts still running as the worker's allocation is about to end, so
// that their jobs go back to the queue now, rather than when Slurm has killed them and
// the daemon has waited out its grace for a worker that will not be back; then it
// leaves.
func (w *worker) end(out *json.Encoder) error {
	w.ending = true
	w.log.Printf("the allocation is ending: stopping %s, whose jobs run again elsewhere, and leaving", plans.Count(len(w.running), "attempt"))
	for id, ref := range w.running {
		w.stopped[id] = true
		w.stop(ref)
	}
	if w.leaving {
		return nil
	}
	w.leaving = true
	return out.Encode(api.WorkerMessage{Leaving: true})
}

// state reads the node: its cards, each process named with its attempt, and its RAM.
func (w *worker) state() api.WorkerState {
	st := api.WorkerState{AttemptMemory: w.runner.HostMemory(), AttemptMetrics: w.metrics(), Ends: w.cfg.Ends}
	if cards, err := w.inv.Read(); err == nil {
		w.cards = cards
	}
	st.Cards = slices.Clone(w.cards)
	for i := range st.Cards {
		st.Cards[i].Processes = slices.Clone(st.Cards[i].Processes)
		for j, p := range st.Cards[i].Processes {
			if a, ok := w.runner.Owner(p.PID); ok {
				st.Cards[i].Processes[j].Attempt = a
			}
		}
	}
	if total, avail, err := w.hostMemory(); err == nil {
		st.HostTotal, st.HostAvailable = total, avail
	}
	return st
}

// serveStream opens the stream the daemon asks for and serves the attempt on it.
func (w *worker) serveStream(ctx context.Context, client *api.Client, req api.StreamRequest) {
	dir, err := launcher.AttemptDir(w.attempts, req.Attempt.Job, req.Attempt.N)
	if err != nil {
		return
	}
	s, err := client.Stream(ctx, "/v1/worker/stream/"+req.Token)
	if err != nil {
		w.log.Printf("%s of %s: %v", req.Kind, req.Attempt.ID, err)
		return
	}
	api.ServeAttempt(ctx, s, dir, req)
}

// metrics are what its running attempts' trainers reported since the last state.
func (w *worker) metrics() map[string][]plans.Reading {
	var out map[string][]plans.Reading
	for id, ref := range w.running {
		if rs := w.runner.Metrics(&state.Attempt{ID: id, Job: ref.Job, N: ref.N}, false); len(rs) > 0 {
			if out == nil {
				out = map[string][]plans.Reading{}
			}
			out[id] = rs
		}
	}
	return out
}

// lastMetrics are what an ended attempt's trainer reported last.
func (w *worker) lastMetrics(id string) []plans.Reading {
	ref, ok := w.running[id]
	if !ok {
		return nil
	}
	return w.runner.Metrics(&state.Attempt{ID: id, Job: ref.Job, N: ref.N}, true)
}
