// Package plans turns what a researcher writes into what gpuq schedules: sweep files,
// GPU lists and plans, sizes, matrix expansion and the OOM ladder. It does no I/O
// beyond reading the sweep file, and knows nothing of processes or GPUs.
package plans

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
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
	// Environ is the environment a daemon's submission came from, for its trainers;
	// nil: the runner's own.
	Environ  []string
	Command  []string
	Workdir  string      // absolute
	Config   *ConfigSpec // nil: the attempt's config is its parameters alone
	Params   *Map
	Env      []EnvVar
	GPUs     GPUSpec
	Plan     GPUPlan // nil: not written; see DefaultPlan
	Headroom Headroom
	Threads  int // per job; 0 = "auto", an even share of the cores
	OOM      OOMPolicy
	// ShapeIgnores are the parameters that do not change a job's memory: jobs that
	// differ only in them are of one shape and share what gpuq learns.
	ShapeIgnores []string
	Jobs         []Job
}

// ConfigSpec is the per-attempt config file: Base (absolute, may be empty) with the
// job's parameters merged in, written as Format.
type ConfigSpec struct {
	Base   string
	Format Format
}

// EnvVar is one variable of the sweep's env, its value a template.
type EnvVar struct {
	Name, Value string
}

// OOMPolicy says how a job is degraded after out-of-memory failures.
type OOMPolicy struct {
	MaxAttempts int
	Ladder      []Rung // as written; nil = the default ladder, fitted to each job
}

// Job is one point of the sweep.
type Job struct {
	Index  int    // from 1, in expansion order
	ID     string // "<sweep>.<index>"
	Name   string // the point's values, e.g. "task=sst2,seed=87"
	Point  *Map   // the values that distinguish this job
	Params *Map   // the sweep's params with the point on top
	Memory int64  // estimated peak per card in bytes at tier 0; 0 = unknown
	// Model is the job's model description (memory: {model: ...}), whose values may
	// name parameters; nil when the memory is written as a size.
	Model *Map
	// Probe: the first job of each shape runs alone to measure its peak (memory: probe).
	Probe      bool
	HostMemory int64 // estimated peak host RAM in bytes; 0 = unknown
	GPUs       int   // cards the job needs at once
	Priority   int
	Ladder     []Rung // the rungs that apply to this job
	origin     string
}

// MemoryAt is the job's estimate with the given parameters (those of a tier): by its
// model when it has one, else as declared.
func (j *Job) MemoryAt(params *Map) int64 {
	if j.Model == nil {
		return j.Memory
	}
	m, err := ModelOf(j.Model, params)
	if err != nil {
		// Every tier's parameters were checked against the model when the sweep was read.
		return j.Memory
	}
	return m.Estimate().Total()
}

// ShapeOf names the shape of a job with these parameters: the parameters less the
// sweep's shape_ignores.
func (s *Sweep) ShapeOf(params *Map) string {
	kept := NewMap()
	for _, k := range params.Keys {
		if !slices.Contains(s.ShapeIgnores, k) {
			kept.Set(k, params.Vals[k])
		}
	}
	return s.Name + "\x00" + valueKey(kept)
}

// Override is a machine-level setting given outside the sweep file (flag, environment
// variable, user config); Source names it in error messages.
type Override struct {
	Value  string
	Source string
}

// Overrides replace the sweep file's gpus, gpu_plan and headroom where set.
type Overrides struct {
	GPUs, Plan, Headroom Override
}

var (
	nameRe    = regexp.MustCompile(`^[a-z0-9._-]+$`)
	envNameRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

	sweepKeys  = []string{"name", "command", "workdir", "config", "params", "matrix", "jobs", "memory", "env", "gpus", "gpu_plan", "headroom", "threads", "priority", "gpus_per_job", "oom", "host_memory", "shape_ignores"}
	configKeys = []string{"base", "format"}
	oomKeys    = []string{"max_attempts", "ladder"}
	rungKeys   = []string{"set", "scale", "repeat", "exclusive"}
	// jobKeys are the keys of a matrix point or jobs entry that set the job, not a parameter.
	jobKeys = []string{"memory", "host_memory", "gpus_per_job", "priority"}
	// memoryKeys are the keys of a memory mapping.
	memoryKeys = []string{"model"}
)

