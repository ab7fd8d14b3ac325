// Package ranking ranks a sweep's points by a training metric: a point's seeds are
// aggregated (mean ± standard deviation over n), by their final and their best value,
// for gpuq results and gpuq report. It is pure: jobs in, rows out.
package ranking

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/gpuq/gpuq/plans"
)

// Point is a metric's value at a step.
type Point struct {
	Step  int64   `json:"step"`
	Value float64 `json:"value"`
}

// Curve is one metric of a job: as its current attempt reported it (a trainer run
// again after an OOM starts its curve again; a job waiting to run again has none).
type Curve struct {
	Points   []Point
	Last     Point
	Min, Max float64
}

// Job is what ranking needs of a job.
type Job struct {
	ID    string
	Name  string // what people call it: its sweep's job_name filled in, or its default name
	Point string // the point it is a seed of
	Group string // the group it is ranked in ("" for one group)
	State string
	// Params are its parameters, as written.
	Params  *plans.Map
	Metrics map[string]Curve
}

// Stopped is the state of a job stopped early.
const Stopped = "stopped"

// broke says whether a job in state ended without finishing its run: it failed (a
// crash, a loss gone NaN, out of memory at every rung) or was cancelled. What it
// reported before then says little of its point.
func broke(state string) bool { return state == "failed" || state == "cancelled" }

// Text writes a value over seeds for people: "0.912 ± 0.0041", the mean to four
// significant figures and its deviation to two, or the value alone for one seed; "-"
// for none. Trailing zeros are kept: 1.100 beside 1.101 in a column, not 1.1, which
// reads as a value known to a tenth.
func (s *Stat) Text() string {
	if s == nil {
		return "-"
	}
	text := figures(s.Mean, 4)
	if s.Std != nil && !math.IsNaN(s.Mean) {
		text += " ± " + figures(*s.Std, 2)
	}
	return text
}

// figures writes v to n significant figures, its trailing zeros kept (a whole number
// without the point %#g leaves after it).
func figures(v float64, n int) string {
	return strings.TrimSuffix(fmt.Sprintf("%#.*g", n, v), ".")
}

// StatesText counts a point's seeds by state: "2 succeeded, 1 stopped early".
func (r Row) StatesText() string {
	keys := make([]string, 0, len(r.States))
	for k := range r.States {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		label := k
		if k == Stopped {
			label = "stopped early"
		}
		parts[i] = strconv.Itoa(r.States[k]) + " " + label
	}
	return strings.Join(parts, ", ")
}

// Stat is a value over a point's seeds.
type Stat struct {
	Mean float64  `json:"mean"`
	Std  *float64 `json:"std"` // the sample standard deviation; null for one seed
	N    int      `json:"n"`
}

// MarshalJSON writes a mean or deviation that is no number (a seed's loss gone NaN)
// as null, which JSON has, where encoding/json would fail.
func (s Stat) MarshalJSON() ([]byte, error) {
	finite := func(v float64) *float64 {
		if !plans.Finite(v) {
			return nil
		}
		return &v
	}
	out := struct {
		Mean *float64 `json:"mean"`
		Std  *float64 `json:"std"`
		N    int      `json:"n"`
	}{finite(s.Mean), nil, s.N}
	if s.Std != nil {
		out.Std = finite(*s.Std)
	}
	return json.Marshal(out)
}

// Row is one point ranked.
type Row struct {
	Group string `json:"group,omitempty"`
	Rank  int    `json:"rank"`
	Point string `json:"point"`
	// Params are the parameters every seed of the point has alike.
	Params *plans.Map `json:"params"`
	// Jobs are its seeds' ids, Names their names, in the same order.
	Jobs  []string `json:"jobs"`
	Names []string `json:"names"`
	// Final is the seeds' last reading, Best their best; Step the furthest step a seed
	// reported at. They are of the seeds that ran on (neither stopped early, nor
	// failed or cancelled), where any of those reported the metric; else of those
	// stopped early: Cut says so, and that the values are from an earlier step than
	// the others'; else of those that failed or were cancelled: Broke says so. A
	// point none of whose seeds reported the metric has none of them.
	Final *Stat `json:"final"`
	Best  *Stat `json:"best"`
	Step  int64 `json:"step"`
	// FromStep is the earliest step a seed's final reading is from, where the seeds'
	// are from different steps (a sweep still running, a seed run again after an
	// OOM) and their final mean mixes them; nil where they are from one step.
	FromStep *int64 `json:"from_step,omitempty"`
	Cut      bool   `json:"cut,omitempty"`
	Broke    bool   `json:"failed,omitempty"`
	// Of are the seeds, among Jobs, that Final and Best are of: a point's curve is
	// drawn of them alone, so that it says what its values say.
	Of []string `json:"-"`
	// Stopped counts the seeds stopped early; States the seeds by state.
	Stopped int            `json:"stopped_early"`
	States  map[string]int `json:"states"`
}

