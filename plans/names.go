package plans

// Names: what people call a job. Its id (gla-e1.7) is the scheduler's; its name is
// the point it stands for, short enough to read in a column of an 80-column terminal
// and unique within its sweep.

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
)

// nameBuiltins are the placeholders a job's name may use beside its parameters: the
// others are an attempt's, and a job is named before it has one.
var nameBuiltins = []string{"sweep"}

// PointText is the job's point written whole: every value that sets it apart in the
// sweep file, key=value, in the order written ("task=glue-sst2,seed=87").
func (j *Job) PointText() string {
	return pointName(j.pointKeys, j.Params, nil, "")
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
			v, ok := j.Params.Param(k)
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

// defaultNames names each job by the values of its point that tell it apart, in the
// order written: of the keys whose value is not the same in every job, those the others
// determine are left out, the last first (an include's sim_activations, set by its
// task), and of the rest a text value stands alone where every job has its key (an
// axis: glue-sst2), anything else after its key (seed=87): glue-sst2,seed=87. Where
// that would name two jobs alike (text alone), every value is written key=value; where
// even that would (they differ in their memory or priority alone), the name ends with
// the job's number. A job whose point sets none of the keys kept is params as written,
// which the others set apart by a parameter (jobs: [{}, {lr: 0.01}]): it is named by
// the values params give those (lr=0.001), as PointOf names its point, so that it is
// not told only by the sweep's name, which names no value. A sweep of one job, or of
// jobs without a point, names them after itself.
func defaultNames(s *Sweep) {
	p := pointsOf(s.Jobs)
	kept := make(map[string]bool, len(p.keys))
	for _, k := range p.keys {
		kept[k] = true
	}
	for i := len(p.keys) - 1; i >= 0; i-- {
		kept[p.keys[i]] = false
		if !p.unique(kept) {
			kept[p.keys[i]] = true
		}
	}
	names := make([]string, len(s.Jobs))
	seen := make(map[string]struct{}, len(s.Jobs))
	var buf []byte
	for _, withKeys := range []bool{false, true} {
		clear(seen)
		for i := range s.Jobs {
			buf = appendPoint(buf[:0], &s.Jobs[i], s.Jobs[i].pointKeys, kept, p.every, withKeys)
			if _, dup := seen[string(buf)]; dup {
				break
			}
			names[i] = string(buf)
			seen[names[i]] = struct{}{}
		}
		if len(seen) == len(s.Jobs) {
			for i := range s.Jobs {
				if names[i] == "" {
					// One job at most: the names are unique. Never as another is named.
					buf = appendPoint(buf[:0], &s.Jobs[i], p.keys, kept, p.every, true)
					if _, dup := seen[string(buf)]; !dup {
						names[i] = string(buf)
					}
				}
				s.Jobs[i].Name = cmp.Or(names[i], s.Name)
			}
			return
		}
	}
	for i := range s.Jobs {
		j := &s.Jobs[i]
		j.Name = fmt.Sprintf("%s#%d", cmp.Or(j.PointText(), s.Name), j.Index)
	}
}

// appendPoint appends j's values of keys (its point's, or those of the others'
// points) under the keys kept, comma-separated, text alone where every job has its key
// unless withKeys; a key j's parameters lack has no value to write.
func appendPoint(b []byte, j *Job, keys []string, kept, every map[string]bool, withKeys bool) []byte {
	first := true
	for _, k := range keys {
		v, ok := j.Params.Vals[k]
		if !kept[k] || !ok {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		if t, text := v.(string); text && t != "" && every[k] && !withKeys {
			b = append(b, shown(t)...)
		} else if m, ok := v.(*Map); ok && m.Len() > 0 {
			// A mapping by its leaves, as the ladder names them: training.batch_size=16.
			leaf := false
			for l, lv := range m.LeafValues() {
				if leaf {
					b = append(b, ',')
				}
				leaf = true
				b = append(append(append(b, shown(k+"."+l)...), '='), shown(FormatValue(lv))...)
			}
		} else {
			b = append(append(append(b, shown(k)...), '='), shown(FormatValue(v))...)
		}
	}
	return b
}

// points are the jobs' points as numbers, for telling which keys tell jobs apart
// without writing a name a key at a time: a sweep may have 100,000 jobs.
type points struct {
	// keys are those whose value is not the same in every job (a job without the key
	// differs), in the order the jobs first have them; every says which keys every job
	// has; ids[i][j] numbers job j's value under keys[i] (0: it has none).
	keys  []string
	every map[string]bool
	ids   [][]uint32
}

func pointsOf(jobs []Job) points {
	p := points{every: map[string]bool{}}
	var all []string
	index := map[string]int{}
	var byValue []map[string]uint32
	var ids [][]uint32
	var key []byte
	for j, job := range jobs {
		for _, k := range job.pointKeys {
			i, ok := index[k]
			if !ok {
				i = len(all)
				index[k], all = i, append(all, k)
				byValue, ids = append(byValue, map[string]uint32{}), append(ids, make([]uint32, len(jobs)))
			}
			key = appendScalarKey(key[:0], job.Params.Vals[k])
			id, ok := byValue[i][string(key)]
			if !ok {
				id = uint32(len(byValue[i]) + 1)
				byValue[i][string(key)] = id
			}
			ids[i][j] = id
		}
	}
	for i, k := range all {
		has := !slices.Contains(ids[i], 0)
		p.every[k] = has
		if len(jobs) > 1 && (len(byValue[i]) > 1 || !has) {
			p.keys, p.ids = append(p.keys, k), append(p.ids, ids[i])
		}
	}
	return p
}

// unique reports whether the keys kept tell every job from every other.
func (p points) unique(kept map[string]bool) bool {
	n := 0
	if len(p.ids) > 0 {
		n = len(p.ids[0])
	}
	seen := make(map[string]bool, n)
	buf := make([]byte, 0, 4*len(p.keys))
	for j := range n {
		buf = buf[:0]
		for i, k := range p.keys {
			if kept[k] {
				buf = binary.AppendUvarint(buf, uint64(p.ids[i][j]))
			}
		}
		if seen[string(buf)] {
			return false
		}
		seen[string(buf)] = true
	}
	return true
}

// appendScalarKey appends what tells values apart as valueKey does (87 and "87"
// differ, 1e-4 is 0.0001), cheaply for the scalars that points mostly hold.
func appendScalarKey(b []byte, v any) []byte {
	switch t := v.(type) {
	case string:
		return append(append(b, 's'), t...)
	case int64:
		return strconv.AppendInt(append(b, 'i'), t, 10)
	case float64:
		return append(append(b, 'f'), formatFloat(t)...)
	case Float:
		return append(append(b, 'f'), formatFloat(t.Value)...)
	case bool:
		return strconv.AppendBool(append(b, 'b'), t)
	}
	return append(append(b, 'v'), valueKey(v)...)
}
