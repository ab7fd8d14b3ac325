package plans

import (
	"slices"
	"strings"
)

// After: what a job waits for before it may start, as pueue's --after and Slurm's
// --dependency=afterok: sweeps or jobs that must all have succeeded. A sweep's `after:`
// applies to each of its jobs, a job's own (in its matrix point or jobs entry) adds to
// it, and so does gpuq submit --after. The names are checked here (their form, the
// sweep's own jobs); that the others exist is the daemon's to check, which holds them.

// afterNames reads a list of sweep names or job ids (a single one may be written
// without the list).
func (c *checker) afterNames(field, job string, v any) []string {
	list, ok := v.([]any)
	if s, one := v.(string); one {
		list, ok = []any{s}, true
	}
	if !ok {
		c.failJob(field, job, "write a list of sweep names or job ids, e.g. after: [pretrain, prep.3]")
		return nil
	}
	var out []string
	for _, e := range list {
		name, ok := e.(string)
		if !ok || !nameRe().MatchString(name) {
			c.failJob(field, job, "%s is not a sweep name or job id: write names of lowercase letters, digits, '.', '_' and '-', e.g. pretrain or prep.3", FormatValue(e))
			continue
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

// after is what every job of the sweep waits for: its after key, and the override's
// (gpuq submit --after a,b); given is the override's names alone, as read here.
func (c *checker) after(doc *Map, ov Override) (out, given []string) {
	if v, ok := doc.Get("after"); ok && v != nil {
		out = c.afterNames("after", "", v)
	}
	if ov.Value != "" {
		var list []any
		for _, f := range strings.Split(ov.Value, ",") {
			list = append(list, strings.TrimSpace(f))
		}
		before := len(c.errs)
		given = c.afterNames("after", "", list)
		for _, name := range given {
			if !slices.Contains(out, name) {
				out = append(out, name)
			}
		}
		for _, fe := range c.errs[before:] {
			fe.File, fe.Field = ov.Source, ""
		}
	}
	return out, given
}

// renameOwnAfter makes the jobs of a sweep named anew (gpuq submit --name) wait for
// its own jobs under its new name where they named them under the name its file
// writes (after: [dep.1] in dep.yaml submitted as dep3 waits for dep3.1): a pipeline
// run again under another name runs its stages in order, not after the first run's.
// What the override names (given: gpuq submit --after dep.2) is as written there.
func renameOwnAfter(s *Sweep, written string, given []string) {
	if written == "" || !s.Waits() {
		return
	}
	own := map[string]bool{}
	for _, j := range s.Jobs {
		own[j.ID] = true
	}
	for i := range s.Jobs {
		j := &s.Jobs[i]
		cloned := false
		for k, name := range j.After {
			rest, ok := strings.CutPrefix(name, written+".")
			if renamed := s.Name + "." + rest; ok && own[renamed] && !slices.Contains(given, name) {
				if !cloned { // the list may be shared with the sweep's other jobs
					j.After, cloned = slices.Clone(j.After), true
				}
				j.After[k] = renamed
			}
		}
	}
}

// checkAfter refuses a sweep that would wait for itself: a name that is the sweep's,
// or a cycle among its own jobs.
func (c *checker) checkAfter(s *Sweep) {
	if !s.Waits() { // a map of 100,000 ids spared
		return
	}
	ids := map[string]*Job{}
	for i := range s.Jobs {
		ids[s.Jobs[i].ID] = &s.Jobs[i]
	}
	for _, j := range s.Jobs {
		if slices.Contains(j.After, s.Name) {
			c.failJob(j.field("after"), j.ID, "names its own sweep %s: a job cannot run after itself; name other sweeps, or jobs of this one", s.Name)
			return
		}
	}
	// A depth-first walk of the sweep's own jobs: one met again on its own path closes a
	// cycle.
	const (
		onPath = iota + 1
		done
	)
	mark := map[string]int{}
	var walk func(id string, path []string) bool
	walk = func(id string, path []string) bool {
		switch mark[id] {
		case onPath:
			cycle := append(path[slices.Index(path, id):], id)
			c.failJob(ids[id].field("after"), id, "waits for itself: %s; no job of it could ever start", strings.Join(cycle, " after "))
			return false
		case done:
			return true
		}
		mark[id] = onPath
		for _, next := range ids[id].After {
			if ids[next] != nil && !walk(next, append(path, id)) {
				return false
			}
		}
		mark[id] = done
		return true
	}
	for _, j := range s.Jobs {
		if !walk(j.ID, nil) {
			return
		}
	}
}

// Waits reports whether any of the sweep's jobs waits for something (after).
func (s *Sweep) Waits() bool {
	return slices.ContainsFunc(s.Jobs, func(j Job) bool { return len(j.After) > 0 })
}

// AfterText is what a job waits for, for people: "pretrain and prep.3".
func (j *Job) AfterText() string {
	switch n := len(j.After); n {
	case 0:
		return ""
	case 1:
		return j.After[0]
	default:
		return strings.Join(j.After[:n-1], ", ") + " and " + j.After[n-1]
	}
}