// Rank ranks the points of each group by a metric: those whose seeds ran on first,
// then those stopped early (Cut, a stopped point's readings are from an earlier
// step), then those whose seeds all failed or were cancelled (Broke: a run that
// crashed may have reported a fine loss before it did), each by its seeds' mean final
// value, better first; a point without the metric last.
// Groups come in the order their first job does.
func Rank(jobs []Job, metric string, mode plans.Mode) []Row {
	var order []string
	byPoint := map[string][]Job{}
	for _, j := range jobs {
		key := j.Group + "\x00" + j.Point
		if _, ok := byPoint[key]; !ok {
			order = append(order, key)
		}
		byPoint[key] = append(byPoint[key], j)
	}
	rows := make([]Row, 0, len(order))
	for _, key := range order {
		rows = append(rows, rowOf(byPoint[key], metric, mode))
	}
	groups := map[string]int{}
	for _, r := range rows {
		if _, ok := groups[r.Group]; !ok {
			groups[r.Group] = len(groups)
		}
	}
	slices.SortStableFunc(rows, func(a, b Row) int {
		return cmp.Or(cmp.Compare(groups[a.Group], groups[b.Group]), ahead(a, b, mode))
	})
	for i := range rows {
		rows[i].Rank = 1
		if i > 0 && rows[i-1].Group == rows[i].Group {
			rows[i].Rank = rows[i-1].Rank + 1
		}
	}
	return rows
}

// ahead orders two rows of a group: -1 when a ranks before b.
func ahead(a, b Row, mode plans.Mode) int {
	switch {
	case (a.Final == nil) != (b.Final == nil):
		return boolOrder(a.Final != nil)
	case a.Final == nil:
		return 0
	case a.evidence() != b.evidence():
		return cmp.Compare(a.evidence(), b.evidence())
	case mode.Better(a.Final.Mean, b.Final.Mean):
		return -1
	case mode.Better(b.Final.Mean, a.Final.Mean):
		return 1
	}
	return 0
}

// SeedsText counts a point's seeds for people: "3", or "2 of 3" where some reported
// nothing its values are of.
func (r Row) SeedsText() string {
	n := 0
	if r.Final != nil {
		n = r.Final.N
	}
	if n < len(r.Jobs) {
		return fmt.Sprintf("%d of %d", n, len(r.Jobs))
	}
	return strconv.Itoa(len(r.Jobs))
}

// Broken counts the seeds that failed or were cancelled.
func (r Row) Broken() int {
	n := 0
	for state, k := range r.States {
		if broke(state) {
			n += k
		}
	}
	return n
}

// evidence is how far a row's values are from its seeds' ends: 0 of seeds that ran
// on, 1 of seeds stopped early, 2 of seeds that failed or were cancelled.
func (r Row) evidence() int {
	switch {
	case r.Broke:
		return 2
	case r.Cut:
		return 1
	}
	return 0
}

func boolOrder(first bool) int {
	if first {
		return -1
	}
	return 1
}

// seedCurve is a seed's curve of the metric ranked by, with the job it is of.
type seedCurve struct {
	job string
	Curve
}

// rowOf aggregates one point's seeds.
func rowOf(seeds []Job, metric string, mode plans.Mode) Row {
	r := Row{Group: seeds[0].Group, Point: seeds[0].Point, Params: common(seeds), States: map[string]int{}}
	// Of the seeds that ran on, that were stopped early, and that failed or were
	// cancelled.
	var ran, cut, broken []seedCurve
	for _, j := range seeds {
		r.Jobs, r.Names = append(r.Jobs, j.ID), append(r.Names, j.Name)
		r.States[j.State]++
		if j.State == Stopped {
			r.Stopped++
		}
		c, ok := j.Metrics[metric]
		sc := seedCurve{j.ID, c}
		switch {
		case !ok:
		case j.State == Stopped:
			cut = append(cut, sc)
		case broke(j.State):
			broken = append(broken, sc)
		default:
			ran = append(ran, sc)
		}
	}
	switch {
	case len(ran) > 0:
	case len(cut) > 0:
		ran, r.Cut = cut, true
	default:
		ran, r.Broke = broken, len(broken) > 0
	}
	var finals, bests []float64
	from := int64(math.MaxInt64)
	for _, sc := range ran {
		c := sc.Curve
		r.Of = append(r.Of, sc.job)
		finals = append(finals, c.Last.Value)
		bests = append(bests, best(c, mode))
		r.Step, from = max(r.Step, c.Last.Step), min(from, c.Last.Step)
	}
	if len(ran) > 0 && from < r.Step {
		r.FromStep = &from
	}
	r.Final, r.Best = stat(finals), stat(bests)
	return r
}

