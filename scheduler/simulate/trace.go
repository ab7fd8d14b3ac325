package simulate

import (
	"cmp"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/gpuq/gpuq/plans"
)

// Trace is a sweep to simulate: jobs as the packer sees them (their declared
// estimates), and the truth of each, which only the simulated cards know.
type Trace struct {
	Sweep *plans.Sweep
	// Cost is the trace's colocation_cost: the share of its speed each trainer loses to
	// each other one on its card (see pack.Speed); 0: none.
	Cost float64
	// Entries are the trace's job entries' truths; Entry maps each job, by its Index-1,
	// to its entry. The jobs of one entry differ in nothing but their copy number.
	Entries []Truth
	Entry   []int
	// Curves are the entries' training curves, by entry; nil where an entry has none.
	Curves []*Curve
}

// Truth is what job i (its Index-1) really needs as written.
func (t *Trace) Truth(i int) Truth { return t.Entries[t.Entry[i]] }

var (
	traceKeys = []string{"name", "gpus", "gpu_plan", "headroom", "oom", "params", "shape_ignores", "timeout", "order", "util_target", "colocation_cost", "jobs", "seeds", "early_stop"}
	jobKeys   = []string{"name", "estimate", "base", "activations", "duration", "gpu_util", "count", "params", "timeout", "curve"}
	// defaultParams are what a trace's jobs have unless it says otherwise: the keys the
	// default ladder degrades, so that an OOM has somewhere to go.
	defaultParams = []struct {
		key string
		val any
	}{
		{plans.KeyBatch, int64(32)},
		{plans.KeyAccumulation, int64(1)},
		{plans.KeyCheckpointing, false},
		{plans.KeyDataWorkers, int64(4)},
	}
	nonName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`[^a-z0-9._-]+`) })
)

// maxJobs bounds a trace, so that a typo in count cannot exhaust memory.
const maxJobs = 10_000_000

// Load reads a trace file (YAML or JSON).
func Load(path string, ov plans.Overrides) (*Trace, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, plans.Problems{{File: path, Msg: fmt.Sprintf("cannot read the trace: %v", err)}}
	}
	return Decode(path, data, ov)
}