// LoadSweep reads and validates a sweep file.
func LoadSweep(path string, ov Overrides) (*Sweep, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, Problems{{File: path, Msg: fmt.Sprintf("cannot read the sweep file: %v", err)}}
	}
	s, err := DecodeSweep(path, data, ov)
	if err != nil {
		return nil, err
	}
	c := &checker{file: path}
	if fi, err := os.Stat(s.Workdir); err != nil || !fi.IsDir() {
		c.fail("workdir", "%s is not a directory: workdir is relative to the sweep file", s.Workdir)
	}
	if s.Config != nil && s.Config.Base != "" {
		if _, err := os.Stat(s.Config.Base); err != nil {
			c.fail("config.base", "%s does not exist: config.base is relative to the sweep file", s.Config.Base)
		}
	}
	return s, c.err()
}

// DecodeSweep validates a sweep document and expands it into jobs. file names the
// document in errors and anchors relative paths. Every problem found is returned at
// once, as Problems.
func DecodeSweep(file string, data []byte, ov Overrides) (*Sweep, error) {
	doc, err := Decode(data, FormatOf(file))
	if err != nil {
		return nil, Problems{{File: file, Msg: err.Error()}}
	}
	s, err := SweepOf(file, doc, ov)
	if err != nil {
		return nil, err
	}
	s.Source, s.Overrides = data, ov
	return s, nil
}

// SweepOf validates a decoded sweep document and expands it into jobs, as DecodeSweep
// does; a tool that writes sweeps of its own (a simulation trace) builds one with it.
func SweepOf(file string, doc *Map, ov Overrides) (*Sweep, error) {
	c := &checker{file: file}
	for _, k := range doc.Keys {
		if !slices.Contains(sweepKeys, k) {
			c.fail(k, "unknown key%s; a sweep has %s", Suggest(k, sweepKeys), strings.Join(sweepKeys, ", "))
		}
	}
	dir, _ := filepath.Abs(filepath.Dir(file))
	s := &Sweep{File: file, Params: NewMap(), Headroom: DefaultHeadroom, Threads: 1,
		OOM: OOMPolicy{MaxAttempts: defaultMaxAttempt}}

	s.Name = c.str(doc, "name", "")
	if s.Name == "" {
		c.fail("name", "a sweep needs a name of lowercase letters, digits, '.', '_' or '-', e.g. name: gla-e1")
	} else if !nameRe.MatchString(s.Name) {
		c.fail("name", "%q may hold only lowercase letters, digits, '.', '_' and '-': e.g. %s", s.Name, sanitizeName(s.Name))
	}
	s.Command = c.command(doc)
	s.Workdir = filepath.Join(dir, c.str(doc, "workdir", "."))
	if v := c.str(doc, "workdir", "."); filepath.IsAbs(v) {
		s.Workdir = v
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
			c.fail(planField(ov.Plan), "%v (gpus is %s)", err, s.GPUs)
		}
	}
	if h, ok := override(doc, "headroom", ov.Headroom); ok {
		if hr, err := ParseHeadroom(h.Value); err != nil {
			c.failAt(h, "headroom", "%v", err)
		} else {
			s.Headroom = hr
		}
	}
	s.Threads = c.threads(doc)
	s.OOM = c.oom(doc)

	s.ShapeIgnores = c.shapeIgnores(doc)
	defaults := Job{GPUs: 1}
	if v, ok := doc.Get("memory"); ok {
		c.memory("memory", "", v, &defaults)
	}
	if v, ok := doc.Get("host_memory"); ok {
		defaults.HostMemory = c.size("host_memory", "", v)
	}
	defaults.Priority = c.integer(doc, "priority", 0, -1<<31)
	defaults.GPUs = c.integer(doc, "gpus_per_job", 1, 1)

	s.Jobs = c.jobs(s, doc, defaults)
	if len(c.errs) == 0 {
		c.checkJobs(s)
	}
	if err := c.err(); err != nil {
		return nil, err
	}
	return s, nil
}

