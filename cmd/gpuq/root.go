package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"

	"github.com/gpuq/gpuq/launcher"
	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/gpu/nvidia"
)

func run(args []string, io ioStreams) int {
	if len(args) == 2 && args[0] == launcher.SupervisorMode {
		// Started by a daemon to hold one attempt; not a verb for people.
		if err := launcher.Supervise(args[1]); err != nil {
			fmt.Fprintln(io.Err, "gpuq supervisor:", err)
			return exitFailed
		}
		return exitOK
	}
	if len(args) == 2 && args[0] == launcher.ReaperMode {
		// Started by gpuq run to stop what its attempts leave if it is killed.
		if err := launcher.Reap(args[1]); err != nil {
			fmt.Fprintln(io.Err, "gpuq reaper:", err)
			return exitFailed
		}
		return exitOK
	}
	root, st := newRoot(io)
	root.SetArgs(args)
	err := root.Execute()
	var q quiet
	if err != nil && !errors.As(err, &q) {
		// A job or sweep that gpuq clean forgot is said to be so alone: the refusal
		// would call it unknown, and guess at another name ("did you mean"), where
		// the researcher named one that was there.
		cleaned := st.whereCleaned(err)
		if cleaned == "" {
			fmt.Fprintln(io.Err, "gpuq:", err)
		}
		for _, where := range []string{st.whereLeft(err), cleaned} {
			if where != "" {
				fmt.Fprintln(io.Err, "gpuq:", where)
			}
		}
	}
	return exitCode(err)
}

func newRootCmd(io ioStreams) *cobra.Command {
	root, _ := newRoot(io)
	return root
}

