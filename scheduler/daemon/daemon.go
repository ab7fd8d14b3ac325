// Package daemon is gpuq's daemon: the engine over a journaled state directory, each
// attempt under a supervisor of its own, and the API that gpuq's other verbs use, over
// a unix socket only its own user may connect to. The API's wire types and its client
// are package api's, which the clients import without this package.
//
// A daemon's lifecycle is one group of actors (the engine's loop, the API servers, the
// allocator, the cluster's clock, the metrics, and a watcher of signals and stop
// requests): the first to return stops the others.
package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gpuq/gpuq/launcher"
	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler"
	"github.com/gpuq/gpuq/scheduler/alloc"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/gpu/nvidia"
	"github.com/gpuq/gpuq/scheduler/runner"
	"github.com/gpuq/gpuq/scheduler/state"
)

// Config is what a daemon runs with. The CLI fills it from flags, GPUQ_* variables and
// the user's config file.
type Config struct {
	// StateDir holds the journal, the attempts and the socket.
	StateDir string
	// Machine is the daemon's cards, plan and headroom as given, each with where it
	// came from (for errors); what is not given takes its default: every card, no slot
	// limit, plans.DefaultHeadroom.
	Machine plans.Overrides
	// Inventory opens the cards; its Ledger is also the simulated trainers'.
	Inventory nvidia.Options
	// HostHeadroom is the host RAM kept for the system (host_reserve).
	HostHeadroom plans.Headroom
	// Poll is how often the cards are sampled between events.
	Poll time.Duration
	// Supervisor is the command that starts an attempt's supervisor (see
	// launcher.SupervisorCommand).
	Supervisor []string
	// Self is gpuq's own binary, which a Slurm allocation's nodes run as workers (see
	// workerCommand): not Supervisor's, which may be gpuq-supervisor, which knows no
	// verbs.
	Self string
	// Version is gpuq's, for the log and the API.
	Version string
	// Log receives the daemon's events and warnings.
	Log io.Writer
	// Metrics is the address (host:port) to serve Prometheus metrics on; "" serves none.
	Metrics string
	// JobMapDir is where dcgm-exporter's job-mapping files are kept (a file per card
	// naming its jobs); "" writes none.
	JobMapDir string
	// Listen, if set, is the address of the network listener for gpuq workers and
	// remote clients (TLS, with the secret; see remote.go). Without it the daemon runs
	// on its own machine alone.
	Listen string
	// WorkerGrace is how long a worker that went away may take to come back before its
	// attempts run again elsewhere (default DefaultWorkerGrace).
	WorkerGrace time.Duration
}

// DefaultWorkerGrace is how long a daemon waits for a worker that went away. A worker's
// trainers stop sooner, by their time to stop and a margin (see fence.go), so it also
// bounds how long a daemon restart may take without stopping the workers' trainers.
const DefaultWorkerGrace = 2 * time.Minute

// daemon is a running gpuq daemon: the engine over a journaled store, and the API.
type daemon struct {
	cfg     Config
	store   *state.Store
	eng     *scheduler.Engine
	machine *machine
	// cluster is its machine and its workers, with a network listener; nil without.
	cluster *cluster
	// listen is the network listener's address; "" without one.
	listen string
	alloc  *alloc.Allocator
	// attempts is where the attempts live (see launcher.AttemptDir).
	attempts string
	started  time.Time
	log      *runner.EventLog
	// recent are the latest events, for gpuq top.
	recent recentEvents
	hooks  *runner.Hooks
	// metrics is nil unless the daemon serves them; jobMap unless it writes one.
	metrics *metrics
	jobMap  *jobMap
	// jobMapErr is the job map's last failure, said once.
	jobMapErr string
	// sweeps and adopted are how many sweeps were replayed and attempts taken up.
	sweeps, adopted int
	// stopTrainers says whether the engine stops the trainers as it stops.
	stopTrainers atomic.Bool
	// stop asks the daemon to stop (a shutdown request); stopOnce guards it.
	stop     chan struct{}
	stopOnce sync.Once
	// givingBack is set while memory is given back to the system (see giveBack), which
	// background waits for.
	givingBack atomic.Bool
	background sync.WaitGroup
	// run is the gpuq run in the foreground it serves the API of (see Foreground);
	// nil for a daemon.
	run *api.Run
}

