// Package launcher starts attempts: it renders their config files, builds their
// environment, runs them in pseudo-terminals in their own process groups, keeps their
// output, and says how they ended.
package launcher

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/gpuq/gpuq/plans"
)

// Attempt is what the launcher needs to start one attempt.
type Attempt struct {
	Sweep      *plans.Sweep
	JobID      string
	JobName    string // what people call the job (plans.Job.Name); "" for none
	N          int    // from 1
	Tier       int
	Params     *plans.Map   // the tier's parameters
	Cards      []plans.Card // Index and Total are read
	Dir        string       // the attempt's directory: its config and log
	Threads    int
	MasterPort int    // the rendezvous port of torchrun and torch.distributed; 0: a free one
	Ledger     string // the simulated machine's ledger; "" on real cards
}

// Command is an attempt ready to run.
type Command struct {
	Argv   []string
	Dir    string
	Env    []string // the whole environment
	Set    []string // NAME=value of what gpuq set, for the log header
	Config string   // the rendered config file
}

// DefaultedVars are the variables Prepare sets for every trainer by default, in the
// order it sets them (PyTorch's allocator where the platform has expandable segments,
// tokenizers, threads: the README's "What a trainer gets"), each of which a sweep's env
// may set instead. A one-off takes them from the environment it is given in.
var DefaultedVars = []string{"PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF", "TOKENIZERS_PARALLELISM", "OMP_NUM_THREADS", "MKL_NUM_THREADS"}

