package plans

// Jobs: the matrix and the explicit points expanded, then checked one by one.

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// jobs expands the matrix and the explicit jobs into Jobs, and gathers the keys of
// their points into s.pointKeys.
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
	pointKeys := map[string][]string{} // the jobs' shared lists of point keys, by the keys
	var keys []string
	for i, p := range points {
		j := Job{Index: i + 1, ID: s.Name + "." + strconv.Itoa(i+1), Params: s.Params.cloneFor(p.vals.Len()),
			Memory: defaults.Memory, Model: defaults.Model, Probe: defaults.Probe, HostMemory: defaults.HostMemory,
			GPUsPerJob: defaults.GPUsPerJob, Priority: defaults.Priority, Timeout: defaults.Timeout, After: defaults.After, origin: p.origin}
		keys = keys[:0]
		for _, k := range p.vals.Keys {
			v := p.vals.Vals[k]
			if slices.Contains(jobKeys, k) {
				if j.fields == nil {
					j.fields = map[string]string{}
				}
				j.fields[k] = p.field(k)
			}
			switch k {
			case "memory":
				j.Memory, j.Model, j.Probe = 0, nil, false
				c.memory(j.field(k), j.ID, v, &j)
			case "host_memory":
				j.HostMemory = c.size(j.field(k), j.ID, v)
			case "gpus_per_job":
				j.GPUsPerJob = c.intValue(j.field(k), j.ID, v, 1, 1)
			case "priority":
				j.Priority = c.intValue(j.field(k), j.ID, v, -1<<31, 0)
			case "timeout":
				j.Timeout = c.timeout(j.field(k), j.ID, v)
			case "after": // adds to the sweep's
				for _, name := range c.afterNames(j.field(k), j.ID, v) {
					if !slices.Contains(j.After, name) {
						j.After = append(slices.Clip(j.After), name)
					}
				}
			default:
				// A mapping merges into the params' mapping of that key, key by key,
				// as into the config base's (see Render); j.Params is the job's own.
				// Anything else is shared by the jobs of the point's value, as
				// written: a tier's parameters are a copy (see Rung.Apply).
				_, into := j.Params.Vals[k].(*Map)
				if _, add := v.(*Map); into && add {
					j.Params.mergeParam(k, v)
				} else {
					j.Params.Set(k, v)
				}
				keys = append(keys, k)
			}
		}
		together := strings.Join(keys, "\x00")
		if pointKeys[together] == nil {
			pointKeys[together] = slices.Clone(keys)
			for _, k := range keys {
				if !slices.Contains(s.pointKeys, k) {
					s.pointKeys = append(s.pointKeys, k)
				}
			}
		}
		j.pointKeys = pointKeys[together]
		jobs = append(jobs, j)
	}
	return jobs
}

// field names where the job's setting key was written: in the job's own entry
// (jobs[2].memory, matrix.include[0].memory), or at the sweep's top level.
func (j *Job) field(key string) string {
	return cmp.Or(j.fields[key], key)
}

// findings gathers the same problem of many jobs, so that it is said once: for every
// job, or for one and how many more.
type findings struct {
	order []string
	found map[string]*finding
}

type finding struct {
	field, msg string
	jobs       []string
}

func (fs *findings) note(field, job, msg string) {
	key := field + "\x00" + msg
	if f, ok := fs.found[key]; ok {
		f.jobs = append(f.jobs, job)
		return
	}
	if fs.found == nil {
		fs.found = map[string]*finding{}
	}
	fs.found[key] = &finding{field: field, msg: msg, jobs: []string{job}}
	fs.order = append(fs.order, key)
}

// fail reports each finding, of a sweep of n jobs.
func (fs *findings) fail(c *checker, n int) {
	for _, key := range fs.order {
		f := fs.found[key]
		job := f.jobs[0]
		if len(f.jobs) == n && n > 1 {
			job = everyJob
		} else if len(f.jobs) > 1 {
			job = fmt.Sprintf("%s and %d more", job, len(f.jobs)-1)
		}
		c.failJob(f.field, job, "%s", f.msg)
	}
}

// shown is a parameter's name or value as a job's name gives it, which terminals and
// pages show: one holding a control character (an escape sequence that would set a
// terminal's title or clear it) is quoted, so that it is seen and not acted on.
func shown(s string) string {
	if strings.ContainsFunc(s, unicode.IsControl) {
		return strconv.Quote(s)
	}
	return s
}

// dupKey is what two jobs that are the same job share.
func dupKey(j *Job) []byte {
	b := appendKey(appendKey(nil, j.Params), j.Model)
	for _, n := range []int64{j.Memory, int64(j.GPUsPerJob), int64(j.Priority)} {
		b = strconv.AppendInt(append(b, '|'), n, 10)
	}
	return strconv.AppendBool(append(b, '|'), j.Probe)
}