// Run runs a daemon on cfg.StateDir until ctx is cancelled, a SIGINT or SIGTERM
// arrives, or a client asks it to stop. Trainers run on after it, under their
// supervisors, unless that client asked for them to be stopped too.
func Run(ctx context.Context, cfg Config) error {
	keepHeapSmall()
	var err error
	if cfg.StateDir, err = api.MakeStateDir(cfg.StateDir); err != nil {
		return err
	}
	lock, err := api.LockState(cfg.StateDir)
	if err != nil {
		return err
	}
	defer lock.Close()
	lock.Truncate(0)
	fmt.Fprintf(lock, "%d\n", os.Getpid())
	cfg, recalledNet, err := recallNet(cfg)
	if err != nil {
		return err
	}
	d, err := open(cfg)
	if err != nil {
		return err
	}
	d.machine.recalled = append(d.machine.recalled, recalledNet...)
	defer d.close()
	// What this start opens is closed where it fails before it serves; serve closes
	// it once it runs.
	var opened []io.Closer
	served := false
	defer func() {
		if !served {
			for _, l := range opened {
				l.Close()
			}
		}
	}()
	ln, err := listen(cfg.StateDir)
	if err != nil {
		return err
	}
	opened = append(opened, ln)
	var tcp *remoteListener
	var bound net.Addr // where it listens for workers
	if cfg.Listen != "" {
		if tcp, err = listenRemote(cfg.StateDir, cfg.Listen); err != nil {
			if len(recalledNet) > 0 {
				err = fmt.Errorf("%w (the last daemon's --listen: give --listen ADDR for another, or --listen off for none)", err)
			}
			return err
		}
		opened = append(opened, tcp)
		defer os.Remove(filepath.Join(cfg.StateDir, api.ListenFile))
		bound, d.listen = tcp.Addr(), tcp.Addr().String()
		tcp.gate.refused = warnFull(d.log, fmt.Sprintf("--listen %s: %d connections have not shown the secret yet", d.listen, remoteStrangers))
	}
	var metricsLn net.Listener
	if cfg.Metrics != "" {
		g, err := listenMetrics(cfg.Metrics)
		if err != nil {
			return err
		}
		opened = append(opened, g)
		g.refused = warnFull(d.log, fmt.Sprintf("--metrics %s: %d connections are open", g.Addr(), metricsConns))
		metricsLn = g
		d.log.Printf("serving Prometheus metrics on http://%s/metrics", metricsLn.Addr())
	}
	if err := remember(cfg.StateDir, d.machine, cfg.Listen, bound, cmp.Or(cfg.WorkerGrace, DefaultWorkerGrace)); err != nil {
		return err
	}
	known := len(d.store.View().Jobs())
	d.log.Printf("gpuq daemon %s (pid %d) on %s; %s, %s known, %s taken up; state in %s",
		cfg.Version, os.Getpid(), d.machine.cardsText(), plans.Count(d.sweeps, "sweep"),
		plans.Count(known, "job"), plans.Count(d.adopted, "attempt"), cfg.StateDir)
	if r := d.machine.recalled; len(r) > 0 {
		d.log.Printf("as the last daemon on %s: %s (give --gpus, --gpu-plan, --headroom, --util-target or --listen for others; --listen off listens nowhere)",
			cfg.StateDir, strings.Join(r, ", "))
	}
	if tcp != nil {
		d.log.Printf("listening on %s for gpuq workers and remote clients (TLS; they need %s and %s from %s); a worker away for %s has its attempts run elsewhere",
			tcp.Addr(), api.SecretFile, api.CertFile, cfg.StateDir, d.cluster.fence.grace)
	}
	served = true
	err = d.serve(ctx, &http.Server{Handler: d.routes(), ReadHeaderTimeout: 10 * time.Second}, ln, metricsLn, tcp)
	d.hooks.Wait()
	if cerr := d.store.Compact(); cerr != nil {
		d.log.Printf("warning: %v", cerr)
	}
	if err != nil {
		return err
	}
	var lease time.Duration // unknown: no listener, so none given this time
	if d.cluster != nil {
		lease = d.cluster.fence.lease
	}
	d.log.Printf("gpuq daemon stopped; %s", leftRunning(d.store.View().Running(), lease))
	return nil
}