// StepText is the step of the seeds' final readings: "200-1000" where they are from
// different steps; "-" where none was reported. It is the one text of a point's step:
// gpuq results' STEP column, and the report's table and its curves' titles, all write
// it, so that they say the same of the same point (the report's table once wrote Step
// alone, the furthest step, where results wrote a range).
func (r Row) StepText() string {
	switch {
	case r.Final == nil:
		return "-"
	case r.FromStep != nil:
		return fmt.Sprintf("%d-%d", *r.FromStep, r.Step)
	}
	return strconv.FormatInt(r.Step, 10)
}

func best(c Curve, mode plans.Mode) float64 {
	if mode == plans.Max {
		return c.Max
	}
	return c.Min
}

// stat is the mean and sample standard deviation of xs; nil for none.
func stat(xs []float64) *Stat {
	if len(xs) == 0 {
		return nil
	}
	s := &Stat{N: len(xs)}
	for _, x := range xs {
		s.Mean += x
	}
	s.Mean /= float64(len(xs))
	if len(xs) > 1 {
		// Around the first value rather than the mean, which is rounded: seeds that
		// read alike then deviate by exactly nothing, not by 1e-17.
		var sum, ss float64
		for _, x := range xs {
			d := x - xs[0]
			sum += d
			ss += d * d
		}
		sd := math.Sqrt(max(0, ss-sum*sum/float64(len(xs))) / float64(len(xs)-1))
		s.Std = &sd
	}
	return s
}

// common are the parameters all of a point's seeds have alike.
func common(seeds []Job) *plans.Map {
	out := plans.NewMap()
	first := seeds[0].Params
	if first == nil {
		return out
	}
	for _, k := range first.Keys {
		v := plans.FormatValue(first.Vals[k])
		if !slices.ContainsFunc(seeds[1:], func(j Job) bool {
			w, ok := j.Params.Get(k)
			return !ok || plans.FormatValue(w) != v
		}) {
			out.Set(k, first.Vals[k])
		}
	}
	return out
}

// DefaultMetric is the metric to rank by when none is named: early, the sweep's
// early_stop metric, where it has one; else the one the most jobs reported, an eval
// one first among as many, then by name; "" when no job reported any.
func DefaultMetric(jobs []Job, early string) string {
	if early != "" {
		return early
	}
	count := map[string]int{}
	for _, j := range jobs {
		for name := range j.Metrics {
			count[name]++
		}
	}
	var best string
	for name, n := range count {
		switch m := count[best]; {
		case best == "", n > m:
			best = name
		case n == m && isEval(name) != isEval(best):
			if isEval(name) {
				best = name
			}
		case n == m && name < best:
			best = name
		}
	}
	return best
}

func isEval(name string) bool {
	n := strings.ToLower(name)
	return strings.HasPrefix(n, "eval") || strings.HasPrefix(n, "val") || strings.HasPrefix(n, "test")
}

// lowerIsBetter are the words of a metric's name that say lower is better: a word of
// the name is one of them, or holds one of the long ones (valloss, testError).
var (
	lowerIsBetter = []string{"wer", "cer", "mse", "mae", "rmse", "nll", "bpb", "bpc", "ppl", "err", "runtime", "time"}
	lowerInWords  = []string{"loss", "error", "perplexity"}
)

// GuessMode is which way a metric gets better, from its name: a loss, an error or a
// perplexity lower; anything else (an accuracy, a score) higher. It reads the name's
// words (split at anything but a letter or a digit, and where a capital follows a
// small letter), so that a short word inside another is not taken for it: the wer of
// eval_answer_f1, the cer of cancer_auroc.
func GuessMode(name string) plans.Mode {
	for _, w := range words(name) {
		if slices.Contains(lowerIsBetter, w) || slices.ContainsFunc(lowerInWords, func(l string) bool { return strings.Contains(w, l) }) {
			return plans.Min
		}
	}
	return plans.Max
}

// words splits a metric's name into its words, in lower case: eval/valWER is eval,
// val and wer.
func words(name string) []string {
	var out []string
	var w []rune
	prev := rune(0)
	for _, r := range name {
		switch {
		case !unicode.IsLetter(r) && !unicode.IsDigit(r):
			if len(w) > 0 {
				out, w = append(out, string(w)), nil
			}
		case unicode.IsUpper(r) && unicode.IsLower(prev):
			if len(w) > 0 {
				out, w = append(out, string(w)), nil
			}
			w = append(w, unicode.ToLower(r))
		default:
			w = append(w, unicode.ToLower(r))
		}
		prev = r
	}
	if len(w) > 0 {
		out = append(out, string(w))
	}
	return out
}
