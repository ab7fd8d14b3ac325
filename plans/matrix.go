package plans

import (
	"cmp"
	"fmt"
	"math/big"
	"slices"
	"strings"
)

// maxJobs is the most jobs a sweep may have: more than one machine runs in months,
// while a matrix of a few short axes can ask for billions.
const maxJobs = 100_000

// point is one job's distinguishing values before they are split into parameters and
// job settings, with where it came from for error messages.
type point struct {
	vals   *Map
	origin string // "matrix", "matrix.include[0]", "jobs[2]"
	// from names the include entry that added a key to a combination of the matrix.
	from map[string]string
}

// field names where key of the point was written: "matrix.include[1].memory".
func (p point) field(key string) string {
	return cmp.Or(p.from[key], p.origin) + "." + key
}

// expandMatrix expands a matrix the way GitHub Actions does: the cartesian product of
// the axes (first axis slowest), minus every combination that matches an exclude entry
// on all its keys; then each include entry is added to every combination whose original
// axis values it matches (its other keys are added, never overwriting an axis), and
// becomes a combination of its own when it matches none.
func expandMatrix(m *Map, c *checker) []point {
	var axes []string
	for _, k := range m.Keys {
		if k == "include" || k == "exclude" {
			continue
		}
		vals, ok := m.Vals[k].([]any)
		switch {
		case !ok:
			c.fail("matrix."+k, "an axis is a list of values, e.g. %s: [1, 2, 3]; a single value belongs under params", k)
		case len(vals) == 0:
			c.fail("matrix."+k, "the axis is empty, so the matrix has no job: give it at least one value or remove it")
		case !c.submitted && misspeltEntries(k, vals) != "": // a sweep a daemon took before expands as it did
			c.fail("matrix."+k, "did you mean %s? As written, it is an axis whose values are mappings, each job's parameter %s one of them: rename it if that is what you meant",
				misspeltEntries(k, vals), k)
		default:
			axes = append(axes, k)
		}
	}
	include := matrixEntries(m, "include", c)
	exclude := matrixEntries(m, "exclude", c)
	if len(axes) == 0 && len(include) == 0 {
		if m.Len() == 0 || len(c.errs) == 0 {
			c.fail("matrix", "the matrix is empty: give at least one axis, e.g. seed: [1, 2, 3]")
		}
		return nil
	}

	if !c.matrixSize(m, axes) {
		return nil
	}
	combos := []*Map{NewMap()}
	for _, ax := range axes {
		var next []*Map
		for _, base := range combos {
			for _, v := range m.Vals[ax].([]any) {
				cm := base.cloneFor(1)
				cm.Set(ax, v)
				next = append(next, cm)
			}
		}
		combos = next
	}
	if len(axes) == 0 {
		combos = nil
	}

	isAxis := map[string]bool{}
	for _, a := range axes {
		isAxis[a] = true
	}
	for i, ex := range exclude {
		for _, k := range ex.Keys {
			if !isAxis[k] {
				c.fail(fmt.Sprintf("matrix.exclude[%d].%s", i, k), "%q is not an axis of the matrix, so this entry excludes nothing%s", k, Suggest(k, axes))
			} else if vals := m.Vals[k].([]any); !slices.ContainsFunc(vals, func(v any) bool { return valueKey(v) == valueKey(ex.Vals[k]) }) {
				// A value misspelt, or of another sweep's axis: the jobs meant to be left
				// out would run.
				c.warn(fmt.Sprintf("%s: matrix.exclude[%d].%s: no job has %s=%s (the axis's values: %s), so this entry excludes nothing",
					c.file, i, k, k, FormatValue(ex.Vals[k]), formatValues(vals)))
			}
		}
	}
	kept := combos[:0]
	for _, cm := range combos {
		if !matchesAny(cm, exclude) {
			kept = append(kept, cm)
		}
	}
	if len(combos) > 0 && len(kept) == 0 && len(include) == 0 {
		c.fail("matrix.exclude", "every combination is excluded, so the matrix has no job")
	}
	combos = kept

	points := make([]point, len(combos))
	for i, cm := range combos {
		points[i] = point{vals: cm, origin: "matrix", from: map[string]string{}}
	}
	for i, in := range include {
		c.nearAxes(i, in, axes)
		matched := false
		for _, p := range points[:len(combos)] {
			if matchesOn(p.vals, in, isAxis) {
				matched = true
				for _, k := range in.Keys {
					if !isAxis[k] {
						p.vals.Set(k, in.Vals[k])
						p.from[k] = fmt.Sprintf("matrix.include[%d]", i)
					}
				}
			}
		}
		if !matched {
			points = append(points, point{vals: in.Clone(), origin: fmt.Sprintf("matrix.include[%d]", i)})
		}
	}
	return points
}