// Decode validates a trace and expands it into a sweep. Its sweep-level keys (gpus,
// gpu_plan, headroom, oom, params, order...) are a sweep file's, and are checked as such; gpus
// must name a simulated machine. Each job entry says what the user declared (estimate),
// the truth (base + activations, for duration) and how many such jobs there are.
func Decode(file string, data []byte, ov plans.Overrides) (*Trace, error) {
	doc, err := plans.Decode(data, plans.FormatOf(file))
	if err != nil {
		return nil, plans.Problems{{File: file, Msg: err.Error()}}
	}
	var errs plans.Problems
	fail := func(field, format string, args ...any) {
		errs = append(errs, &plans.FieldError{File: file, Field: field, Msg: fmt.Sprintf(format, args...)})
	}
	if _, ok := doc.Get("command"); ok {
		return nil, plans.Problems{{File: file, Msg: "this is a sweep file, not a trace: a trace gives each job's estimate, base, activations and duration (see gpuq simulate --help, and examples/traces)"}}
	}
	gpus, field := doc.Vals["gpus"], "gpus"
	if ov.GPUs.Value != "" {
		gpus, field = ov.GPUs.Value, ov.GPUs.Source
	}
	if spec, err := plans.ParseGPUs(plans.FormatValue(gpus)); gpus == nil || err == nil && !spec.IsSimulated() {
		return nil, plans.Problems{{File: file, Field: field, Msg: fmt.Sprintf("a trace runs on simulated cards: write e.g. gpus: \"sim:7x23.52GiB\" (got %s)", cmp.Or(plans.FormatValue(gpus), "none"))}}
	}
	sweep := plans.NewMap()
	for _, k := range doc.Keys {
		if !slices.Contains(traceKeys, k) {
			fail(k, "unknown key%s; a trace has %s", plans.Suggest(k, traceKeys), strings.Join(traceKeys, ", "))
			continue
		}
		if k != "jobs" && k != "params" && k != "colocation_cost" {
			sweep.Set(k, doc.Vals[k])
		}
	}
	if _, ok := doc.Get("name"); !ok {
		base := strings.TrimSuffix(filepath.Base(file), filepath.Ext(file))
		sweep.Set("name", strings.Trim(nonName().ReplaceAllString(strings.ToLower(base), "-"), "-."))
	}
	sweep.Set("command", []any{"simulated-trainer"})
	if v, ok := doc.Get("shape_ignores"); ok {
		sweep.Set("shape_ignores", v)
	}
	params := plans.NewMap()
	for _, d := range defaultParams {
		params.Set(d.key, d.val)
	}
	if p, ok := doc.Get("params"); ok {
		if pm, ok := p.(*plans.Map); ok {
			for _, k := range pm.Keys {
				params.Set(k, pm.Vals[k])
			}
		} else {
			fail("params", "write a mapping of parameter names to values, e.g. params: {batch_size: 8}")
		}
	}
	sweep.Set("params", params)

	var entries []Truth
	var curves []*Curve
	metric := curveMetric(doc)
	var estimates []int64
	var counts []int
	var points []any
	jobs := 0
	jv, _ := doc.Get("jobs")
	list, ok := jv.([]any)
	if !ok || len(list) == 0 {
		fail("jobs", "write a list of jobs, e.g. jobs: [{name: a, estimate: 11GiB, base: 3.5GiB, activations: 8GiB, duration: 45m}]")
	}
	names := map[string]int{}
	for i, e := range list {
		field := fmt.Sprintf("jobs[%d]", i)
		em, ok := e.(*plans.Map)
		if !ok {
			fail(field, "write a mapping: {name: a, estimate: 11GiB, base: 3.5GiB, activations: 8GiB, duration: 45m, count: 10}")
			continue
		}
		j, problems := decodeJob(file, field, em)
		errs = append(errs, problems...)
		if len(problems) > 0 {
			continue
		}
		if prev, dup := names[j.name]; dup {
			fail(field+".name", "%q is the name of jobs[%d] too: give each its own, or raise that one's count", j.name, prev)
			continue
		}
		names[j.name] = i
		var curve *Curve
		if v, ok := em.Get("curve"); ok {
			curve = decodeCurve(v, metric, func(key, format string, args ...any) { fail(field+key, format, args...) })
		}
		curves = append(curves, curve)
		if jobs += j.count; jobs > maxJobs {
			fail(field+".count", "the trace would have more than %d jobs", maxJobs)
			break
		}
		pt := plans.NewMap()
		pt.Set("job", j.name)
		if j.estimate > 0 {
			pt.Set("memory", strconv.FormatInt(j.estimate, 10)+"B")
		}
		if j.timeout != nil {
			pt.Set("timeout", j.timeout)
		}
		if j.params != nil {
			for _, k := range j.params.Keys {
				pt.Set(k, j.params.Vals[k])
			}
		}
		points = append(points, pt)
		entries = append(entries, j.truth)
		estimates = append(estimates, j.estimate)
		counts = append(counts, j.count)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	sweep.Set("jobs", points)
	sw, err := plans.SweepOf(file, sweep, ov)
	if err != nil {
		return nil, err
	}
	var largest int64
	for _, g := range sw.GPUs.Simulated {
		largest = max(largest, g.Bytes)
	}
	room := sw.Headroom.Room(largest)
	for i, e := range estimates {
		if e > room {
			fail(fmt.Sprintf("jobs[%d].estimate", i), "%s is larger than every card (%s after %s headroom): gpuq would fail the job at once; lower the estimate or use larger cards",
				plans.FormatSize(e), plans.FormatSize(room), sw.Headroom)
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	t := &Trace{Sweep: sw, Entries: entries, Curves: curves}
	if v, ok := doc.Get("colocation_cost"); ok {
		c, err := share(v, false)
		if err != nil {
			return nil, plans.Problems{&plans.FieldError{File: file, Field: "colocation_cost", Msg: err.Error() + ", the share of its speed a trainer loses to each other one on its card: e.g. 0.05 (Lucid's median pair)"}}
		}
		t.Cost = c
	}
	t.copies(counts)
	return t, nil
}

// copies makes count[e] jobs of each entry e's one job, numbered in order as a
// sweep's jobs are. The copies of an entry are one shape and differ in nothing but
// their number and name: they share the entry's parameters, point and ladder rather
// than each holding its own, which a trace of 100,000 jobs cannot afford.
func (t *Trace) copies(count []int) {
	// Made whole at once: grown by appends, a fleet's 1,000,000 jobs were copied over
	// and over (most of building the fleet's trace), and kept a quarter more room.
	total := 0
	for _, n := range count {
		total += n
	}
	jobs := make([]plans.Job, 0, total)
	t.Entry = make([]int, 0, total)
	for e, n := range count {
		for c := range n {
			j := t.Sweep.Jobs[e]
			j.Index = len(jobs) + 1
			j.ID = fmt.Sprintf("%s.%d", t.Sweep.Name, j.Index)
			if n > 1 {
				j.Name += fmt.Sprintf(",copy=%d", c+1)
			}
			jobs = append(jobs, j)
			t.Entry = append(t.Entry, e)
		}
	}
	t.Sweep.Jobs = jobs
}

type traceJob struct {
	name     string
	estimate int64
	count    int
	params   *plans.Map
	timeout  any // as written; the sweep checks it
	truth    Truth
}

func decodeJob(file, field string, m *plans.Map) (traceJob, plans.Problems) {
	var errs plans.Problems
	fail := func(key, format string, args ...any) {
		errs = append(errs, &plans.FieldError{File: file, Field: field + key, Msg: fmt.Sprintf(format, args...)})
	}
	j := traceJob{count: 1}
	for _, k := range m.Keys {
		if !slices.Contains(jobKeys, k) {
			fail("."+k, "unknown key%s; a trace job has %s", plans.Suggest(k, jobKeys), strings.Join(jobKeys, ", "))
		}
	}
	size := func(key string, required bool) int64 {
		v, ok := m.Get(key)
		if !ok {
			if required {
				fail("", "needs %s, a size such as 3.5GiB", key)
			}
			return 0
		}
		n, err := plans.ParseSize(plans.FormatValue(v))
		if err != nil {
			fail("."+key, "%v", err)
		}
		return n
	}
	if v, ok := m.Get("name"); ok && plans.FormatValue(v) != "" {
		j.name = plans.FormatValue(v)
	} else {
		fail("", "needs a name, e.g. name: gla000")
	}
	j.estimate = size("estimate", false)
	j.truth.Base = size("base", true)
	j.truth.Activations = size("activations", false)
	if v, ok := m.Get("duration"); ok {
		d, err := plans.ParseDuration(v)
		if err != nil {
			fail(".duration", "%v", err)
		}
		j.truth.Duration = d
	} else {
		fail("", "needs a duration, e.g. 45m or 2h30m")
	}
	if v, ok := m.Get("gpu_util"); ok {
		u, err := share(v, true)
		if err != nil {
			fail(".gpu_util", "%v, the share of a card's compute the job keeps busy alone (nvidia-smi's GPU-Util): e.g. 0.45 or 45%%", err)
		}
		j.truth.Util = u
	}
	if v, ok := m.Get("count"); ok {
		n, isInt := v.(int64)
		if !isInt || n < 1 {
			fail(".count", "write how many such jobs there are, a whole number from 1 (got %s)", plans.FormatValue(v))
		}
		j.count = int(min(max(n, 1), maxJobs+1))
	}
	j.timeout = m.Vals["timeout"]
	if v, ok := m.Get("params"); ok {
		if pm, ok := v.(*plans.Map); ok {
			j.params = pm
		} else {
			fail(".params", "write a mapping of parameter names to values, e.g. params: {batch_size: 8}")
		}
	}
	return j, errs
}

// share reads a fraction written as a number (0.45) or a percentage ("45%"): above 0
// and at most 1 where whole, else from 0 to below 1.
func share(v any, whole bool) (float64, error) {
	x, number := plans.Number(v)
	switch n := v.(type) {
	case string:
		p, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(n, "%")), 64)
		if err != nil || !strings.HasSuffix(n, "%") {
			return 0, fmt.Errorf("%q is not a share", n)
		}
		x = p / 100
	default:
		if !number {
			return 0, fmt.Errorf("%s is not a share", plans.FormatValue(v))
		}
	}
	if whole && (x <= 0 || x > 1) || !whole && (x < 0 || x >= 1) || math.IsNaN(x) {
		bounds := "from 0 to below 1"
		if whole {
			bounds = "above 0 and at most 1"
		}
		return 0, fmt.Errorf("%s is not a share %s", plans.FormatValue(v), bounds)
	}
	return x, nil
}
