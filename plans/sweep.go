// Package plans turns what a researcher writes into what gpuq schedules: sweep files,
// GPU lists and plans, sizes, matrix expansion and the OOM ladder. It does no I/O
// beyond reading sweep files and the configs they name, and knows nothing of processes
// or GPUs.
package plans

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
)

// Sweep is one validated sweep file, expanded into jobs.
type Sweep struct {
	Name string
	File string // path of the sweep file as given
	// Source and Overrides are what it was read from, so that a daemon can journal a
	// submission and read it again after a restart (DecodeSweep); Source is nil for a
	// sweep built in memory (SweepOf).
	Source    []byte
	Overrides Overrides
	// Files are the files the sweep names (config.base, a model's config.json) as they
	// were read with it, by absolute path: a daemon expands the same jobs from them
	// after a restart (DecodeSweepFiles), and attempts are rendered from them, whatever
	// became of the files.
	Files    map[string]string
	Command  []string
	Workdir  string      // absolute
	Config   *ConfigSpec // nil: the attempt's config is its parameters alone
	Params   *Map
	Env      []EnvVar
	GPUs     GPUSpec
	Plan     GPUPlan // nil: not written; see SlotPlan
	Headroom Headroom
	// HeadroomSet: the sweep file or a flag wrote its headroom; otherwise it is
	// DefaultHeadroom, and a daemon's own does not hide it.
	HeadroomSet bool
	// UtilTarget is how much of a card's compute jobs sharing it may ask for together
	// (util_target): 0 takes the default, the whole card; UtilTargetOff counts none.
	UtilTarget float64
	// Sharing is how jobs that share a card share it (sharing: mps).
	Sharing Sharing
	Threads int // per job; 0 = "auto", an even share of the cores
	// Order is the order its jobs are offered in, within a priority.
	Order Order
	OOM   OOMPolicy
	// ShapeIgnores are the parameters that do not change a job's memory: jobs that
	// differ only in them are of one shape and share what gpuq learns.
	ShapeIgnores []string
	// Seeds are the parameters whose values repeat a point (seeds: default
	// ShapeIgnores): results aggregate a point's jobs over them, and early stopping
	// judges them together (see PointOf).
	Seeds []string
	// EarlyStop stops losing points early; nil: every job runs to its end.
	EarlyStop *EarlyStop
	Jobs      []Job
	// Notify is whom the sweep tells when it ends or a job fails.
	Notify Notify
	// MaxRunning is the most of its jobs that run at once, on all cards together, as
	// Slurm's array throttle (%N) and pueue's parallel; 0: no such limit. gpuq update
	// changes a submitted sweep's (state.SweepStatus).
	MaxRunning int
	// pointKeys are the parameters some job's point sets, in the order first set:
	// those that tell a point of seeds alone from the others (see PointOf).
	pointKeys []string
	// warnings are those found while the sweep was checked (see Warnings).
	warnings []string
}

// EnvVar is one variable of the sweep's env, its value a template.
type EnvVar struct {
	Name, Value string
}

// OOMPolicy says how a job is degraded after out-of-memory failures.
type OOMPolicy struct {
	MaxAttempts int
	Ladder      []Rung // as written; nil = the default ladder, fitted to each job
	// Keys names where the ladder's parameters are when the trainer calls them
	// otherwise (batch_size: train.micro_bs).
	Keys map[string]string
}

// Job is one point of the sweep.
type Job struct {
	Index  int    // from 1, in expansion order
	ID     string // "<sweep>.<index>"
	Name   string // the point's values, e.g. "task=sst2,seed=87"
	Params *Map   // the sweep's params with the point on top
	Memory int64  // estimated peak per card in bytes at tier 0; 0 = unknown
	// Model is the job's model description (memory: {model: ...}), whose values may
	// name parameters; nil when the memory is written as a size.
	Model *Map
	// Probe: the first job of each shape runs alone to measure its peak (memory: probe).
	Probe      bool
	HostMemory int64 // estimated peak host RAM in bytes; 0 = unknown
	GPUsPerJob int   // cards the job needs at once (gpus_per_job)
	Priority   int
	Timeout    Timeout
	Ladder     []Rung    // the rungs that apply to this job, with its own keys
	Batch      BatchKeys // the parameters whose product is its effective batch
	// After are the sweeps and jobs that must all have succeeded before it starts
	// (see after.go); nil: none.
	After  []string
	origin string
	fields map[string]string // see field
	// pointKeys are the keys of its point that are parameters, in the point's order
	// (its values are Params'): one slice for the jobs whose points have the same
	// keys, not a map of each job's own, which was a fifth of a daemon's memory at
	// 100,000 queued jobs.
	pointKeys []string
}