// leftRunning says, as the daemon stops, the trainers it leaves running (none after
// --stop-trainers) and where, for what becomes of them differs. Its own run on under
// their supervisors for as long as they take, and a daemon started again takes them
// up. A worker's run on its node, under the lease its last beat the daemon answered
// gave it: a daemon started again before that lapses (listening where this one did, as
// it does unless told otherwise) links the worker again and takes them up; past it,
// the worker stops them, and their jobs run again once a daemon is back. lease is the
// workers' lease, 0 where this daemon gave none (it did not listen).
func leftRunning(running []*state.Attempt, lease time.Duration) string {
	own := 0
	onWorker := map[string]int{}
	for _, a := range running {
		if a.Worker == "" {
			own++
		} else {
			onWorker[a.Worker]++
		}
	}
	const takenUp = "a daemon started again takes them up"
	under := "under their supervisors"
	if own == 1 {
		under = "under its supervisor"
	}
	switch {
	case own == 0 && len(onWorker) == 0:
		return "0 trainers left running"
	case len(onWorker) == 0:
		return plans.Count(own, "trainer") + " left running " + under + " (" + takenUp + ")"
	}
	// The workers' trainers, the first counted in trainers where it comes first.
	var where []string
	for _, w := range slices.Sorted(maps.Keys(onWorker)) {
		n := strconv.Itoa(onWorker[w])
		if len(where) == 0 {
			n = plans.Count(onWorker[w], "trainer")
		}
		where = append(where, n+" on worker "+w)
	}
	until := "until its lease lapses"
	if len(onWorker) > 1 {
		until = "each until its worker's lease lapses"
	}
	if lease > 0 {
		until += fmt.Sprintf(" (%s after the last beat the daemon answered)", lease)
	}
	workers := strings.Join(where, ", ") + ", " + until + ": a daemon started again by then takes them up; past it, the worker stops them, and their jobs run again once a daemon is back"
	if own == 0 {
		n, rest, _ := strings.Cut(workers, " on worker ")
		return n + " left running on worker " + rest
	}
	return "left running: " + plans.Count(own, "trainer") + " on this machine " + under + " (" + takenUp + "); " + workers
}

// open rebuilds the state, opens the machine and takes up the attempts that ran on.
func open(cfg Config) (*daemon, error) {
	d := &daemon{cfg: cfg, started: time.Now(), log: runner.NewEventLog(cfg.Log), stop: make(chan struct{})}
	if err := stateLost(cfg.StateDir); err != nil {
		return nil, err
	}
	store, err := state.OpenState(cfg.StateDir, func(w string) { d.log.Printf("warning: %s", w) })
	if err != nil {
		return nil, err
	}
	d.store = store
	// A state from before attempts' ends were tallied counts on from the history it
	// holds.
	if t := store.View().Recount(); t != nil {
		if err := store.Put(state.Change{Tallies: t}); err != nil {
			store.Close()
			return nil, err
		}
	}
	if d.machine, err = openMachine(cfg); err != nil {
		store.Close()
		return nil, err
	}
	launcher.BecomeSubreaper()
	ro := runner.Options{Dir: attemptsIn(cfg.StateDir)}
	d.attempts = ro.Dir
	if d.machine.simulated() != "" {
		ro.Ledger = cfg.Inventory.Ledger
	}
	d.hooks = runner.NewHooks(store, api.GPUsOf(d.machine.cards), cfg.StateDir, func(line string) { d.log.Printf("warning: %s", line) })
	ec := scheduler.Config{Slots: d.machine.slots, Headroom: d.machine.headroom, UtilTarget: d.machine.utilTarget, Poll: cfg.Poll,
		Host: launcher.HostMemory, HostHeadroom: cfg.HostHeadroom}
	if cfg.Metrics != "" {
		d.metrics = newMetrics(d)
		ec.Rounds = func(took time.Duration) { d.metrics.rounds.Observe(took.Seconds()) }
	}
	local := runner.NewSupervised(ro, cfg.Supervisor)
	ec.Trainer = local.Trainer
	var inv scheduler.Inventory = d.machine.inv
	var run scheduler.Runner = local
	if cfg.Listen != "" {
		grace := cfg.WorkerGrace
		if grace <= 0 {
			grace = DefaultWorkerGrace
		}
		f, err := newFence(grace, launcher.GroupGrace)
		if err != nil {
			d.close()
			return nil, err
		}
		d.cluster = newCluster(d.machine, local, f, d.log, cfg.StateDir, cfg.Version)
		inv, run = d.cluster, d.cluster
	}
	d.eng = scheduler.NewEngine(store, inv, run, scheduler.RealClock{}, ec, d.event)
	subs := store.View().Submissions()
	for _, sub := range subs {
		if err := d.resume(sub); err != nil {
			d.close()
			return nil, err
		}
	}
	d.sweeps = len(subs)
	if d.adopted, err = d.eng.Adopt(); err != nil {
		d.close()
		return nil, err
	}
	if d.cluster != nil {
		d.cluster.remember(lostWithWorkers(store.View()))
	}
	if cfg.JobMapDir != "" {
		var idx []int
		for _, c := range d.machine.cards {
			idx = append(idx, c.Index)
		}
		if d.jobMap, err = newJobMap(cfg.JobMapDir, idx); err != nil {
			d.close()
			return nil, err
		}
		d.mapJobs()
	}
	d.alloc = d.newAllocator()
	return d, nil
}