// DefaultPlan is the plan used when none is written: memory alone decides where every
// job has an estimate; otherwise one job per card, as a tmux script would start.
func (s *Sweep) DefaultPlan() GPUPlan {
	for _, j := range s.Jobs {
		if j.Memory == 0 && j.Model == nil && !j.Probe {
			return GPUPlan{1}
		}
	}
	return GPUPlan{NoSlotLimit}
}

func (c *checker) failAt(o Override, field, format string, args ...any) {
	if o.Source != "" {
		c.errs = append(c.errs, &FieldError{File: o.Source, Msg: fmt.Sprintf(format, args...)})
		return
	}
	c.fail(field, format, args...)
}

func planField(o Override) string {
	if o.Source != "" {
		return o.Source
	}
	return "gpu_plan"
}

// override returns the override if set, else the file's value as a string.
func override(doc *Map, key string, o Override) (Override, bool) {
	if o.Value != "" {
		return o, true
	}
	v, ok := doc.Get(key)
	if !ok || v == nil {
		return Override{}, false
	}
	switch t := v.(type) {
	case []any:
		parts := make([]string, len(t))
		for i, e := range t {
			parts[i] = FormatValue(e)
		}
		return Override{Value: strings.Join(parts, ",")}, true
	case *Map:
		return Override{Value: "{...}"}, true
	}
	return Override{Value: FormatValue(v)}, true
}

func (c *checker) str(doc *Map, key, def string) string {
	v, ok := doc.Get(key)
	if !ok || v == nil {
		return def
	}
	s, ok := v.(string)
	if !ok {
		c.fail(key, "write a string, not a %s", kindOf(v))
		return def
	}
	return s
}

func (c *checker) integer(doc *Map, key string, def, lo int) int {
	v, ok := doc.Get(key)
	if !ok || v == nil {
		return def
	}
	return c.intValue(key, "", v, lo, def)
}

func (c *checker) intValue(field, job string, v any, lo, def int) int {
	i, ok := v.(int64)
	if !ok || int(i) < lo || i > 1<<31 {
		want := "a whole number"
		if lo == 1 {
			want = "a whole number of at least 1"
		} else if lo == 0 {
			want = "a whole number of at least 0"
		}
		c.failJob(field, job, "%s is not %s", FormatValue(v), want)
		return def
	}
	return int(i)
}

func (c *checker) size(field, job string, v any) int64 {
	s, ok := v.(string)
	if !ok {
		c.failJob(field, job, "write a size with its unit, e.g. \"11GiB\", not %s %s", kindOf(v), FormatValue(v))
		return 0
	}
	b, err := ParseSize(s)
	if err != nil {
		c.failJob(field, job, "%v", err)
	}
	return b
}

func (c *checker) command(doc *Map) []string {
	v, ok := doc.Get("command")
	if !ok {
		c.fail("command", "a sweep needs a command, as a list: command: [python3, train.py, --config, \"{config}\"]")
		return nil
	}
	list, ok := v.([]any)
	if !ok {
		c.fail("command", "write the command as a list of arguments, e.g. [python3, train.py, --seed, \"{seed}\"]: gpuq never runs a shell, so values need no quoting")
		return nil
	}
	if len(list) == 0 {
		c.fail("command", "the command is empty")
		return nil
	}
	argv := make([]string, len(list))
	for i, a := range list {
		if !isScalar(a) {
			c.fail(fmt.Sprintf("command[%d]", i), "an argument is a string or number, not a %s", kindOf(a))
			continue
		}
		argv[i] = FormatValue(a)
		if _, err := Placeholders(argv[i]); err != nil {
			c.fail(fmt.Sprintf("command[%d]", i), "%v", err)
		}
	}
	return argv
}