// ShapeOf names the shape of a job with these parameters: the parameters less the
// sweep's shape_ignores.
func (s *Sweep) ShapeOf(params *Map) string {
	return string(s.AppendShape(nil, params))
}

// AppendShape appends the name ShapeOf gives the shape of params to b.
func (s *Sweep) AppendShape(b []byte, params *Map) []byte {
	return appendMapKey(append(append(b, s.Name...), 0), params, s.ShapeIgnores)
}

// CanonicalShape is the name ShapeOf gives today to a shape named by an older gpuq,
// whose names followed the order of the keys in the file, so that {task, seed} and
// {seed, task} were two shapes. A state journaled by one is read through it, so what
// those shapes learned stays with their jobs. Numbers keep their literal text.
func CanonicalShape(name string) string {
	sweep, params, ok := strings.Cut(name, "\x00")
	if !ok {
		return name
	}
	d := json.NewDecoder(strings.NewReader(params))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return name
	}
	b, err := json.Marshal(v)
	if err != nil {
		return name
	}
	return sweep + "\x00" + string(b)
}

// Override is a machine-level setting given outside the sweep file (flag, environment
// variable, user config); Source names it in error messages.
type Override struct {
	Value  string
	Source string
}

// Overrides replace the sweep file's gpus, gpu_plan, headroom, order and util_target
// where set, and its name (gpuq submit --name, to run a sweep again under another
// name).
type Overrides struct {
	GPUs, Plan, Headroom, Order Override
	Name                        Override
	// UtilTarget is the sharing target; under gpuq run and gpuq plan, the machine's
	// (--util-target, GPUQ_UTIL_TARGET, the config file), which a card keeps one of.
	UtilTarget Override
	// After adds sweeps or jobs, comma-separated, to what every job waits for (gpuq
	// submit --after).
	After Override
}

var (
	// A name beginning with '-' would be read as a flag where gpuq's verbs take it.
	nameRe    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9._][a-z0-9._-]*$`) })
	envNameRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`) })

	sweepKeys  = []string{"name", "command", "workdir", "config", "params", "matrix", "jobs", "memory", "env", "gpus", "gpu_plan", "headroom", "threads", "priority", "gpus_per_job", "oom", "host_memory", "shape_ignores", "timeout", "notify", "order", "util_target", "sharing", "job_name", "after", "max_running", "seeds", "early_stop"}
	configKeys = []string{"base", "format", "add"}
	oomKeys    = []string{"max_attempts", "ladder", "keys"}
	rungKeys   = []string{"set", "scale", "repeat", "exclusive"}
	// jobKeys are the keys of a matrix point or jobs entry that set the job, not a parameter.
	jobKeys = []string{"memory", "host_memory", "gpus_per_job", "priority", "timeout", "after"}
	// memoryKeys are the keys of a memory mapping.
	memoryKeys = []string{"model"}
)

// LoadSweep reads and validates a sweep file, and checks it against this machine: the
// workdir, the command's program and the scripts and configs its arguments name.
func LoadSweep(path string, ov Overrides) (*Sweep, error) {
	data, err := ReadDocument(path)
	if err != nil {
		return nil, Problems{{File: path, Msg: fmt.Sprintf("cannot read the sweep file: %v", err)}}
	}
	return LoadSource(path, data, ov)
}

// LoadSource is LoadSweep of a sweep document already read (a one-off command's, which
// gpuq writes itself), named file in errors.
func LoadSource(file string, data []byte, ov Overrides) (*Sweep, error) {
	s, err := DecodeSweep(file, data, ov)
	if err != nil {
		return nil, err
	}
	c := &checker{file: file}
	if fi, err := os.Stat(s.Workdir); err != nil || !fi.IsDir() {
		c.fail("workdir", "%s is not a directory: workdir is relative to the sweep file", s.Workdir)
	} else {
		c.checkCommand(s, os.Getenv("PATH"))
		c.checkHook(s, os.Getenv("PATH"))
	}
	return s, c.err()
}

