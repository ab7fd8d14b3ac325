package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gpuq/gpuq/launcher"
	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/daemon"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
)

type daemonOptions struct {
	io           ioStreams
	settings     *settings
	stop         bool
	stopTrainers bool
	detach       bool
	salvage      bool
	poll         time.Duration
	metrics      string
	jobMap       string
	listen       string
	workerGrace  time.Duration
}

func newDaemonCmd(io ioStreams, st *settings) *cobra.Command {
	opts := &daemonOptions{io: io, settings: st}
	cmd := &cobra.Command{
		Use:   "daemon",
		Short: "Run the scheduler for submitted sweeps, in the foreground or (-d) the background",
		Long: `Run gpuq's scheduler for the sweeps that gpuq submit sends it, until it is stopped.
It runs in the foreground, for systemd or a terminal; with -d it runs in the background,
in a session of its own, logging to daemon.log in the state directory, as the one gpuq
submit starts when none runs. examples/systemd/gpuq.service runs it as a systemd user
service (see the README).

Its state lives in the state directory (--state-dir, GPUQ_STATE_DIR, default
$XDG_STATE_HOME/gpuq): a journal of every change, each attempt's config and log under
attempts/, and the socket gpuq's other verbs talk to (mode 0600; only your user may
connect). Every trainer runs under a small supervisor process of its own, so trainers
keep running when the daemon stops or is killed; a daemon started again on the same
state directory takes them up and finishes the sweeps. One daemon per state directory.

The daemon owns the machine's cards: their plan, headroom and sharing target come from
--gpus, --gpu-plan, --headroom and --util-target (GPUQ_GPUS, GPUQ_GPU_PLAN,
GPUQ_HEADROOM, GPUQ_UTIL_TARGET, or the config file; else those of the last daemon on
the state directory); default every card, no slot limit, ` + plans.DefaultHeadroom.String() + ` headroom, jobs
sharing a card within all of its compute. Each sweep's own gpus and gpu_plan choose
among them and limit its jobs further; its headroom and util_target do not apply.

gpuq daemon --stop stops a running daemon and leaves its trainers running (those on
its workers until their lease lapses: see gpuq worker --help), its log says how many
where; with --stop-trainers it stops them too (their jobs end cancelled; queued jobs
stay queued): SIGTERM to each trainer, SIGKILL 10 s later. A supervisor that does not answer
(stopped with SIGSTOP, hung) is continued with SIGCONT 15 s after it was asked, and
killed with what is left of its attempt 15 s after that, so the stop always ends.
It waits, up to a minute, for the daemon it asked (named by its pid) to end; one
started meanwhile (by a gpuq submit that found it stopping) is named and left to run,
exit 0. With no daemon running there is nothing to stop: it says so and exits 0.

--metrics ADDR (GPUQ_METRICS, or metrics: in the config file) serves Prometheus metrics
on http://ADDR/metrics: jobs by state, attempts and OOMs by outcome and tier (counters
kept in the state: they never go down, gpuq clean included), each card's memory (a
metric each for total, used, reserved, learned, other), the queue's waits and the
scheduling rounds' latency. Nothing is served unless asked; anyone who can reach the
address can read them, so keep it to 127.0.0.1 or a private network. It holds 16
connections at once, closing more as they come.

--dcgm-job-map DIR (GPUQ_DCGM_JOB_MAP, dcgm_job_map: in the config file, or
dcgm-exporter's own DCGM_HPC_JOB_MAPPING_DIR) keeps dcgm-exporter's job-mapping files
there: one per GPU index, naming the gpuq jobs on that card, none for an idle card, so
that DCGM dashboards label each GPU's metrics hpc_job="<job>".

A record that a crash tore as it was written (the journal's last) is dropped with a
warning. Damage anywhere else, a journal shorter than the state's marker says it was
written, or a snapshot missing, older than the marker says or cut short stops the
daemon from starting, with the file and the record named; it changes nothing and keeps
a copy of the state in damaged/. Put back what was moved, or run gpuq daemon --salvage:
it rebuilds the state from every good record, takes from the attempts' directories
what the lost records said of attempts (so that no job that ran runs again), says what
it skipped, and exits; start the daemon again after it.

--listen ADDR also listens on the network for gpuq workers on other nodes (gpuq
worker) and for gpuq on other machines (--server): over TLS, with a certificate the
daemon makes, and only for those that show the secret it writes (0600) in its state
directory. A connection has 10 s to show the secret, and 64 at most may be waiting
to at once (more are closed as they come), so a flood of strangers takes no job's
descriptors. On a cluster's shared home the user's own jobs read both there. Its own
machine is then its first worker; --gpus none leaves it without cards (a login node).
A worker that goes away for --worker-grace has its running jobs run again elsewhere
at the same tier. Its trainers have stopped by then, so nothing runs twice: out of
touch with the daemon, the worker lets them run for a lease (the grace less their 10s
from SIGTERM to SIGKILL and a margin), then stops them, and kills them at once if it
wakes from a freeze past that. A grace too short for this is refused.`,
		Example: `  gpuq daemon --gpus 0,1,2,3,4,5,6 --gpu-plan 2,2,2,2,1,1,1
  gpuq daemon -d
  gpuq daemon --metrics 127.0.0.1:9469
  gpuq daemon --listen :7070 --gpus none
  gpuq daemon --stop`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.stop {
				return stopDaemon(opts)
			}
			if opts.detach {
				return detachDaemon(opts, cmd.Flags())
			}
			if opts.salvage {
				return salvage(opts)
			}
			if opts.stopTrainers {
				return badInput("--stop-trainers goes with --stop")
			}
			if err := daemon.CheckWorkerGrace(opts.workerGrace); err != nil {
				return badInput("%v", err)
			}
			cfg, err := opts.settings.daemonConfig(opts.io, opts.poll)
			if err != nil {
				return err
			}
			if cfg.Metrics = opts.metrics; cfg.Metrics == "" {
				cfg.Metrics = opts.settings.v.GetString(keyMetrics)
			}
			cfg.JobMapDir = cmp.Or(opts.jobMap, opts.settings.v.GetString(keyJobMap), os.Getenv("DCGM_HPC_JOB_MAPPING_DIR"))
			if cfg.Metrics != "" {
				if err := checkAddress("--metrics", cfg.Metrics, "127.0.0.1:9469", true); err != nil {
					return err
				}
			}
			if opts.listen != "" && opts.listen != daemon.ListenOff {
				// Bad input (exit 2), told before the daemon opens its state and cards,
				// as --metrics and --server are, not a listen that fails (exit 1).
				if err := checkAddress("--listen", opts.listen, ":7070", true); err != nil {
					return err
				}
			}
			cfg.Listen, cfg.WorkerGrace = opts.listen, opts.workerGrace
			if !cmd.Flags().Changed("worker-grace") {
				cfg.WorkerGrace = 0 // the last daemon's, with its --listen, else the default
			}
			return daemon.Run(context.Background(), cfg)
		},
	}
	cmd.Flags().BoolVar(&opts.stop, "stop", false, "stop the running daemon; its trainers keep running")
	cmd.Flags().BoolVar(&opts.stopTrainers, "stop-trainers", false, "with --stop: stop every running trainer too")
	cmd.Flags().BoolVarP(&opts.detach, "detach", "d", false, "run in the background (its log is daemon.log in the state directory) and return once it answers")
	cmd.Flags().BoolVar(&opts.salvage, "salvage", false, "rebuild a damaged state from every good record and the attempts' directories, report what was skipped, and exit")
	cmd.Flags().DurationVar(&opts.poll, "poll", time.Second, "how often the cards are sampled between events")
	cmd.Flags().StringVar(&opts.metrics, "metrics", "", "serve Prometheus metrics on this host:port (e.g. 127.0.0.1:9469); none by default")
	cmd.Flags().StringVar(&opts.jobMap, "dcgm-job-map", "", "keep dcgm-exporter's job-mapping files (a file per GPU naming its jobs) in this directory")
	cmd.Flags().StringVar(&opts.listen, "listen", "", "also listen at ADDR (host:port, :7070) for gpuq workers and remote gpuq, with TLS and the state directory's secret (default: where the last daemon on the state directory listened; off: nowhere)")
	cmd.Flags().DurationVar(&opts.workerGrace, "worker-grace", daemon.DefaultWorkerGrace, "how long a worker that went away may take to come back before its jobs run elsewhere")
	return cmd
}

