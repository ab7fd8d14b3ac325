package scheduler

// Refusals: a request that cannot be done as asked. Those of a job or sweep that does
// not exist say what was probably meant: a sweep's name where a job is asked for (gpuq
// logs gla-e1), a job's where a sweep is, a misspelt sweep, a job past a sweep's last.

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gpuq/gpuq/plans"
)

// Refused is a request that cannot be done as asked: an unknown job, or one in a state
// the request does not apply to. Nothing was changed.
type Refused string

func (r Refused) Error() string { return string(r) }

// NoJob refuses id, given the ids of every job there is ("<sweep>.<n>").
func NoJob(id string, ids []string) Refused {
	sweeps := sweepsOf(ids)
	if n := sweeps[id]; n > 0 {
		return Refused(fmt.Sprintf("no job %q: that is a sweep, of jobs %s (gpuq status --sweep %s lists them)", id, jobRange(id, n), id))
	}
	sweep, ok := splitID(id)
	if n := sweeps[sweep]; ok && n > 0 {
		return Refused(fmt.Sprintf("no job %q: sweep %s has jobs %s", id, sweep, jobRange(sweep, n)))
	}
	if hint := plans.Suggest(sweep, names(sweeps)); ok && hint != "" {
		return Refused(fmt.Sprintf("no job %q: there is no sweep %s%s", id, sweep, hint))
	}
	return Refused(fmt.Sprintf("no job %q; gpuq status lists them", id))
}

// jobRange names a sweep's jobs, which are numbered from 1.
func jobRange(sweep string, n int) string {
	if n == 1 {
		return sweep + ".1"
	}
	return fmt.Sprintf("%s.1 to %s.%d", sweep, sweep, n)
}

// NoSweep refuses name, given the ids of every job there is: a job's id is refused as
// such, any other name as an UnknownSweep.
func NoSweep(name string, ids []string) error {
	if slices.Contains(ids, name) {
		sweep, _ := splitID(name)
		return Refused(fmt.Sprintf("no sweep %q: %s is a job, of sweep %s", name, name, sweep))
	}
	return UnknownSweep{Name: name, Hint: plans.Suggest(name, names(sweepsOf(ids)))}
}

// UnknownSweep refuses a sweep by a name that none has, as a Refused would (it unwraps
// to one), in a type of its own, which the daemon's error answer carries too
// (api.ErrorAnswer): a client may look for such a sweep elsewhere (gpuq results and
// report name a gpuq run's) without reading the words of the refusal.
type UnknownSweep struct {
	Name string `json:"name"`
	// Hint is the sweep it may mean, " (did you mean "gla-e1"?)", or "".
	Hint string `json:"hint,omitempty"`
}

func (u UnknownSweep) Error() string { return u.Short() + "; gpuq status lists them" }

// Short is the refusal without its pointer to gpuq status.
func (u UnknownSweep) Short() string { return fmt.Sprintf("no sweep %q%s", u.Name, u.Hint) }

func (u UnknownSweep) Unwrap() error { return Refused(u.Error()) }

// sweepsOf counts the jobs of each sweep.
func sweepsOf(ids []string) map[string]int {
	out := map[string]int{}
	for _, id := range ids {
		if sweep, ok := splitID(id); ok {
			out[sweep]++
		}
	}
	return out
}

// splitID takes the sweep out of a job's id, "<sweep>.<n>"; a sweep's name may hold
// dots itself.
func splitID(id string) (sweep string, ok bool) {
	i := strings.LastIndexByte(id, '.')
	if i < 0 {
		return id, false
	}
	if n, err := strconv.Atoi(id[i+1:]); err != nil || n < 1 {
		return id, false
	}
	return id[:i], true
}

func names(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