// resume checks a replayed submission against this machine. Its limit names the cards
// its jobs may use: on a machine without some of them, it says so rather than let them
// take other cards.
func (d *daemon) resume(sub *state.Submission) error {
	name := sub.Sweep.Name
	if d.cluster != nil {
		if sub.Limit == nil {
			return d.store.DeriveLimit(name, state.AdmitAnywhere(sub.Sweep))
		}
		return nil // a cluster's cards come and go
	}
	if sub.Limit == nil {
		// Journaled before submissions kept their limit.
		l, err := scheduler.Admit(sub.Sweep, d.machine.cards)
		if err != nil {
			d.log.Printf("warning: sweep %s: %v; its jobs may use every card", name, err)
			return nil
		}
		return d.store.DeriveLimit(name, l)
	}
	if missing := d.machine.missing(sub.Limit); len(missing) > 0 {
		d.log.Printf("warning: sweep %s was admitted on GPUs this daemon does not have (%v; it schedules on %s): "+
			"its jobs run only on the others; gpuq daemon --stop, then gpuq daemon --gpus with its machine, runs them everywhere",
			name, missing, d.machine)
	}
	return nil
}

func (d *daemon) close() {
	d.background.Wait()
	if d.machine.inv != nil {
		d.machine.inv.Close()
	}
	d.store.Close()
}

// admit checks a sweep against the daemon's machine and returns its limit there, with
// what of the sweep does not apply. On a cluster, whose cards come and go, only the
// sweep's plan is kept (see scheduler.AdmitAnywhere).
func (d *daemon) admit(sw *plans.Sweep) (state.Limit, []string, error) {
	var warnings []string
	if sw.HeadroomSet && sw.Headroom != d.machine.headroom {
		warnings = append(warnings, fmt.Sprintf("%s: headroom %s does not apply: the daemon keeps %s free on every card "+
			"for every sweep (gpuq daemon --headroom)", sw.File, sw.Headroom, d.machine.headroom))
	}
	if sw.UtilTarget != 0 && !plans.SameUtilTarget(sw.UtilTarget, d.machine.utilTarget) {
		warnings = append(warnings, fmt.Sprintf("%s: util_target %s does not apply: the daemon shares every card within %s "+
			"for every sweep (gpuq daemon --util-target)", sw.File, plans.UtilTargetText(sw.UtilTarget), plans.UtilTargetText(d.machine.utilTarget)))
	}
	if d.cluster != nil {
		if sw.GPUs.IsSimulated() {
			warnings = append(warnings, fmt.Sprintf("%s: gpus %s does not apply: the daemon runs it on its workers' cards", sw.File, sw.GPUs))
		}
		return state.AdmitAnywhere(sw), warnings, nil
	}
	if err := d.machine.serves(sw, d.cfg.StateDir); err != nil {
		return nil, nil, err
	}
	limit, err := scheduler.Admit(sw, d.machine.cards)
	if err != nil {
		return nil, nil, err
	}
	if w := d.machine.plan().Capped(sw, limit); w != "" {
		warnings = append(warnings, w)
	}
	return limit, warnings, nil
}

