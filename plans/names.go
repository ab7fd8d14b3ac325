package plans

// Names: what people call a job. Its id (gla-e1.7) is the scheduler's; its name is
// the point it stands for, short enough to read in a column of an 80-column terminal
// and unique within its sweep.

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// nameBuiltins are the placeholders a job's name may use beside its parameters: the
// others are an attempt's, and a job is named before it has one.
var nameBuiltins = []string{"sweep"}

// PointText is the job's point written whole: every value that sets it apart in the
// sweep file, key=value, in the order written ("task=glue-sst2,seed=87").
func (j *Job) PointText() string {
	parts := make([]string, 0, j.Point.Len())
	for _, k := range j.Point.Keys {
		parts = append(parts, shown(k)+"="+shown(FormatValue(j.Point.Vals[k])))
	}
	return strings.Join(parts, ",")
}

// name gives every job of s its name: the sweep's job_name filled with the job's
// parameters, or by default its point's values that differ between jobs (see
// defaultNames). A job_name that gives two jobs one name is an error: logs and
// selections go by names.
func (c *checker) name(s *Sweep, doc *Map) {
	tmpl := c.str(doc, "job_name", "")
	if tmpl == "" {
		defaultNames(s)
		return
	}
	seen := make(map[string]*Job, len(s.Jobs))
	for i := range s.Jobs {
		j := &s.Jobs[i]
		name, err := Expand(tmpl, func(k string) (string, bool) {
			if k == "sweep" {
				return s.Name, true
			}
			v, ok := j.Params.Get(k)
			return shown(FormatValue(v)), ok
		})
		if mp, ok := err.(*missingPlaceholder); ok {
			c.fail("job_name", "no parameter fills {%s}%s: a job's name takes its parameters and {sweep}",
				mp.name, Suggest(mp.name, append(slices.Clone(j.Params.Keys), nameBuiltins...)))
			return
		} else if err != nil {
			c.fail("job_name", "%v", err)
			return
		}
		if prev, dup := seen[name]; dup {
			c.fail("job_name", "%q names both %s (%s) and %s (%s): add a parameter that tells them apart, e.g. {seed}",
				name, prev.ID, prev.PointText(), j.ID, j.PointText())
			return
		}
		seen[name], j.Name = j, name
	}
}

// defaultNames names each job by the values of its point that are not the same in
// every job, in the order written: a text value alone, as it names itself (glue-sst2),
// a number or a boolean after its key (seed=87), so glue-sst2,seed=87. Where two jobs
// would share a name so, every value is written key=value; where they still would
// (they differ in their memory or priority alone), the name ends with the job's
// number. A sweep of one job, or of jobs without a point, names them after itself.
func defaultNames(s *Sweep) {
	varies := varyingKeys(s.Jobs)
	short := func(j *Job) string {
		var parts []string
		for _, k := range j.Point.Keys {
			if !varies[k] {
				continue
			}
			v := j.Point.Vals[k]
			if t, text := v.(string); text && t != "" {
				parts = append(parts, shown(t))
			} else {
				parts = append(parts, shown(k)+"="+shown(FormatValue(v)))
			}
		}
		return strings.Join(parts, ",")
	}
	for _, name := range []func(*Job) string{short, (*Job).PointText} {
		if unique(s.Jobs, name) {
			for i := range s.Jobs {
				s.Jobs[i].Name = cmp.Or(name(&s.Jobs[i]), s.Name)
			}
			return
		}
	}
	for i := range s.Jobs {
		j := &s.Jobs[i]
		j.Name = fmt.Sprintf("%s#%d", cmp.Or(j.PointText(), s.Name), j.Index)
	}
}

// varyingKeys are the point's keys whose value is not the same in every job (a job
// without the key counts as differing).
func varyingKeys(jobs []Job) map[string]bool {
	out := map[string]bool{}
	if len(jobs) < 2 {
		return out
	}
	first := jobs[0].Point
	for _, j := range jobs {
		for _, k := range j.Point.Keys {
			if v, ok := first.Get(k); !ok || valueKey(v) != valueKey(j.Point.Vals[k]) {
				out[k] = true
			}
		}
		for _, k := range first.Keys {
			if _, ok := j.Point.Get(k); !ok {
				out[k] = true
			}
		}
	}
	return out
}

// unique reports whether name gives every job another name.
func unique(jobs []Job, name func(*Job) string) bool {
	seen := make(map[string]bool, len(jobs))
	for i := range jobs {
		n := name(&jobs[i])
		if seen[n] {
			return false
		}
		seen[n] = true
	}
	return true
}
