package plans

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Where selects jobs by their parameters, as gpuq status, logs, cancel, retry, hold
// and release take it (--where task=sst2,seed=87): conditions separated by commas, all
// of which a job must meet; each names a parameter and the values it may have,
// separated by | (seed=87|88). A value matches as the parameter is written in the
// sweep or as a number equal to it (lr=0.0001 matches 1e-4); text matches exactly.
type Where []Condition

// Condition is one key=value|value of a Where.
type Condition struct {
	Key    string
	Values []string
}

// ParseWhere reads a selection such as "task=sst2,seed=87|88"; "" selects every job.
func ParseWhere(s string) (Where, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var w Where
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(part, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("%q is not key=value: write e.g. task=sst2,seed=87 (a value may list others with |: seed=87|88)", part)
		}
		w = append(w, Condition{Key: k, Values: strings.Split(v, "|")})
	}
	return w, nil
}

// String writes the selection as ParseWhere reads it.
func (w Where) String() string {
	parts := make([]string, len(w))
	for i, c := range w {
		parts[i] = c.Key + "=" + strings.Join(c.Values, "|")
	}
	return strings.Join(parts, ",")
}

// Matches reports whether a job with these parameters meets every condition.
func (w Where) Matches(params *Map) bool {
	for _, c := range w {
		v, ok := params.Get(c.Key)
		if !ok || !slices.ContainsFunc(c.Values, func(want string) bool { return valueIs(v, want) }) {
			return false
		}
	}
	return true
}

// valueIs reports whether a parameter's value is the one written as want.
func valueIs(v any, want string) bool {
	if FormatValue(v) == want {
		return true
	}
	f, isNumber := Number(v)
	w, err := strconv.ParseFloat(strings.TrimSpace(want), 64)
	return isNumber && err == nil && f == w
}

// Unknown is an error naming the first key of w that none of keys is (the parameters
// of the jobs it selects among), with the one it probably meant; nil when there is none.
func (w Where) Unknown(keys []string) error {
	for _, c := range w {
		if !slices.Contains(keys, c.Key) {
			return fmt.Errorf(noParameter+"%q%s", c.Key, Suggest(c.Key, keys))
		}
	}
	return nil
}

// noParameter begins Unknown's error.
const noParameter = "no job has a parameter "

// UnknownText reports whether an error's text is Unknown's: of jobs that lack a key
// of a Where, rather than of values none of them has (Unmet's). Where each of several
// holders of jobs refuses one Where, the second says more.
func UnknownText(text string) bool { return strings.HasPrefix(text, noParameter) }

// Unmet is an error naming what of w none of these jobs (by their parameters) meets:
// the first condition that none meets alone, with the values its key has among them,
// else w as a whole; nil where one of them meets w. A value misspelt, as a key, must
// not read as "no job to change".
func (w Where) Unmet(params []*Map) error {
	if len(w) == 0 || slices.ContainsFunc(params, w.Matches) {
		return nil
	}
	for _, c := range w {
		if slices.ContainsFunc(params, Where{c}.Matches) {
			continue
		}
		var values []string
		for _, p := range params {
			if v, ok := p.Get(c.Key); ok && !slices.Contains(values, FormatValue(v)) {
				values = append(values, FormatValue(v))
			}
		}
		slices.Sort(values)
		const shown = 8
		if len(values) > shown {
			values = append(values[:shown], "…")
		}
		return fmt.Errorf("no job has %s (its %s: %s)", Where{c}, c.Key, strings.Join(values, ", "))
	}
	return fmt.Errorf("no job has %s together", w)
}