// serve runs the daemon's actors until one of them ends: the engine's loop, the API
// (with a network listener, there too, and the cluster's clock), the metrics (when
// metricsLn is set), and the watcher of ctx, signals and stop requests.
func (d *daemon) serve(ctx context.Context, srv *http.Server, ln *listener, metricsLn net.Listener, tcp *remoteListener) error {
	engCtx, stopEngine := context.WithCancel(context.Background())
	defer stopEngine()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	quit := make(chan struct{})
	var g group
	engineDone := make(chan struct{}) // closed once the engine's loop has returned
	g.add(func() error {
		defer close(engineDone)
		return d.eng.Serve(engCtx, d.stopTrainers.Load)
	}, stopEngine)
	g.add(func() error {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("API: %w", err)
		}
		return nil
	}, func() {
		// Said before the socket goes: a client that finds no socket while the lock is
		// held then waits for the daemon to end (its trainers stopped, its state
		// written), not to answer, as it would for one starting.
		asked := false // by gpuq daemon --stop (see requestStop), not a signal
		select {
		case <-d.stop:
			asked = true
		default:
		}
		if err := api.MarkStopping(d.cfg.StateDir, os.Getpid(), asked); err != nil {
			d.log.Printf("warning: %v: a client may take the daemon, as it stops, for one starting", err)
		}
		sctx, done := context.WithTimeout(context.Background(), 5*time.Second)
		defer done()
		srv.Shutdown(sctx)
	})
	if tcp != nil {
		d.serveRemote(&g, tcp)
		// Allocations start workers, which need the listener.
		allocCtx, stopAlloc := context.WithCancel(context.Background())
		g.add(func() error {
			if err := d.alloc.Serve(allocCtx); !errors.Is(err, context.Canceled) {
				return fmt.Errorf("allocations: %w", err)
			}
			return nil
		}, stopAlloc)
		// The cluster's clock, and the ends of the local attempts passed on as the
		// cluster's, go on until the engine's loop has returned, not only been asked to:
		// it still hears of its trainers (on workers too) as it stops them.
		g.add(func() error { d.cluster.run(engineDone); return nil }, func() {})
		g.add(func() error { d.cluster.forward(engineDone); return nil }, func() {})
	}
	if metricsLn != nil {
		msrv := tcpServer(d.metrics.handler())
		g.add(func() error { return serveMetrics(msrv, metricsLn) }, func() { msrv.Close() })
	}
	g.add(func() error {
		select {
		case s := <-sigs:
			d.log.Printf("%v: stopping", s)
		case <-ctx.Done():
		case <-d.stop:
		case <-quit:
		}
		return nil
	}, func() { close(quit) })
	err := g.run()
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// requestStop asks the daemon to stop, as SIGTERM does.
func (d *daemon) requestStop(stopTrainers bool) {
	d.stopTrainers.Store(stopTrainers)
	d.stopOnce.Do(func() { close(d.stop) })
}

// group is a set of actors, each a function that runs until it is done or interrupted
// (after oklog/run): the first to return interrupts the rest, and run returns its error
// once every actor has returned.
type group struct{ actors []actor }

type actor struct {
	execute   func() error
	interrupt func()
}

func (g *group) add(execute func() error, interrupt func()) {
	g.actors = append(g.actors, actor{execute, interrupt})
}

func (g *group) run() error {
	errs := make(chan error, len(g.actors))
	for _, a := range g.actors {
		go func() { errs <- a.execute() }()
	}
	err := <-errs
	for _, a := range g.actors {
		a.interrupt()
	}
	for range len(g.actors) - 1 {
		if e := <-errs; err == nil {
			err = e
		}
	}
	return err
}

// Salvage rebuilds the damaged state of a directory (see state.Salvage) under its
// lock, so that no daemon starts on it meanwhile, from its good records and what its
// attempts' directories show.
func Salvage(dir string) (state.Salvaged, error) {
	dir, err := api.MakeStateDir(dir)
	if err != nil {
		return state.Salvaged{}, err
	}
	lock, err := api.LockState(dir)
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

// logEvent logs one of the engine's events.
func logEvent(l *runner.EventLog, ev scheduler.Event) {
	l.Printf("%s", ev.Text())
}

// event is the engine's news: logged, kept for gpuq top, told to the sweep's hooks.
func (d *daemon) event(ev scheduler.Event) {
	logEvent(d.log, ev)
	d.recent.add(ev)
	d.hooks.Event(ev)
	if d.metrics != nil {
		d.metrics.event(ev)
	}
	d.mapJobs()
}

// mapJobs keeps dcgm-exporter's job map, if the daemon writes one, true to the
// running attempts; a failure is said once, not at every event.
func (d *daemon) mapJobs() {
	if d.jobMap == nil {
		return
	}
	err := d.jobMap.update(d.store.View())
	switch {
	case err == nil:
		d.jobMapErr = ""
	case err.Error() != d.jobMapErr:
		d.jobMapErr = err.Error()
		d.log.Printf("warning: %v", err)
	}
}