func (c *checker) config(doc *Map, dir string) *ConfigSpec {
	v, ok := doc.Get("config")
	if !ok || v == nil {
		return nil
	}
	var base, format string
	switch t := v.(type) {
	case string:
		base = t
	case *Map:
		for _, k := range t.Keys {
			if !slices.Contains(configKeys, k) {
				c.fail("config."+k, "unknown key%s; config has base and format", Suggest(k, configKeys))
			}
		}
		base = c.str(t, "base", "")
		format = c.str(t, "format", "")
	default:
		c.fail("config", "write config: {base: configs/train.yaml, format: yaml}")
		return nil
	}
	spec := &ConfigSpec{Format: YAML}
	if base != "" {
		spec.Base = base
		if !filepath.IsAbs(base) {
			spec.Base = filepath.Join(dir, base)
		}
		spec.Format = FormatOf(base)
	}
	switch Format(strings.ToLower(format)) {
	case "":
	case YAML, "yml":
		spec.Format = YAML
	case JSON:
		spec.Format = JSON
	default:
		c.fail("config.format", "%q is not a format gpuq writes: use yaml or json", format)
	}
	return spec
}

func (c *checker) env(doc *Map) []EnvVar {
	v, ok := doc.Get("env")
	if !ok || v == nil {
		return nil
	}
	m, ok := v.(*Map)
	if !ok {
		c.fail("env", "write a mapping of variable names to values, e.g. env: {HF_HOME: /data/hf}")
		return nil
	}
	var out []EnvVar
	for _, k := range m.Keys {
		val := m.Vals[k]
		switch {
		case !envNameRe.MatchString(k):
			c.fail("env."+k, "%q is not a variable name: use letters, digits and _", k)
		case !isScalar(val) && val != nil:
			c.fail("env."+k, "a value is a string or number, not a %s", kindOf(val))
		default:
			s := FormatValue(val)
			if _, err := Placeholders(s); err != nil {
				c.fail("env."+k, "%v", err)
			}
			out = append(out, EnvVar{Name: k, Value: s})
		}
	}
	return out
}

func (c *checker) gpus(doc *Map, ov Override) GPUSpec {
	o, ok := override(doc, "gpus", ov)
	if !ok {
		return GPUSpec{}
	}
	spec, err := ParseGPUs(o.Value)
	if err != nil {
		c.failAt(o, "gpus", "%v", err)
	}
	return spec
}

func (c *checker) plan(doc *Map, ov Override) GPUPlan {
	o, ok := override(doc, "gpu_plan", ov)
	if !ok {
		return nil
	}
	p, err := ParsePlan(o.Value)
	if err != nil {
		c.failAt(o, "gpu_plan", "%v", err)
	}
	return p
}

func (c *checker) threads(doc *Map) int {
	v, ok := doc.Get("threads")
	if !ok || v == nil {
		return 1
	}
	if s, ok := v.(string); ok && strings.EqualFold(s, "auto") {
		return 0
	}
	return c.intValue("threads", "", v, 1, 1)
}

// memory reads a job's memory: a size, "probe", or {model: {...}}.
func (c *checker) memory(field, job string, v any, j *Job) {
	if s, ok := v.(string); ok && strings.EqualFold(s, "probe") {
		j.Probe = true
		return
	}
	m, ok := v.(*Map)
	if !ok {
		j.Memory = c.size(field, job, v)
		return
	}
	for _, k := range m.Keys {
		if !slices.Contains(memoryKeys, k) {
			c.failJob(field+"."+k, job, "unknown key%s; memory is a size (\"11GiB\"), probe, or {model: {params: 7B, ...}}", Suggest(k, memoryKeys))
		}
	}
	desc, ok := m.Vals["model"].(*Map)
	if !ok {
		c.failJob(field+".model", job, "describe the model as a mapping, e.g. {params: 7B, precision: bf16, lora_rank: 16, seq_len: 512, micro_batch: \"{batch_size}\"}; `gpuq estimate --help` lists the keys")
		return
	}
	j.Model = desc
}