func stopDaemon(opts *daemonOptions) error {
	c, err := opts.settings.dial()
	var none api.NoDaemonError
	if errors.As(err, &none) {
		// What --stop is for holds already: a script's cleanup need not ask first.
		fmt.Fprintf(opts.io.Err, "gpuq: no daemon runs on %s: nothing to stop\n", none.Dir)
		return nil
	}
	if err != nil {
		return err
	}
	pid, err := c.Stop(opts.stopTrainers)
	if err != nil {
		return err
	}
	// The daemon asked has ended, which is all a script's stop (systemd's ExecStop, an
	// upgrade's) asks; one that a gpuq submit started as it ended is said, not taken
	// for it.
	if c.Remote() {
		// Its state directory is not here to watch: it was asked, and answered.
		fmt.Fprintf(opts.io.Err, "gpuq: the daemon (pid %d) was asked to stop\n", pid)
		return nil
	}
	if other, held := api.Holder(c.Dir()); held && other != pid {
		fmt.Fprintf(opts.io.Err, "gpuq: the daemon (pid %d) has stopped; another, pid %d, started meanwhile on %s (a gpuq submit starts one where none runs): gpuq daemon --stop stops it\n",
			pid, other, c.Dir())
		return nil
	}
	fmt.Fprintf(opts.io.Err, "gpuq: the daemon (pid %d) has stopped\n", pid)
	return nil
}