// DecodeSweep validates a sweep document and expands it into jobs. file names the
// document in errors and anchors relative paths; the files it names are read from
// disk. Every problem found is returned at once, as Problems.
func DecodeSweep(file string, data []byte, ov Overrides) (*Sweep, error) {
	return DecodeSweepFiles(file, data, nil, ov)
}

// DecodeSweepFiles is DecodeSweep with the files the sweep names as they were read
// before (Sweep.Files); one missing from files is read from disk.
func DecodeSweepFiles(file string, data []byte, files map[string]string, ov Overrides) (*Sweep, error) {
	return decodeSweep(&checker{file: file, files: files}, data, ov)
}

// ResubmitSweep is DecodeSweepFiles of a sweep that was submitted, expanded again (a
// daemon's restart): it gives the same sweep, but leaves out the checks of its jobs
// that set nothing of them (two jobs alike, a placeholder no parameter fills), which
// passed when it was submitted: they were half of what a daemon's restart on 100,000
// queued jobs spent expanding their sweep. A sweep that would fail them is not
// refused.
func ResubmitSweep(file string, data []byte, files map[string]string, ov Overrides) (*Sweep, error) {
	return decodeSweep(&checker{file: file, files: files, submitted: true}, data, ov)
}

func decodeSweep(c *checker, data []byte, ov Overrides) (*Sweep, error) {
	file := c.file
	doc, err := Decode(data, FormatOf(file))
	if err != nil {
		return nil, Problems{{File: file, Msg: err.Error()}}
	}
	// Checked here, not in SweepOf: a simulation's trace builds far larger sweeps.
	if list, ok := doc.Vals["jobs"].([]any); ok && len(list) > maxJobs {
		return nil, Problems{{File: file, Field: "jobs", Msg: fmt.Sprintf("%d jobs, more than the %d a sweep may have: split the sweep", len(list), maxJobs)}}
	}
	s, err := sweepOf(c, doc, ov)
	if err != nil {
		return nil, err
	}
	s.Source, s.Overrides = data, ov
	return s, nil
}

// SweepOf validates a decoded sweep document and expands it into jobs, as DecodeSweep
// does; a tool that writes sweeps of its own (a simulation trace) builds one with it.
func SweepOf(file string, doc *Map, ov Overrides) (*Sweep, error) {
	return sweepOf(&checker{file: file}, doc, ov)
}