// checkModel estimates a job described by its model, at every tier of its ladder, so
// that a rung whose parameters the description cannot take fails now, not mid-sweep.
func (c *checker) checkModel(j *Job, note func(field, job, msg string)) {
	if j.Model == nil {
		return
	}
	for _, t := range Tiers(j.Params, j.Ladder) {
		m, err := ModelOf(j.Model, t.Params)
		if err != nil {
			msg := err.Error()
			if t.N > 0 {
				msg = fmt.Sprintf("at tier %d (%s changed): %s", t.N, strings.Join(t.Changed, ", "), msg)
			}
			note("memory.model", j.ID, msg)
			return
		}
		if t.N == 0 {
			j.Memory = m.Estimate().Total()
		}
	}
}

func (c *checker) shapeIgnores(doc *Map) []string {
	v, ok := doc.Get("shape_ignores")
	if !ok {
		return []string{"seed"}
	}
	list, _ := v.([]any)
	out := make([]string, 0, len(list))
	for _, e := range list {
		if s, ok := e.(string); ok {
			out = append(out, s)
		}
	}
	if v != nil && (list == nil || len(out) != len(list)) {
		c.fail("shape_ignores", "write a list of the parameters that do not change memory, e.g. [seed, learning_rate]")
	}
	return out
}

func (c *checker) oom(doc *Map) OOMPolicy {
	pol := OOMPolicy{MaxAttempts: defaultMaxAttempt}
	v, ok := doc.Get("oom")
	if !ok || v == nil {
		return pol
	}
	m, ok := v.(*Map)
	if !ok {
		c.fail("oom", "write a mapping: oom: {max_attempts: 4, ladder: [...]}")
		return pol
	}
	for _, k := range m.Keys {
		if !slices.Contains(oomKeys, k) {
			c.fail("oom."+k, "unknown key%s; oom has max_attempts and ladder", Suggest(k, oomKeys))
		}
	}
	pol.MaxAttempts = c.integer(m, "max_attempts", defaultMaxAttempt, 1)
	if l, ok := m.Get("ladder"); ok {
		list, ok := l.([]any)
		if !ok {
			c.fail("oom.ladder", "write a list of rungs, e.g. [{set: {gradient_checkpointing: true}}]")
			return pol
		}
		pol.Ladder = []Rung{}
		for i, e := range list {
			if r, ok := c.rung(fmt.Sprintf("oom.ladder[%d]", i), e); ok {
				pol.Ladder = append(pol.Ladder, r)
			}
		}
	}
	return pol
}

func (c *checker) rung(field string, v any) (Rung, bool) {
	m, ok := v.(*Map)
	if !ok {
		c.fail(field, "a rung is a mapping such as {set: {gradient_checkpointing: true}} or {scale: {batch_size: 0.5, gradient_accumulation_steps: 2}}")
		return Rung{}, false
	}
	n := len(c.errs)
	for _, k := range m.Keys {
		if !slices.Contains(rungKeys, k) {
			c.fail(field+"."+k, "unknown key%s; a rung has set, scale, repeat and exclusive", Suggest(k, rungKeys))
		}
	}
	var r Rung
	if s, ok := m.Get("set"); ok {
		if sm, ok := s.(*Map); ok && sm.Len() > 0 {
			r.Set = sm
		} else {
			c.fail(field+".set", "write a mapping of parameters to values, e.g. {num_data_workers: 0}")
		}
	}
	if s, ok := m.Get("scale"); ok {
		sm, ok := s.(*Map)
		if !ok || sm.Len() == 0 {
			c.fail(field+".scale", "write a mapping of parameters to factors, e.g. {batch_size: 0.5, gradient_accumulation_steps: 2}")
		}
		for _, k := range sm.Keys {
			f, ok := toFloat(sm.Vals[k])
			if !ok || f <= 0 {
				c.fail(field+".scale."+k, "a factor is a number above 0, e.g. 0.5")
				continue
			}
			r.Scale = append(r.Scale, Factor{Key: k, By: f})
		}
	}
	r.Repeat = c.boolean(m, field+".repeat", "repeat")
	r.Exclusive = c.boolean(m, field+".exclusive", "exclusive")
	if r.Set == nil && r.Scale == nil && !r.Exclusive && len(c.errs) == n {
		c.fail(field, "the rung changes nothing: give it set, scale or exclusive: true")
	}
	if r.Repeat && !r.shrinks() {
		c.fail(field+".repeat", "only a rung that scales something down (a factor below 1) can repeat")
	}
	return r, len(c.errs) == n
}