// formatValues writes an axis's values, at most eight of them.
func formatValues(vals []any) string {
	const shown = 8
	out := make([]string, 0, min(len(vals), shown+1))
	for i, v := range vals {
		if i == shown {
			out = append(out, "…")
			break
		}
		out = append(out, FormatValue(v))
	}
	return strings.Join(out, ", ")
}

// misspeltEntries is include or exclude where an axis named k, of mappings alone, is
// one of them misspelt (exlude: [{lr: 0.1}]); "" otherwise.
func misspeltEntries(k string, vals []any) string {
	for _, v := range vals {
		if _, isMap := v.(*Map); !isMap {
			return ""
		}
	}
	if strings.EqualFold(k, "include") || strings.EqualFold(k, "exclude") {
		return ""
	}
	return Nearest(k, []string{"exclude", "include"})
}

// nearAxes warns of a key of include entry i that is no axis nor a job's setting but is
// probably a misspelt one the entry lacks ({tsak: mrpc}, {memroy: 20GiB}): it would be
// taken as a parameter.
func (c *checker) nearAxes(i int, in *Map, axes []string) {
	lacks := slices.DeleteFunc(slices.Concat(axes, jobKeys), func(a string) bool { _, has := in.Get(a); return has })
	for _, k := range in.Keys {
		if slices.Contains(axes, k) || slices.Contains(jobKeys, k) {
			continue
		}
		if hint := Suggest(k, lacks); hint != "" {
			c.warn(fmt.Sprintf("%s: matrix.include[%d].%s: %q is not an axis of the matrix nor a job's setting, so it is taken as a parameter%s", c.file, i, k, k, hint))
		}
	}
}

// matrixSize counts the matrix's combinations before they are expanded, and refuses
// more than maxJobs.
func (c *checker) matrixSize(m *Map, axes []string) bool {
	n := big.NewInt(1)
	sizes := make([]string, len(axes))
	for i, ax := range axes {
		l := len(m.Vals[ax].([]any))
		n.Mul(n, big.NewInt(int64(l)))
		sizes[i] = fmt.Sprintf("%s: %d", ax, l)
	}
	if n.IsInt64() && n.Int64() <= maxJobs {
		return true
	}
	c.fail("matrix", "%s = %s combinations, more than the %d jobs a sweep may have: narrow an axis or split the sweep",
		strings.Join(sizes, " × "), n, maxJobs)
	return false
}

func matrixEntries(m *Map, key string, c *checker) []*Map {
	raw, ok := m.Get(key)
	if !ok {
		return nil
	}
	list, ok := raw.([]any)
	if !ok {
		c.fail("matrix."+key, "write a list of mappings, e.g. %s: [{task: sst2, seed: 1}]", key)
		return nil
	}
	var out []*Map
	for i, e := range list {
		em, ok := e.(*Map)
		if !ok || em.Len() == 0 {
			c.fail(fmt.Sprintf("matrix.%s[%d]", key, i), "write a mapping of axis values, e.g. {task: sst2, seed: 1}")
			continue
		}
		out = append(out, em)
	}
	return out
}

// matchesOn reports whether cm agrees with every entry key that is an axis.
func matchesOn(cm, entry *Map, isAxis map[string]bool) bool {
	for _, k := range entry.Keys {
		if !isAxis[k] {
			continue
		}
		if v, ok := cm.Get(k); !ok || valueKey(v) != valueKey(entry.Vals[k]) {
			return false
		}
	}
	return true
}

func matchesAny(cm *Map, entries []*Map) bool {
	for _, e := range entries {
		all := true
		for _, k := range e.Keys {
			if v, ok := cm.Get(k); !ok || valueKey(v) != valueKey(e.Vals[k]) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}