func sweepOf(c *checker, doc *Map, ov Overrides) (*Sweep, error) {
	file := c.file
	for _, k := range doc.Keys {
		if !slices.Contains(sweepKeys, k) {
			c.fail(k, "unknown key%s; a sweep has %s", Suggest(k, sweepKeys), strings.Join(sweepKeys, ", "))
		}
	}
	dir, _ := filepath.Abs(filepath.Dir(file))
	c.dir = dir
	s := &Sweep{File: file, Params: NewMap(), Headroom: DefaultHeadroom, Threads: 1, Order: BigFirst,
		OOM: OOMPolicy{MaxAttempts: defaultMaxAttempt}}

	s.Name = c.str(doc, "name", "")
	if ov.Name.Value != "" {
		s.Name = ov.Name.Value
	}
	if s.Name == "" {
		c.fail("name", "a sweep needs a name of lowercase letters, digits, '.', '_' or '-', e.g. name: gla-e1")
	} else if !nameRe().MatchString(s.Name) {
		c.failAt(ov.Name, "name", "%q may hold only lowercase letters, digits, '.', '_' and '-', and not begin with '-': e.g. %s", s.Name, sanitizeName(s.Name))
	}
	s.Command = c.command(doc)
	s.Workdir = filepath.Join(dir, c.str(doc, "workdir", "."))
	if v := c.str(doc, "workdir", "."); filepath.IsAbs(v) {
		s.Workdir = v
	}
	if strings.ContainsRune(s.Workdir, 0) {
		c.fail("workdir", "%s", nulProblem)
	}
	s.Config = c.config(doc, dir)
	if p, ok := doc.Get("params"); ok {
		if pm, ok := p.(*Map); ok {
			s.Params = pm
		} else if p != nil {
			c.fail("params", "write a mapping of parameter names to values, e.g. params: {batch_size: 8}")
		}
	}
	s.Env = c.env(doc)
	s.GPUs = c.gpus(doc, ov.GPUs)
	s.Plan = c.plan(doc, ov.Plan)
	if s.Plan != nil && len(s.Plan) > 1 && s.GPUs.Count() > 0 {
		if _, err := s.Plan.For(s.GPUs.Count()); err != nil {
			from := ""
			if ov.GPUs.Source != "" {
				from = ", from " + ov.GPUs.Source
			}
			c.failAt(ov.Plan, "gpu_plan", "%v (gpus is %s%s)", err, s.GPUs, from)
		}
	}
	if h, ok := override(doc, "headroom", ov.Headroom); ok {
		if hr, err := ParseHeadroom(h.Value); err != nil {
			c.failAt(h, "headroom", "%v", err)
		} else {
			s.Headroom, s.HeadroomSet = hr, true
		}
	}
	s.UtilTarget = c.utilTarget(doc, ov.UtilTarget)
	s.Sharing = c.sharing(doc)
	s.Threads = c.threads(doc)
	s.Order = c.order(doc, ov.Order)
	s.OOM = c.oom(doc)
	s.Notify = c.notify(doc)

	s.ShapeIgnores = c.shapeIgnores(doc)
	s.Seeds = c.seeds(doc, s.ShapeIgnores)
	s.EarlyStop = c.earlyStop(doc)
	defaults := Job{GPUsPerJob: 1}
	if v, ok := doc.Get("memory"); ok {
		c.memory("memory", "", v, &defaults)
	}
	if v, ok := doc.Get("host_memory"); ok {
		defaults.HostMemory = c.size("host_memory", "", v)
	}
	defaults.Priority = c.integer(doc, "priority", 0, -1<<31)
	defaults.GPUsPerJob = c.integer(doc, "gpus_per_job", 1, 1)
	if v, ok := doc.Get("timeout"); ok {
		defaults.Timeout = c.timeout("timeout", "", v)
	}
	var givenAfter []string // the override's names alone (see renameOwnAfter)
	defaults.After, givenAfter = c.after(doc, ov.After)
	s.MaxRunning = c.integer(doc, "max_running", 0, 0)

	s.Jobs = c.jobs(s, doc, defaults)
	c.name(s, doc)
	if len(c.errs) == 0 {
		c.checkJobs(s)
		c.checkAdd(s)
		if written := c.str(doc, "name", ""); written != s.Name {
			renameOwnAfter(s, written, givenAfter)
		}
		c.checkAfter(s)
		c.checkJudged(s, doc)
	}
	if err := c.err(); err != nil {
		return nil, err
	}
	s.Files, s.warnings = c.read, c.warns
	return s, nil
}

// SlotPlan is the sweep's plan: as written, or when none is, memory alone decides
// where every job has an estimate, and otherwise one job per card, as a tmux script
// would start them.
func (s *Sweep) SlotPlan() GPUPlan {
	if s.Plan != nil {
		return s.Plan
	}
	for _, j := range s.Jobs {
		if j.Memory == 0 && j.Model == nil && !j.Probe {
			return GPUPlan{1}
		}
	}
	return GPUPlan{NoSlotLimit}
}

// Warnings are what is allowed but probably not meant: jobs an OOM would fail at once,
// parameters that reach the trainer nowhere, a ladder that changes the effective
// batch.
func (s *Sweep) Warnings() []string {
	out := append(slices.Clone(s.warnings), s.noRungWarning()...)
	out = append(out, s.paramWarnings()...)
	seen := map[string]bool{}
	for _, j := range s.Jobs {
		if j.Model != nil {
			if m, err := ModelOf(j.Model, j.Params); err == nil {
				if miss := m.Estimate().Missing; len(miss) > 0 {
					out = append(out, fmt.Sprintf("%s: memory.model has no %s: activations or logits are not counted, so its estimate is a lower bound", s.File, strings.Join(miss, ", ")))
				}
			}
		}
		eb0, ok := j.Batch.Effective(j.Params)
		if !ok {
			continue
		}
		for _, t := range Tiers(j.Params, j.Ladder)[1:] {
			if eb, ok := j.Batch.Effective(t.Params); ok && eb != eb0 {
				msg := fmt.Sprintf("tier %d changes the effective batch (%s) from %d to %d", t.N, j.Batch, eb0, eb)
				if !seen[msg] {
					seen[msg] = true
					out = append(out, fmt.Sprintf("%s: job %s: %s", s.File, j.ID, msg))
				}
				break
			}
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// sanitizeName suggests a valid sweep name for s.
func sanitizeName(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-' {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	return cmp.Or(strings.TrimLeft(b.String(), "-"), "sweep")
}