func (c *checker) boolean(m *Map, field, key string) bool {
	v, ok := m.Get(key)
	if !ok {
		return false
	}
	b, ok := v.(bool)
	if !ok {
		c.fail(field, "write true or false")
	}
	return b
}

func toFloat(v any) (float64, bool) {
	switch t := v.(type) {
	case int64:
		return float64(t), true
	case float64:
		return t, true
	}
	return 0, false
}

// jobs expands the matrix and the explicit jobs into Jobs.
func (c *checker) jobs(s *Sweep, doc *Map, defaults Job) []Job {
	var points []point
	mv, hasMatrix := doc.Get("matrix")
	if hasMatrix {
		if mm, ok := mv.(*Map); ok {
			points = expandMatrix(mm, c)
		} else {
			c.fail("matrix", "write a mapping of axes to lists, e.g. matrix: {seed: [1, 2, 3]}")
		}
	}
	jv, hasJobs := doc.Get("jobs")
	if hasJobs {
		list, ok := jv.([]any)
		if !ok {
			c.fail("jobs", "write a list of parameter mappings, e.g. jobs: [{task: mnli, seed: 87}]")
		}
		for i, e := range list {
			em, ok := e.(*Map)
			if !ok {
				c.fail(fmt.Sprintf("jobs[%d]", i), "write a mapping of parameters, e.g. {task: mnli, seed: 87}; {} runs params as they are")
				continue
			}
			points = append(points, point{vals: em, origin: fmt.Sprintf("jobs[%d]", i)})
		}
	}
	if !hasMatrix && !hasJobs {
		c.fail("matrix", "the sweep has no job: add a matrix (e.g. matrix: {seed: [1, 2, 3]}) or jobs (jobs: [{}] runs params once)")
	}

	jobs := make([]Job, 0, len(points))
	for i, p := range points {
		j := Job{Index: i + 1, ID: fmt.Sprintf("%s.%d", s.Name, i+1), Point: NewMap(), Params: s.Params.Clone(),
			Memory: defaults.Memory, Model: defaults.Model, Probe: defaults.Probe, HostMemory: defaults.HostMemory,
			GPUs: defaults.GPUs, Priority: defaults.Priority, origin: p.origin}
		var names []string
		for _, k := range p.vals.Keys {
			v := p.vals.Vals[k]
			switch k {
			case "memory":
				j.Memory, j.Model, j.Probe = 0, nil, false
				c.memory(p.origin+".memory", j.ID, v, &j)
			case "host_memory":
				j.HostMemory = c.size(p.origin+".host_memory", j.ID, v)
			case "gpus_per_job":
				j.GPUs = c.intValue(p.origin+".gpus_per_job", j.ID, v, 1, 1)
			case "priority":
				j.Priority = c.intValue(p.origin+".priority", j.ID, v, -1<<31, 0)
			default:
				j.Point.Set(k, v)
				j.Params.Set(k, v)
				names = append(names, k+"="+FormatValue(v))
			}
		}
		j.Name = strings.Join(names, ",")
		if j.Name == "" {
			j.Name = s.Name
		}
		jobs = append(jobs, j)
	}
	return jobs
}