// newRoot is gpuq's command, and the settings its verbs read.
func newRoot(io ioStreams) (*cobra.Command, *settings) {
	st := &settings{v: viper.New(), notices: io.Err}
	root := &cobra.Command{
		Use:   "gpuq",
		Short: "Pack GPU training sweeps onto a machine's cards and see them through OOMs",
		Long: `gpuq expands a sweep file into jobs, packs them onto the machine's GPUs by memory
estimate and a per-card concurrency plan (such as 2,2,2,2,1,1,1), launches each trainer
in a pseudo-terminal with the right environment, and requeues a job that runs out of GPU
memory with a degraded config that keeps the effective batch.

A job runs within its sweep's gpus and gpu_plan (flags given with the sweep, then its
file) and the machine's (gpuq daemon's flags, GPUQ_GPUS and GPUQ_GPU_PLAN, then the user
config file $XDG_CONFIG_HOME/gpuq/config.yaml; default every card, no slot limit), alike
under plan, run and the daemon; where the machine's plan hides the sweep's, gpuq says
so. Headroom: flags, GPUQ_HEADROOM, the config file, then the sweep file.

With no NVIDIA driver, gpuq simulates a machine (` + plans.DefaultSimulated + `) and says so.

Exit status: 0 success; 1 something failed, or no daemon answers (for a job that
exists, or where its state cannot be read); 2 bad input (a sweep, flag or config file)
or a request the daemon refuses (an unknown job or sweep, with or without a daemon;
attach or logs of a job that has not started); 130 interrupted; 141, for logs and
attach, what reads their output has gone (gpuq logs -f ID | head), as for tail -f.
These answer and exit 0: why of a job that does not wait, a --sweep to which no job
applies (retry of a sweep with no failed job), daemon --stop when no daemon runs.`,
		Version:       versionText(),
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			st.need = daemonNeeds[cmd.Name()]
			return st.load(cmd.Flags())
		},
		// A word that is no command is bad input (exit 2), not a reason to print help.
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return unknownCommand(cmd, args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	root.SetIn(io.In)
	root.SetOut(io.Out)
	root.SetErr(io.Err)
	root.SetHelpTemplate(helpTemplate)
	root.SetUsageTemplate(usageTemplate)
	root.SetFlagErrorFunc(flagError)
	f := root.PersistentFlags()
	f.String("gpus", "", `cards to use: indices as nvidia-smi numbers them ("0,1,2"), "all", or a simulated machine ("sim:7x23.52GiB")`)
	f.String("gpu-plan", "", `most jobs per card, in the order of --gpus ("2,2,2,2,1,1,1"), or one count for every card`)
	f.String("headroom", "", `memory kept free on every card: a share ("10%") or a size ("1GiB"); default `+plans.DefaultHeadroom.String())
	f.String("order", "", `order of jobs within a priority: "big-first" (largest memory × duration first; the default) or "fifo"`)
	f.String("util-target", "", `how much of a card's compute jobs sharing it may ask for together, by their measured utilizations: 1 (the whole card; the default), 0.8, 150%; or "off" (memory and slots alone decide)`)
	f.String("config", "", "user config file (default $XDG_CONFIG_HOME/gpuq/config.yaml)")
	f.String("state-dir", "", "the daemon's state directory (default $XDG_STATE_HOME/gpuq)")
	f.String("server", "", "reach the daemon over the network at HOST:PORT (gpuq daemon --listen), from a worker or another machine; "+
		"its secret and certificate are read from the state directory")
	root.AddGroup(&cobra.Group{ID: groupSweep, Title: "Sweeps in the foreground:"},
		&cobra.Group{ID: groupDaemon, Title: "The daemon and its jobs:"})
	root.SetHelpCommand(newHelpCmd(root))
	root.AddCommand(newCompletionCmd(io), newVersionCmd(io))
	for _, c := range []*cobra.Command{newRunCmd(io, st), newPlanCmd(io, st), newGPUsCmd(io, st), newSimulateCmd(io, st), newEstimateCmd(io, st), newReportCmd(io, st), newResultsCmd(io, st)} {
		c.GroupID = groupSweep
		root.AddCommand(c)
	}
	for _, c := range append([]*cobra.Command{newDaemonCmd(io, st), newWorkerCmd(io, st), newSubmitCmd(io, st), newUpdateCmd(io, st), newAttachCmd(io, st), newTopCmd(io, st), newWaitCmd(io, st), newCleanCmd(io, st), newAllocCmd(io, st)}, newJobCmds(io, st)...) {
		c.GroupID = groupDaemon
		root.AddCommand(c)
	}
	completeFlags(root, st)
	return root, st
}

// Command groups in the help.
const (
	groupSweep  = "sweep"
	groupDaemon = "daemon"
)

// settings are the machine-level settings, layered by viper.
type settings struct {
	v     *viper.Viper
	flags *pflag.FlagSet
	// notices is where what gpuq tells besides a verb's output goes (stderr), and
	// offlineNote says once that no daemon runs (see readClient).
	notices     io.Writer
	offlineNote sync.Once
	// file is what the user config file says, each setting as its flag takes it.
	file map[string]any
	// ctx is the verb's context, where it has one of its own (see bind); nil otherwise.
	ctx context.Context
	// need is what the verb needs a daemon for (see daemonNeeds); "" for one that
	// needs none, or reads the state where none runs.
	need string
}

// Keys of the machine settings, as written in the user config file.
const (
	keyGPUs     = "gpus"
	keyPlan     = "gpu_plan"
	keyHeadroom = "headroom"
	keyOrder    = "order"
	// keyUtilTarget is the sharing target (--util-target, GPUQ_UTIL_TARGET).
	keyUtilTarget = "util_target"
	keyLedger     = "sim_ledger"
	// keyStateDir is the daemon's state directory (--state-dir, GPUQ_STATE_DIR).
	keyStateDir = "state_dir"
	// keyServer is a daemon's network listener to reach it by (--server, GPUQ_SERVER).
	keyServer = "server"
	// keyHostReserve is the host RAM gpuq leaves to the system when it packs jobs by
	// host memory (GPUQ_HOST_RESERVE, or host_reserve in the config file).
	keyHostReserve = "host_reserve"
	// keyMetrics is where the daemon serves Prometheus metrics (gpuq daemon --metrics,
	// GPUQ_METRICS); none when unset.
	keyMetrics = "metrics"
	// keyJobMap is where the daemon keeps dcgm-exporter's job-mapping files
	// (--dcgm-job-map, GPUQ_DCGM_JOB_MAP); none when unset.
	keyJobMap = "dcgm_job_map"
)

// defaultHostHeadroom leaves a tenth of the RAM to the system, the page cache and
// everything that is not a trainer.
var defaultHostHeadroom = plans.Headroom{Percent: 10}

// hostHeadroom is the host RAM kept for the system (host_reserve).
func (s *settings) hostHeadroom() (plans.Headroom, error) {
	o := s.override(keyHostReserve, "")
	if o.Value == "" {
		return defaultHostHeadroom, nil
	}
	h, err := plans.ParseHeadroom(o.Value)
	if err != nil {
		return h, badInput("%s: %v", o.Source, err)
	}
	return h, nil
}

func (s *settings) load(flags *pflag.FlagSet) error {
	s.flags = flags
	s.v.SetEnvPrefix("GPUQ")
	s.v.AutomaticEnv()
	for key, flag := range map[string]string{keyGPUs: "gpus", keyPlan: "gpu-plan", keyHeadroom: "headroom", keyOrder: "order",
		keyUtilTarget: "util-target", keyStateDir: "state-dir", keyServer: "server"} {
		if err := s.v.BindPFlag(key, flags.Lookup(flag)); err != nil {
			return err
		}
	}
	path, _ := flags.GetString("config")
	if path == "" {
		path = os.Getenv("GPUQ_CONFIG")
	}
	explicit := path != ""
	if !explicit {
		path = filepath.Join(xdgDir("XDG_CONFIG_HOME", ".config"), "gpuq", "config.yaml")
	}
	s.v.SetConfigFile(path)
	cfg, err := readConfigFile(path)
	var probs plans.Problems
	switch {
	case errors.As(err, &probs):
		return err
	case err != nil:
		if _, statErr := os.Stat(path); statErr == nil || explicit {
			return badInput("config file %s: %v", path, err)
		}
		return nil
	}
	s.file = cfg
	return s.v.MergeConfigMap(cfg)
}

// override returns the layered value of key and names where it came from.
func (s *settings) override(key, flag string) plans.Override {
	val := strings.TrimSpace(s.v.GetString(key))
	if val == "" {
		return plans.Override{}
	}
	switch {
	case s.flags.Changed(flag):
		return plans.Override{Value: val, Source: "--" + flag}
	case os.Getenv("GPUQ_"+strings.ToUpper(key)) != "":
		return plans.Override{Value: val, Source: "GPUQ_" + strings.ToUpper(key)}
	}
	return plans.Override{Value: val, Source: fmt.Sprintf("%s: %s", s.v.ConfigFileUsed(), key)}
}

func (s *settings) overrides() plans.Overrides {
	return plans.Overrides{
		GPUs:     s.override(keyGPUs, "gpus"),
		Plan:     s.override(keyPlan, "gpu-plan"),
		Headroom: s.override(keyHeadroom, "headroom"),
		Order:    s.override(keyOrder, "order"),
		// The sharing target a sweep runs with, and the daemon's for all of them.
		UtilTarget: s.override(keyUtilTarget, "util-target"),
	}
}

// flagOverrides are the overrides given as flags alone: what overrides a trace, whose
// machine is its own (the user's config file and GPUQ_ variables speak of the real one).
func (s *settings) flagOverrides() plans.Overrides {
	ov := s.overrides()
	for _, o := range []*plans.Override{&ov.GPUs, &ov.Plan, &ov.Headroom, &ov.Order, &ov.UtilTarget} {
		if !strings.HasPrefix(o.Source, "--") {
			*o = plans.Override{}
		}
	}
	return ov
}

// ledger is where simulated trainers record their memory; every gpuq process of a user
// shares it, as real processes share real cards.
func (s *settings) ledger() string {
	if d := s.v.GetString(keyLedger); d != "" {
		return d
	}
	if rt := os.Getenv("XDG_RUNTIME_DIR"); rt != "" {
		return filepath.Join(rt, "gpuq", "sim")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("gpuq-%d", os.Getuid()), "sim")
}

// inventoryOptions are how gpuq opens the cards: the simulated machine's ledger, and
// gpuq's own CUDA_VISIBLE_DEVICES.
func (s *settings) inventoryOptions(io ioStreams) nvidia.Options {
	opt := nvidia.Options{Ledger: s.ledger(), Notice: io.Err}
	if v, ok := os.LookupEnv("CUDA_VISIBLE_DEVICES"); ok {
		opt.Visible = &v
	}
	return opt
}

// openInventory opens the cards for spec. source names where spec was written (a flag,
// the config file's key, the sweep file's), for the error of a card the machine lacks.
func (s *settings) openInventory(spec plans.GPUSpec, source string, io ioStreams) (*nvidia.Inventory, error) {
	opt := s.inventoryOptions(io)
	opt.Source = source
	return nvidia.Open(spec, opt)
}

func xdgDir(env, fallback string) string {
	if d := os.Getenv(env); d != "" {
		return d
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, fallback)
}

// flagError is a flag the command line gets wrong: bad input, and for a flag the
// command does not have, the one it has that was probably meant.
func flagError(c *cobra.Command, err error) error {
	name, ok := strings.CutPrefix(err.Error(), "unknown flag: --")
	if !ok {
		return inputError{err}
	}
	var known []string // not the hidden ones
	c.Flags().VisitAll(func(f *pflag.Flag) {
		if !f.Hidden {
			known = append(known, f.Name)
		}
	})
	// Near by the names alone: the dashes before them, alike in every one, would make
	// every name longer and so allow more edits (see plans.Nearest).
	if best := plans.Nearest(name, known); best != "" {
		return inputError{fmt.Errorf("%w (did you mean %q?)", err, "--"+best)}
	}
	return inputError{err}
}