// Prepare renders the attempt's config and resolves its argv and environment.
// Placeholders are filled from the tier's parameters and gpuq's own values; nothing
// passes through a shell.
func Prepare(a Attempt, parentEnv []string) (Command, error) {
	dir, err := filepath.Abs(a.Dir)
	if err != nil {
		return Command{}, err
	}
	if err := makeAttemptDir(hostTrust(), dir); err != nil {
		return Command{}, err
	}
	cfg, doc, err := renderConfig(a)
	if err != nil {
		return Command{}, fmt.Errorf("job %s: config: %w", a.JobID, err)
	}
	if a.MasterPort == 0 {
		if a.MasterPort, err = freePort(); err != nil {
			return Command{}, err
		}
	}
	builtin := map[string]string{
		"config": cfg, "sweep": a.Sweep.Name, "job": a.JobID,
		"attempt": strconv.Itoa(a.N), "tier": strconv.Itoa(a.Tier), "master_port": strconv.Itoa(a.MasterPort),
	}
	lookup := func(name string) (string, bool) {
		if v, ok := builtin[name]; ok {
			return v, true
		}
		v, ok := plans.Placeholder(a.Params, doc, name)
		return plans.FormatValue(v), ok
	}
	c := Command{Dir: a.Sweep.Workdir, Config: cfg}
	for _, arg := range a.Sweep.Command {
		s, err := plans.Expand(arg, lookup)
		if err != nil {
			return Command{}, fmt.Errorf("job %s: command: %w", a.JobID, err)
		}
		c.Argv = append(c.Argv, s)
	}
	var set []string
	add := func(k, v string) { set = append(set, k+"="+v) }
	idx := make([]string, len(a.Cards))
	for i, cd := range a.Cards {
		idx[i] = strconv.Itoa(cd.Index)
	}
	add("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
	add("CUDA_VISIBLE_DEVICES", strings.Join(idx, ","))
	sweepEnv := map[string]string{}
	for _, e := range a.Sweep.Env {
		v, err := plans.Expand(e.Value, lookup)
		if err != nil {
			return Command{}, fmt.Errorf("job %s: env.%s: %w", a.JobID, e.Name, err)
		}
		sweepEnv[e.Name] = v
	}
	// PyTorch 2.9 reads PYTORCH_ALLOC_CONF first, and 2.9.1 ignored expandable_segments
	// given there alone: both names get the same value.
	conf, ok := sweepEnv["PYTORCH_CUDA_ALLOC_CONF"]
	if !ok {
		conf, ok = sweepEnv["PYTORCH_ALLOC_CONF"]
	}
	if !ok {
		conf, ok = defaultAllocConf.get()
	}
	threads := strconv.Itoa(max(a.Threads, 1))
	defaults := map[string]string{"TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads}
	if ok {
		defaults["PYTORCH_CUDA_ALLOC_CONF"], defaults["PYTORCH_ALLOC_CONF"] = conf, conf
	}
	for _, k := range DefaultedVars {
		if v, ok := defaults[k]; ok {
			add(k, v)
		}
	}
	// torchrun reads PET_*, init_process_group("env://") MASTER_*: with a port of its
	// own, no two jobs meet on torchrun's default 29500, which it binds even for one
	// worker.
	port := strconv.Itoa(a.MasterPort)
	add("MASTER_ADDR", "127.0.0.1")
	add("MASTER_PORT", port)
	add("PET_MASTER_ADDR", "127.0.0.1")
	add("PET_MASTER_PORT", port)
	add("GPUQ_SWEEP", a.Sweep.Name)
	add("GPUQ_JOB_ID", a.JobID)
	if a.JobName != "" {
		add("GPUQ_JOB_NAME", a.JobName)
	}
	add("GPUQ_ATTEMPT", strconv.Itoa(a.N))
	add("GPUQ_TIER", strconv.Itoa(a.Tier))
	add(attemptDirVar, dir)
	add(MetricsVar, MetricsPath(dir))
	if a.Ledger != "" {
		add("GPUQ_SIM_LEDGER", a.Ledger)
		caps := make([]string, len(a.Cards))
		for i, cd := range a.Cards {
			caps[i] = strconv.FormatInt(cd.Total, 10)
		}
		add("GPUQ_SIM_CAPACITY", strings.Join(caps, ","))
	}
	for _, e := range a.Sweep.Env { // the sweep's env on top, in its order
		add(e.Name, sweepEnv[e.Name])
	}
	// The sweep's env may name a variable gpuq sets: the rerun line lists each once,
	// with the value the trainer got.
	c.Set = mergeEnv(nil, set)
	c.Env = mergeEnv(parentEnv, set)
	if err := fitsExec(c); err != nil {
		return Command{}, fmt.Errorf("job %s: %w", a.JobID, err)
	}
	return c, nil
}

// fitsExec refuses a command with an argument or environment variable longer than
// Linux passes a program (plans.MaxArgLen), which execve would refuse with nothing
// clearer than "argument list too long". The plan refuses a job whose parameters make
// one so; this is for what only the attempt knows (gpuq's own values, the environment
// it is started in). The whole of them is left to execve (see Start): its limit
// follows the stack size limit of whatever starts the trainer.
func fitsExec(c Command) error {
	for i, arg := range c.Argv {
		if len(arg) > plans.MaxArgLen {
			return fmt.Errorf("command[%d] is %s with its placeholders filled in, %s", i, plans.FormatSize(int64(len(arg))), plans.ArgTooLong("argument"))
		}
	}
	for _, kv := range c.Env {
		if len(kv) > plans.MaxArgLen {
			name, _, _ := strings.Cut(kv, "=")
			return fmt.Errorf("environment variable %s is %s, %s", name, plans.FormatSize(int64(len(kv))), plans.ArgTooLong("environment variable"))
		}
	}
	return nil
}

// makeAttemptDir makes an attempt's directory and its job's (see AttemptDir) under
// their root, or takes those there that are the user's own (see trust.makeOwnDir).
func makeAttemptDir(t trust, dir string) error {
	job := filepath.Dir(dir)
	if err := os.MkdirAll(filepath.Dir(job), 0o700); err != nil {
		return err
	}
	if err := t.makeOwnDir(job); err != nil {
		return err
	}
	return t.makeOwnDir(dir)
}

// freePort asks the kernel for a free TCP port, for a job's rendezvous.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("no free port for MASTER_PORT: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// envValue is the value of name in env ("NAME=value" entries), or "".
func envValue(env []string, name string) string {
	v, _ := lastValue(env, name)
	return v
}

// attemptVars are the variables gpuq sets in an attempt's environment that are of the
// attempt itself: its job, its cards, its files, its rendezvous. A process a trainer
// started is not that attempt: a hook of a sweep submitted from a job, which runs
// with the environment the sweep was submitted from, is given none of them (see
// withoutAttempt).
var attemptVars = []string{"CUDA_VISIBLE_DEVICES", "MASTER_ADDR", "MASTER_PORT", "PET_MASTER_ADDR", "PET_MASTER_PORT",
	"GPUQ_SWEEP", "GPUQ_JOB_ID", "GPUQ_JOB_NAME", "GPUQ_ATTEMPT", "GPUQ_TIER", attemptDirVar, MetricsVar, "GPUQ_SIM_CAPACITY"}

// withoutAttempt is env less attemptVars where env is an attempt's (it names an
// attempt's directory), else env as it is: a person's CUDA_VISIBLE_DEVICES is theirs.
func withoutAttempt(env []string) []string {
	if _, ok := lastValue(env, attemptDirVar); !ok {
		return env
	}
	return slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return slices.Contains(attemptVars, name)
	})
}