// checkJobs validates what depends on each job's own parameters.
func (c *checker) checkJobs(s *Sweep) {
	seen := map[string]*Job{}
	type finding struct {
		field, msg string
		jobs       []string
	}
	var order []string
	found := map[string]*finding{}
	note := func(field, job, msg string) {
		key := field + "\x00" + msg
		if f, ok := found[key]; ok {
			f.jobs = append(f.jobs, job)
			return
		}
		found[key] = &finding{field: field, msg: msg, jobs: []string{job}}
		order = append(order, key)
	}
	for i := range s.Jobs {
		j := &s.Jobs[i]
		key := valueKey(j.Params) + valueKey(j.Model) + fmt.Sprintf("|%d|%d|%d|%v", j.Memory, j.GPUs, j.Priority, j.Probe)
		if prev, dup := seen[key]; dup {
			c.failJob(j.origin, j.ID, "the same job as %s (%s, from %s): remove one, or make them differ (e.g. by seed)", prev.ID, prev.Name, prev.origin)
		}
		seen[key] = j

		lookup := func(name string) (string, bool) {
			if isBuiltin(name) {
				return "", true
			}
			v, ok := j.Params.Get(name)
			return FormatValue(v), ok
		}
		check := func(field, tmpl string) {
			if _, err := Expand(tmpl, lookup); err != nil {
				if mp, ok := err.(*missingPlaceholder); ok {
					note(field, j.ID, fmt.Sprintf("no parameter fills {%s}%s: add %s to params or the matrix, or write {{%s}} for literal braces",
						mp.name, Suggest(mp.name, append(j.Params.Keys, Builtins...)), mp.name, mp.name))
				}
			}
		}
		for a, arg := range s.Command {
			check(fmt.Sprintf("command[%d]", a), arg)
		}
		for _, e := range s.Env {
			check("env."+e.Name, e.Value)
		}

		if s.OOM.Ladder == nil {
			j.Ladder = ladderFor(j.Params, DefaultLadder())
		} else {
			j.Ladder = s.OOM.Ladder
			for r, rung := range s.OOM.Ladder {
				for _, k := range rung.Keys() {
					if _, ok := j.Params.Get(k); !ok {
						note(fmt.Sprintf("oom.ladder[%d]", r), j.ID, fmt.Sprintf("names %q, which the job does not have, so the rung would degrade nothing%s: add it to params or fix the name",
							k, Suggest(k, j.Params.Keys)))
					}
				}
				for _, f := range rung.Scale {
					if v, ok := j.Params.Get(f.Key); ok {
						if _, num := toFloat(v); !num {
							note(fmt.Sprintf("oom.ladder[%d].scale.%s", r, f.Key), j.ID, fmt.Sprintf("scales %q, whose value %q is not a number", f.Key, FormatValue(v)))
						}
					}
				}
			}
		}
		c.checkModel(j, note)
	}
	for _, key := range order {
		f := found[key]
		job := f.jobs[0]
		if len(f.jobs) == len(s.Jobs) && len(s.Jobs) > 1 {
			job = everyJob
		} else if len(f.jobs) > 1 {
			job = fmt.Sprintf("%s and %d more", job, len(f.jobs)-1)
		}
		c.failJob(f.field, job, "%s", f.msg)
	}
}

// Warnings are what is allowed but probably not meant, such as a ladder that changes
// the effective batch.
func (s *Sweep) Warnings() []string {
	var out []string
	seen := map[string]bool{}
	for _, j := range s.Jobs {
		if j.Model != nil {
			if m, err := ModelOf(j.Model, j.Params); err == nil {
				if miss := m.Estimate().Missing; len(miss) > 0 {
					out = append(out, fmt.Sprintf("%s: memory.model has no %s: activations or logits are not counted, so its estimate is a lower bound", s.File, strings.Join(miss, ", ")))
				}
			}
		}
		eb0, ok := EffectiveBatch(j.Params)
		if !ok {
			continue
		}
		for _, t := range Tiers(j.Params, j.Ladder)[1:] {
			if eb, ok := EffectiveBatch(t.Params); ok && eb != eb0 {
				msg := fmt.Sprintf("tier %d changes the effective batch (%s × %s) from %d to %d", t.N, KeyBatch, KeyAccumulation, eb0, eb)
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
	return b.String()
}