// checkJobs validates what depends on each job's own parameters, and fits its ladder
// and its model's estimate to them. Of a sweep submitted already, it only fits them.
func (c *checker) checkJobs(s *Sweep) {
	var fs findings
	jc := jobChecks{seen: map[string]*Job{}, argFields: make([]string, len(s.Command)), note: fs.note}
	for a := range jc.argFields {
		jc.argFields[a] = fmt.Sprintf("command[%d]", a)
	}
	rc := s.reach()
	for i := range s.Jobs {
		j := &s.Jobs[i]
		if !c.submitted {
			c.checkJob(s, j, &jc)
		}
		c.fitLadder(rc, j, fs.note)
		c.checkModel(j, fs.note)
	}
	fs.fail(c, len(s.Jobs))
}

// jobChecks is what checkJob keeps from job to job of a sweep: the jobs seen, by
// dupKey; the fields of the command's arguments; where findings are noted.
type jobChecks struct {
	seen      map[string]*Job
	argFields []string
	note      func(field, job, msg string)
	// sections is how long the base config's section at each mapping placeholder's
	// name is, as FormatValue writes it (see renderedAtMost).
	sections map[string]int
}

// renderedAtMost is at most how long the value of the mapping placeholder {name} is
// in job j (see Placeholder), as FormatValue writes it, given that the parameter itself
// is own bytes so written: the base's section there and every parameter set at, under
// or above it, each counted whole, with room for the keys and braces of the path it is
// set at. The plan renders a job's config to measure the value exactly only where this
// is over the limit: rendering the whole config of each of a sweep's 100,000 jobs made
// its checks five times as long.
func (jc *jobChecks) renderedAtMost(s *Sweep, j *Job, name string, own int) int {
	section, ok := jc.sections[name]
	if !ok {
		if s.Config != nil && s.Config.Doc != nil {
			if v, in := s.Config.Doc.Path(name); in {
				section = len(FormatValue(v))
			}
		}
		if jc.sections == nil {
			jc.sections = map[string]int{}
		}
		jc.sections[name] = section
	}
	n := section + own
	for _, k := range j.Params.Keys {
		if strings.HasPrefix(k, name+".") || strings.HasPrefix(name, k+".") {
			n += len(FormatValue(j.Params.Vals[k])) + len(k) + 8*(strings.Count(k, ".")+1)
		}
	}
	return n
}

// checkJob refuses a job that another one of the sweep is already, and one whose
// command or environment name a placeholder its parameters do not fill.
func (c *checker) checkJob(s *Sweep, j *Job, jc *jobChecks) {
	key := string(dupKey(j))
	if prev, dup := jc.seen[key]; dup {
		c.failJob(j.origin, j.ID, "the same job as %s (%s, from %s): remove one, or make them differ (e.g. by seed)", prev.ID, prev.Name, prev.origin)
	}
	jc.seen[key] = j

	// A mapping is filled in as the launcher fills it (see Placeholder): the section
	// the rendered config holds, the base's keys merged in, rendered only for a job
	// whose command or environment names one that could be too long to pass.
	var rendered *Map
	lookup := func(name string) (string, bool) {
		if isBuiltin(name) {
			return "", true
		}
		v, ok := j.Params.Param(name)
		text := FormatValue(v)
		if _, mapping := v.(*Map); mapping && jc.renderedAtMost(s, j, name, len(text)+len(name)+8) > MaxArgLen {
			if rendered == nil {
				rendered = s.Config.Render(j.Params)
			}
			v, ok = Placeholder(j.Params, rendered, name)
			text = FormatValue(v)
		}
		return text, ok
	}
	// what is where an expansion goes, and prefix what comes before it there ("NAME="
	// of an environment variable).
	check := func(field, tmpl, what, prefix string) {
		out, err := Expand(tmpl, lookup)
		if mp, ok := err.(*missingPlaceholder); ok {
			jc.note(field, j.ID, fmt.Sprintf("no parameter fills {%s}%s: add %s to params or the matrix, or write {{%s}} for literal braces",
				mp.name, Suggest(mp.name, append(j.Params.Keys, Builtins...)), mp.name, mp.name))
		}
		// A parameter's value put in the command or the environment.
		if err == nil && strings.ContainsRune(out, 0) && !strings.ContainsRune(tmpl, 0) {
			jc.note(field, j.ID, "a parameter's value put in it "+nulProblem)
		}
		// gpuq's own values ({config}'s path) are not known here, and count as
		// nothing: the launcher checks again with them filled in.
		if err == nil && len(prefix)+len(out) > MaxArgLen {
			filled := "with its placeholders filled in "
			if len(prefix)+len(tmpl) > MaxArgLen {
				filled = ""
			}
			jc.note(field, j.ID, filled+"it is "+ArgTooLong(what))
		}
	}
	for a, arg := range s.Command {
		check(jc.argFields[a], arg, "argument", "")
	}
	for _, e := range s.Env {
		check("env."+e.Name, e.Value, "environment variable", e.Name+"=")
	}
}