// detachDaemon starts the daemon in the background, with this command line's flags
// but -d, as gpuq submit does when none runs, and returns once it answers.
func detachDaemon(opts *daemonOptions, flags *pflag.FlagSet) error {
	if opts.stopTrainers || opts.salvage {
		return badInput("-d starts a daemon; --stop-trainers and --salvage are for one that runs, or none")
	}
	dir, err := opts.settings.stateDir()
	if err != nil {
		return err
	}
	if c, err := opts.settings.dial(); err == nil {
		info, err := c.Info()
		if err != nil {
			return err
		}
		return fmt.Errorf("a gpuq daemon (pid %d) runs already on %s; gpuq daemon --stop stops it", info.PID, info.StateDir)
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	argv := []string{self, "daemon", "--state-dir", dir}
	flags.Visit(func(f *pflag.Flag) {
		if f.Name != "detach" && f.Name != "state-dir" {
			argv = append(argv, "--"+f.Name+"="+f.Value.String())
		}
	})
	c, pid, err := api.Start(dir, argv)
	if err != nil {
		return err
	}
	if pid == 0 {
		info, err := c.Info()
		if err != nil {
			return err
		}
		return fmt.Errorf("a gpuq daemon (pid %d), started at the same moment, runs on %s; gpuq daemon --stop stops it", info.PID, info.StateDir)
	}
	sayStarted(opts.io.Err, c, pid)
	return nil
}

func salvage(opts *daemonOptions) error {
	dir, err := opts.settings.stateDir()
	if err != nil {
		return err
	}
	got, err := daemon.Salvage(dir)
	if err != nil {
		return err
	}
	w := opts.io.Err
	fmt.Fprintf(w, "gpuq: salvaged the state in %s: %s kept, %d left out\n", dir, plans.Count(got.Records, "record"), len(got.Skipped))
	for _, s := range got.Skipped {
		fmt.Fprintf(w, "  left out: %s\n", s)
	}
	if len(got.Sweeps) > 0 {
		fmt.Fprintf(w, "  submitted again from their copies in sweeps/ (their records were lost): %s\n", strings.Join(got.Sweeps, " "))
	}
	for _, s := range got.Taken {
		fmt.Fprintf(w, "  from the attempts' directories: %s\n", s)
	}
	if len(got.Orphans) > 0 {
		fmt.Fprintf(w, "  attempts' directories of jobs of no sweep the state holds (the record of their sweep is lost; submit it again to run them): %s\n",
			orphansBySweep(got.Orphans))
	}
	if len(got.Recounted) > 0 {
		fmt.Fprintf(w, "  counts of attempts' ends whose records were lost, counted again from the attempts the state holds (gpuq_attempts_total): %s\n",
			strings.Join(got.Recounted, ", "))
	}
	fmt.Fprintf(w, "gpuq: the state as it was is kept in %s; start the daemon again (gpuq daemon, or gpuq submit)\n", got.Kept)
	return nil
}

// orphansBySweep says how many of the jobs (ids <sweep>.<n>) are of each sweep:
// "quick (3 jobs), big (1 job)".
func orphansBySweep(jobs []string) string {
	var sweeps []string
	n := map[string]int{}
	for _, j := range jobs {
		sw := j[:max(0, strings.LastIndexByte(j, '.'))]
		if n[sw]++; n[sw] == 1 {
			sweeps = append(sweeps, sw)
		}
	}
	parts := make([]string, len(sweeps))
	for i, sw := range sweeps {
		parts[i] = fmt.Sprintf("%s (%s)", sw, plans.Count(n[sw], "job"))
	}
	return strings.Join(parts, ", ")
}

// daemonConfig is the daemon's configuration from flags, GPUQ_* and the config file.
func (s *settings) daemonConfig(io ioStreams, poll time.Duration) (daemon.Config, error) {
	dir, err := s.stateDir()
	if err != nil {
		return daemon.Config{}, err
	}
	headroom, err := s.hostHeadroom()
	if err != nil {
		return daemon.Config{}, err
	}
	self, err := os.Executable()
	if err != nil {
		return daemon.Config{}, fmt.Errorf("cannot find gpuq's own binary for the supervisors: %w", err)
	}
	return daemon.Config{StateDir: dir, Machine: s.overrides(), Inventory: s.inventoryOptions(io),
		HostHeadroom: headroom, Poll: poll, Supervisor: launcher.SupervisorCommand(self, build), Self: self, Version: versionText(), Log: io.Err}, nil
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

// remote reports whether gpuq reaches its daemon over the network (--server): the
// daemon's files are then not here to read.
func (s *settings) remote() bool { return s.v.GetString(keyServer) != "" }

// dial connects to the daemon of the state directory: through its socket, or over the
// network with --server.
func (s *settings) dial() (*api.Client, error) {
	dir, err := s.stateDir()
	if err != nil {
		return nil, err
	}
	if s.remote() {
		server := s.v.GetString(keyServer)
		if err := checkAddress("--server", server, "login1:7070", false); err != nil {
			return nil, err
		}
		creds, err := api.LoadCredentials(dir)
		if err != nil {
			return nil, err
		}
		return api.DialRemote(server, creds)
	}
	c, err := api.Dial(dir)
	var none api.NoDaemonError
	if !errors.As(err, &none) {
		return c, err
	}
	if pid, stopping := api.Stopping(dir); stopping {
		return s.awaitEnd(dir, pid)
	}
	if pid, starting := api.Starting(dir); starting {
		return s.awaitStart(dir, pid)
	}
	return nil, s.noDaemon(dir)
}

// noDaemon is the error of a verb that found no daemon on dir: which one stopped there
// last, where one said so, whether the verb waited for it to end or came after; and
// what the verb needed one for (see daemonNeeds), and so how to go on.
func (s *settings) noDaemon(dir string) api.NoDaemonError {
	e := api.NoDaemonError{Dir: dir, Need: s.need}
	e.Stopped, e.At, _, _ = api.Stopped(dir)
	return e
}

// lastStopped reports the daemon that stopped last on the state directory, and when
// it began to (see api.Stopped), where it stopped as a restart stops it (a signal):
// none that gpuq daemon --stop stopped, which a person asked for, and none over the
// network, whose daemon's files are not here.
func (s *settings) lastStopped() (int, time.Time, bool) {
	dir, err := s.stateDir()
	if err != nil || s.remote() {
		return 0, time.Time{}, false
	}
	pid, at, asked, ok := api.Stopped(dir)
	return pid, at, ok && !asked
}

// daemonNeeds is what each verb that needs a daemon needs it for, said where none
// runs: starting one with gpuq daemon is then the way on (gpuq submit starts one too,
// but is no way to hold a job).
var daemonNeeds = map[string]string{
	string(api.Hold):    "to hold jobs",
	string(api.Release): "to release jobs",
	string(api.Cancel):  "to cancel jobs",
	string(api.Retry):   "to retry jobs",
	"drain":             "to drain a card",
	"undrain":           "to undrain a card",
	"why":               "to say why a job waits",
	"update":            "to change a sweep",
	"attach":            "to attach to a job",
	"wait":              "to run the jobs waited for",
	"clean":             "to clean sweeps",
	"top":               "to watch jobs",
}

// startLimit is how long a verb waits for a daemon that has taken its state directory
// to answer: it reads its state first (about a second at 100,000 jobs); and for one
// that stops to end (its trainers take up to half a minute, see gpuq daemon --help).
const startLimit = 2 * time.Minute

// awaitStart waits for the daemon pid, which holds the state directory's lock, to
// answer: until then, a verb would read its state as a daemon that does not run left
// it, or say that none runs.
func (s *settings) awaitStart(dir string, pid int) (*api.Client, error) {
	fmt.Fprintf(s.notices, "gpuq: the daemon (pid %d) is starting; waiting for it to answer\n", pid)
	for deadline := time.Now().Add(startLimit); ; {
		if err := s.pause(); err != nil {
			return nil, fmt.Errorf("stopped waiting for the daemon (pid %d) to answer: %w", pid, err)
		}
		c, err := api.Dial(dir)
		var none api.NoDaemonError
		if !errors.As(err, &none) {
			return c, err
		}
		if pid, stopping := api.Stopping(dir); stopping { // it answered, and was stopped, between two tries
			return s.awaitEnd(dir, pid)
		}
		if _, starting := api.Starting(dir); !starting {
			return nil, fmt.Errorf("%w (the daemon, pid %d, that was starting has ended: %s, or the terminal it ran in, says why)", s.noDaemon(dir), pid, api.LogPath(dir))
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the gpuq daemon (pid %d) on %s has not answered in %s: it may be stuck; kill %d stops it", pid, dir, startLimit, pid)
		}
	}
}

// awaitEnd waits for the daemon pid, which stops and no longer answers, to end: until
// then it stops its trainers (where asked) and writes the last of its state, which a
// verb would read half written, or a daemon started meanwhile find held. Then the verb
// goes on as where none runs, or with the one started meanwhile.
func (s *settings) awaitEnd(dir string, pid int) (*api.Client, error) {
	fmt.Fprintf(s.notices, "gpuq: the daemon (pid %d) is stopping; waiting for it to end\n", pid)
	for deadline := time.Now().Add(startLimit); ; {
		if err := s.pause(); err != nil {
			return nil, fmt.Errorf("stopped waiting for the daemon (pid %d) to end: %w", pid, err)
		}
		if _, stopping := api.Stopping(dir); !stopping {
			return s.dial()
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the gpuq daemon (pid %d) on %s has been stopping for %s: it may be stuck; kill %d ends it", pid, dir, startLimit, pid)
		}
	}
}

// pause waits between two looks at a daemon that starts or stops, unless the verb's
// context (see bind) ends first: then it returns why. A verb that takes Ctrl-C itself
// (gpuq logs -f, to give the terminal back) would otherwise not hear it for as long as
// the daemon takes, up to startLimit each.
func (s *settings) pause() error { return s.pauseFor(awaitPoll) }

// pauseFor is pause for a wait that looks again every d: one that looks at more than a
// daemon's socket (a gpuq run that starts: the runs' directory, the processes) looks
// less often, and hears Ctrl-C as soon all the same.
func (s *settings) pauseFor(d time.Duration) error {
	ctx := s.ctx
	if ctx == nil {
		time.Sleep(d)
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}

// awaitPoll is how often a verb looks again at a daemon that starts or stops.
const awaitPoll = 20 * time.Millisecond

// bind makes ctx the verb's context, which ends its waits for a daemon that starts or
// stops (see pause), until the function it returns is called.
func (s *settings) bind(ctx context.Context) (unbind func()) {
	s.ctx = ctx
	return func() { s.ctx = nil }
}