// findIn points cmd at its program as the PATH of env, the environment it runs with,
// finds it, where env has a PATH: a trainer or a hook runs the program its sweep was
// checked against when it was submitted (a conda env's python), not one the PATH of
// the daemon or the supervisor, which exec.Command searched, finds, or none.
func findIn(cmd *exec.Cmd, env []string) {
	name := cmd.Args[0]
	path, ok := lastValue(env, "PATH")
	if !ok || strings.ContainsRune(name, '/') {
		return
	}
	if p, ok := plans.OnPath(name, path); ok {
		cmd.Path, cmd.Err = p, nil
		return
	}
	cmd.Path, cmd.Err = name, &exec.Error{Name: name, Err: exec.ErrNotFound}
}

// lastValue is the value of a variable in env, the last one where it is set twice, as
// exec passes it.
func lastValue(env []string, name string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// mergeEnv returns parent with every NAME=value of set replacing or added; the last
// assignment of a name wins.
func mergeEnv(parent, set []string) []string {
	names := map[string]bool{}
	for _, kv := range set {
		k, _, _ := strings.Cut(kv, "=")
		names[k] = true
	}
	var out []string
	for _, kv := range parent {
		if k, _, _ := strings.Cut(kv, "="); !names[k] {
			out = append(out, kv)
		}
	}
	last := map[string]int{}
	for _, kv := range set {
		k, _, _ := strings.Cut(kv, "=")
		if i, ok := last[k]; ok {
			out[i] = kv
			continue
		}
		last[k] = len(out)
		out = append(out, kv)
	}
	return out
}

// renderConfig writes the attempt's config (config.base as read with the sweep, the
// parameters it takes merged in; see plans.ConfigSpec.Merges) and returns its path and
// what it holds.
func renderConfig(a Attempt) (string, *plans.Map, error) {
	spec := a.Sweep.Config
	format := plans.YAML
	if spec != nil {
		format = spec.Format
	}
	doc := spec.Render(a.Params)
	var out []byte
	var err error
	if format == plans.JSON {
		var raw []byte
		if raw, err = json.Marshal(doc); err == nil {
			var b bytes.Buffer
			err = json.Indent(&b, raw, "", "  ")
			out = append(b.Bytes(), '\n')
		}
	} else {
		out, err = yaml.Marshal(doc)
	}
	if err != nil {
		return "", nil, err
	}
	path := filepath.Join(a.Dir, "config."+string(format))
	return path, doc, writePrivate(path, out)
}
