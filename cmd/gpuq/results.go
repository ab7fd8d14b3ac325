package main

import (
	"cmp"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpuq/gpuq/cmd/gpuq/ranking"
	"github.com/gpuq/gpuq/cmd/gpuq/report"
	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
)

type resultsOptions struct {
	io       ioStreams
	settings *settings
	source   string
	metric   string
	max, min bool
	by       []string
	json     bool
	csv      bool
}

func newResultsCmd(io ioStreams, st *settings) *cobra.Command {
	opts := &resultsOptions{io: io, settings: st}
	cmd := &cobra.Command{
		Use:   "results SWEEP|SUMMARY.json|- [--metric M] [--max|--min] [--by PARAM]",
		Short: "Rank a sweep's points by a training metric, each point's seeds aggregated",
		Long: `Rank a sweep's points by what their trainers reported (their metrics files, or the
log dicts and progress bars of their output: see the README's "What the sweep found"):
one row per point, its seeds (its jobs that differ only in the parameters the sweep's
seeds key names, by default its shape_ignores) aggregated as mean ± standard deviation
over n, by their final value and their best. Points are ranked by the final mean, better first; points stopped early after
those that were not, as their readings are from earlier steps (each seed's at the rung
early stopping judged its point at); points whose seeds
all failed or were cancelled last of those, whatever they reported before they ended.
A seed's values are its latest attempt's: one queued to run again (gpuq retry, the
next rung after an out-of-memory end, a timeout's retry) counts by nothing until its
next attempt reports, as its trainer starts again from its first step (SEEDS reads
"1 of 2", JOBS "1 queued").

--metric defaults to the sweep's early_stop metric, else the one the most jobs
reported; --min or --max says which way is better (default: early_stop's mode, else
lower for a loss, an error or a perplexity, higher for anything else). --by task ranks
each task's points apart (default: early_stop's within, the groups it judged apart, as
the report ranks them). The sweep is that of a gpuq run running it or the daemon's (by
name), else what the gpuq run of it that ended last left as it ended, or the summary
gpuq run --json wrote (a file, or - for standard input).

--json prints {"sweep","metric","mode","by","points":[...]}; --csv one row per point,
with how many of its seeds were stopped early and how many failed or were cancelled,
and its parameters as columns, for a notebook.

Exit status: 0 ranked, 1 the daemon did not answer, 2 bad input (a sweep that nothing
here has, with or without a daemon or its state; no job reported the metric).`,
		Example: `  gpuq results gla-e1
  gpuq results gla-e1 --metric eval_accuracy --max --by task
  gpuq run sweep.yaml --json > s.json && gpuq results s.json --csv > results.csv`,
		Args: exactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			opts.source = args[0]
			return runResults(opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.metric, "metric", "", "the metric to rank by (default: early_stop's, else the one most jobs reported)")
	f.BoolVar(&opts.max, "max", false, "higher is better")
	f.BoolVar(&opts.min, "min", false, "lower is better")
	f.StringSliceVar(&opts.by, "by", nil, "rank the points of each value of these parameters apart, e.g. --by task (default: early_stop's within)")
	f.BoolVar(&opts.json, "json", false, "print JSON")
	f.BoolVar(&opts.csv, "csv", false, "print CSV, a row per point")
	return cmd
}

// Results is what gpuq results --json prints.
type Results struct {
	Sweep  string        `json:"sweep"`
	Metric string        `json:"metric"`
	Mode   plans.Mode    `json:"mode"`
	By     []string      `json:"by"`
	Points []ranking.Row `json:"points"`
}

func runResults(opts *resultsOptions) error {
	switch {
	case opts.max && opts.min:
		return badInput("--max and --min: give one, the way the metric gets better")
	case opts.json && opts.csv:
		return badInput("--json and --csv: give one")
	}
	sum, err := resultsSummary(opts)
	if err != nil {
		return err
	}
	if err := byKnown(sum, opts.by); err != nil {
		return err
	}
	by := opts.by
	if len(by) == 0 {
		by = withinOf(sum)
	}
	jobs := rankingJobs(sum, by)
	metric := cmp.Or(opts.metric, ranking.DefaultMetric(jobs, earlyMetric(sum)))
	if err := reported(sum.Sweep, jobs, metric); err != nil {
		return err
	}
	mode := modeOf(sum, metric)
	switch {
	case opts.max:
		mode = plans.Max
	case opts.min:
		mode = plans.Min
	}
	res := Results{Sweep: sum.Sweep, Metric: metric, Mode: mode, By: append([]string{}, by...), Points: ranking.Rank(jobs, metric, mode)}
	switch {
	case opts.json:
		return writeJSON(opts.io.Out, res)
	case opts.csv:
		return writeResultsCSV(opts.io.Out, res)
	}
	printResultsTable(opts.io.Out, res, opts.io.width())
	return nil
}

// resultsSummary reads the sweep: by name (see readSweep), or a summary file.
func resultsSummary(opts *resultsOptions) (api.SweepSummary, error) {
	if isSummary(opts.source) {
		return readSummary(opts.source, opts.io.In)
	}
	read, err := opts.settings.readSweep("results", opts.source)
	return read.sum, err
}

// sweepNowhere is the error of gpuq results or report (verb) of a sweep by name that
// nothing they read has (err says what they read), which says where a gpuq run's
// sweep is: the researcher who ran one and asks for what it found wants that, not a
// daemon started (it would run the sweep again). Both read a gpuq run's sweep while it
// runs, and what it left as it ended.
//
// A sweep nobody has is a request that does not apply, exit 2 as gpuq status's of an
// unknown sweep is, and reads alike whatever the state directory holds: a daemon's
// state, gpuq runs of other sweeps, what ended runs left, or nothing at all (no daemon
// is needed to read a gpuq run's). A state that cannot be read is no answer, and is
// left to fail as it does (exit 1).
func sweepNowhere(verb, source string, err error) error {
	unknown := func(hint, why string) error {
		return sweepRefused{scheduler.Refused(fmt.Sprintf("%s is no file here, and no sweep %q%s%s, nor did a gpuq run of it leave its jobs there as it ended (one killed leaves none): "+
			"a gpuq run's sweep is read from it while it runs, and once it has ended from what it left, "+
			"or from the summary its --json printed (gpuq run SWEEP.yaml --json > s.json; gpuq %s s.json)", source, source, hint, why, verb)),
			scheduler.UnknownSweep{Name: source, Hint: hint}}
	}
	var notRun noRunOf
	var known scheduler.UnknownSweep
	var ended endedRunOf
	switch {
	case errors.As(err, &known): // gpuq status lists the daemon's sweeps: not the one asked for
		return unknown(known.Hint, "")
	case errors.As(err, &ended): // what that run left cannot be read (said above)
		return unknown("", ": neither a gpuq run of it nor a gpuq daemon runs on "+ended.dir)
	case errors.As(err, &notRun):
		// No daemon answers, and none left a state to read (one that cannot be read
		// is no answer).
		runs := ""
		if len(notRun.runs) > 0 {
			runs = " (the gpuq runs there: " + api.RunsText(notRun.runs) + ")"
		}
		return unknown("", ": neither a gpuq run of it nor a gpuq daemon runs on "+notRun.dir+runs)
	}
	return err
}

// sweepRefused is a refusal in its own words of a sweep that nothing has, and as what
// it is (see whereCleaned).
type sweepRefused struct {
	scheduler.Refused
	unknown scheduler.UnknownSweep
}

func (r sweepRefused) Unwrap() []error { return []error{r.Refused, r.unknown} }

// rankingJobs are a summary's jobs as ranking takes them: each metric as its current
// attempt reported it (see current), grouped by the values of by. A job stopped early
// ends at the reading early stopping judged it by (see judgedEnd).
func rankingJobs(sum api.SweepSummary, by []string) []ranking.Job {
	out := make([]ranking.Job, 0, len(sum.Jobs))
	for _, j := range sum.Jobs {
		rj := ranking.Job{ID: j.ID, Name: j.Name, Point: cmp.Or(j.SeedOf, j.Name), Group: groupOf(j.Params, by), State: j.State,
			Params: j.Params, Metrics: map[string]ranking.Curve{}}
		if a := current(j); a != nil {
			for _, m := range a.Metrics {
				// A final reading that was no number is NaN, the worst, not its last finite one.
				last := m.Latest()
				c := ranking.Curve{Last: ranking.Point{Step: last.Step, Value: last.Value}, Min: m.Min, Max: m.Max}
				for _, p := range m.Curve {
					c.Points = append(c.Points, ranking.Point{Step: p.Step, Value: p.Value})
				}
				rj.Metrics[m.Name] = c
			}
		}
		if es := j.EarlyStop; es != nil && es.StoppedAt > 0 {
			c, ok := rj.Metrics[es.Metric]
			if _, judged := es.StoppedReading(); ok || judged {
				rj.Metrics[es.Metric] = judgedEnd(c, es)
			}
		}
		out = append(out, rj)
	}
	return out
}

// current is the attempt whose readings are a job's result: its latest, the one it
// runs or the one it ended with; none while it waits to run again (the next rung
// after an out-of-memory end, a timeout's retry, gpuq retry), as gpuq status shows no
// card or peak of an attempt that is over. Its next attempt's trainer starts again
// from its first step, so what an earlier one read is no result of the run to come:
// averaged with its point's other seeds, it would pass for one. Neither is an
// earlier attempt's reading of a metric the latest has not reported (yet).
func current(j api.JobSummary) *api.AttemptSummary {
	if len(j.Attempts) == 0 || waiting(j.State) {
		return nil
	}
	return &j.Attempts[len(j.Attempts)-1]
}

// judgedEnd is the curve of a job stopped early as what the sweep found of it: up to
// its first reading at or past the rung its point was stopped at, which is its final
// value, and its best among those readings (the curve's: the API keeps up to 32 of
// them). The readings its trainer made after, as it was being stopped, are no part of
// what early stopping judged, and would draw its end (and compare its final value) at
// a step the points that ran on were not judged at. That first reading is its rung's
// (es.Rungs) where the curve left it out, or where the job reached the rung itself;
// a seed stopped with its point before it did has its rung reading from the last
// readings it left, later, and its curve has the first. A job whose latest attempt
// had reported nothing when it was stopped (its trainer started again after an
// out-of-memory end) ends at its rung reading, which outlives its attempts. A job
// that had not reached the rung keeps its curve whole.
func judgedEnd(c ranking.Curve, es *api.Judged) ranking.Curve {
	var at *ranking.Point
	if i := slices.IndexFunc(c.Points, func(p ranking.Point) bool { return p.Step >= es.StoppedAt }); i >= 0 {
		at = &c.Points[i]
	}
	if r, ok := es.StoppedReading(); ok && (at == nil || r.Step < at.Step) {
		at = &ranking.Point{Step: r.Step, Value: r.Value}
	}
	if at == nil {
		return c
	}
	return endAt(c, *at)
}

// endAt is curve c ending at its reading at.
func endAt(c ranking.Curve, at ranking.Point) ranking.Curve {
	n := 0
	for n < len(c.Points) && c.Points[n].Step < at.Step {
		n++
	}
	c.Points = append(c.Points[:n:n], at)
	c.Last = at
	c.Min, c.Max = math.NaN(), math.NaN()
	for _, p := range c.Points {
		switch {
		case !plans.Finite(p.Value):
		case math.IsNaN(c.Min):
			c.Min, c.Max = p.Value, p.Value
		default:
			c.Min, c.Max = min(c.Min, p.Value), max(c.Max, p.Value)
		}
	}
	return c
}

// groupOf names a job's group by the values of the parameters by: "task=sst2".
// byKnown refuses a --by parameter no job of the sweep has: every point would be
// grouped under it alike, as if it had no value.
func byKnown(sum api.SweepSummary, by []string) error {
	var keys []string
	for _, j := range sum.Jobs {
		if j.Params != nil {
			for _, k := range j.Params.Keys {
				if !slices.Contains(keys, k) {
					keys = append(keys, k)
				}
			}
		}
	}
	for _, k := range by {
		if !slices.Contains(keys, k) {
			return badInput("--by: no job of %s has a parameter %q%s", sum.Sweep, k, plans.Suggest(k, keys))
		}
	}
	return nil
}

func groupOf(params *plans.Map, by []string) string {
	parts := make([]string, 0, len(by))
	for _, k := range by {
		v, _ := params.Get(k)
		parts = append(parts, k+"="+plans.FormatValue(v))
	}
	return strings.Join(parts, ",")
}

// withinOf is the sweep's early_stop.within, as its jobs' groups tell it: the points
// early stopping judged apart (each task's learning rates) are ranked apart, as the
// report ranks them, not one task's loss against another's. None where the sweep has
// no within, or its groups cannot be read back as the values of its parameters.
func withinOf(sum api.SweepSummary) []string {
	var keys []string
	for _, j := range sum.Jobs {
		if j.EarlyStop == nil {
			continue
		}
		if keys == nil {
			if j.EarlyStop.Group == "" {
				return nil
			}
			for _, part := range strings.Split(j.EarlyStop.Group, ",") {
				k, _, _ := strings.Cut(part, "=")
				keys = append(keys, k)
			}
		}
		if j.Params == nil || groupOf(j.Params, keys) != j.EarlyStop.Group {
			return nil
		}
	}
	return keys
}

// earlyMetric is the sweep's early_stop metric, as its jobs tell it; "" for none.
func earlyMetric(sum api.SweepSummary) string {
	for _, j := range sum.Jobs {
		if j.EarlyStop != nil {
			return j.EarlyStop.Metric
		}
	}
	return ""
}

// modeOf is which way a metric gets better: as the sweep's early_stop says, for its
// metric, else as its name says.
func modeOf(sum api.SweepSummary, metric string) plans.Mode {
	for _, j := range sum.Jobs {
		if j.EarlyStop != nil && j.EarlyStop.Metric == metric {
			return j.EarlyStop.Mode
		}
	}
	return ranking.GuessMode(metric)
}

// reported checks that some job reported the metric, and says which metrics they did
// report when none did.
func reported(sweep string, jobs []ranking.Job, metric string) error {
	names := map[string]bool{}
	for _, j := range jobs {
		if _, ok := j.Metrics[metric]; ok {
			return nil
		}
		for n := range j.Metrics {
			names[n] = true
		}
	}
	if len(names) == 0 {
		return badInput("no job of %s has reported a metric: a trainer writes them to the file $GPUQ_METRICS_FILE names, one JSON object a line ({\"step\": 500, \"eval_loss\": 0.91}), or prints Hugging Face's log dicts or a tqdm bar's postfix (see the README's \"What the sweep found\")", sweep)
	}
	known := slices.Sorted(func(yield func(string) bool) {
		for n := range names {
			if !yield(n) {
				return
			}
		}
	})
	return badInput("no job of %s reported %q%s; they reported %s: give one with --metric", sweep, metric, plans.Suggest(metric, known), strings.Join(known, ", "))
}

// printResultsTable prints one row a point, a group's points together. On a terminal
// (width) it fits, a point a line (see resultsFit): a point grouped shows the values
// its group does not (its GROUP says task=sst2); the best values give way (--json and
// --csv have them), then the names lose their keys, their values whole, for the
// seeds' states (JOBS), which are the only sign that a point still runs, its value
// still moving, or was stopped early or failed: a researcher must not read either as
// finished. Narrower (60 columns, 40), the step, the seeds counted and the rank go (the
// rows are in its order) before the states are cut below a few words; then the states
// are shortened, never wrapped onto lines of their own, to "3 st…" if need be, the
// groups' and then the points' text values losing their starts (often the sweep's
// prefix, which they share) and then the names their keys for that much, and are left
// out only where not even that fits; last of all a final deviation loses its end, the
// mean kept whole.
func printResultsTable(w io.Writer, res Results, width int) {
	better := betterText(res.Mode) + " (--max for higher)"
	if res.Mode == plans.Max {
		better = betterText(res.Mode) + " (--min for lower)"
	}
	fmt.Fprintln(w, wrap(fmt.Sprintf("%s ranked by %s, %s; each point's seeds as mean ± std", res.Sweep, res.Metric, better), width, ""))
	fmt.Fprintln(w)
	rows := [][]string{{"GROUP", "RANK", "POINT", "SEEDS", "FINAL", "BEST", "STEP", "JOBS"}}
	for _, r := range res.Points {
		point := r.Point
		if len(res.By) > 0 && width > 0 {
			point = outside(r.Point, r.Group)
		}
		rows = append(rows, []string{r.Group, strconv.Itoa(r.Rank), point, r.SeedsText(), r.Final.Text(), r.Best.Text(), r.StepText(), r.StatesText()})
	}
	l := resultsFit(rows, width, len(res.By) > 0)
	l.print(w, rows)
}

// outside is a point less the values its group names (task=sst2,lr=0.1 in group
// task=sst2: lr=0.1); the point whole where the group names them all.
func outside(point, group string) string {
	in := strings.Split(group, ",")
	var parts []string
	for _, p := range strings.Split(point, ",") {
		if !slices.Contains(in, p) {
			parts = append(parts, p)
		}
	}
	if len(parts) == 0 {
		return point
	}
	return strings.Join(parts, ",")
}

// writeResultsCSV writes a row a point: its group, rank and point, its seeds' final
// and best values, how many were stopped early and how many failed or were
// cancelled, and the parameters that differ between points, a column each.
func writeResultsCSV(w io.Writer, res Results) error {
	swept := sweptParams(res.Points)
	cw := csv.NewWriter(w)
	cw.Write(append([]string{"group", "rank", "point", "seeds", "n", "final_mean", "final_std", "best_mean", "best_std", "step", "from_step", "stopped_early", "failed"}, swept...))
	num := func(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }
	for _, r := range res.Points {
		rec := []string{r.Group, strconv.Itoa(r.Rank), r.Point, strconv.Itoa(len(r.Jobs)), "0", "", "", "", "", "", "", strconv.Itoa(r.Stopped), strconv.Itoa(r.Broken())}
		if r.Final != nil {
			rec[4], rec[5], rec[7] = strconv.Itoa(r.Final.N), num(r.Final.Mean), num(r.Best.Mean)
			rec[9], rec[10] = strconv.FormatInt(r.Step, 10), strconv.FormatInt(*cmp.Or(r.FromStep, &r.Step), 10)
			if r.Final.Std != nil {
				rec[6], rec[8] = num(*r.Final.Std), num(*r.Best.Std)
			}
		}
		for _, k := range swept {
			v, ok := r.Params.Get(k)
			if !ok {
				rec = append(rec, "")
				continue
			}
			rec = append(rec, plans.FormatValue(v))
		}
		cw.Write(rec)
	}
	cw.Flush()
	return cw.Error()
}

// sweptParams are the parameters whose values differ between points, in the order
// they first appear.
func sweptParams(rows []ranking.Row) []string {
	values := map[string]map[string]bool{}
	var order []string
	for _, r := range rows {
		for _, k := range r.Params.Keys {
			if values[k] == nil {
				values[k] = map[string]bool{}
				order = append(order, k)
			}
			values[k][plans.FormatValue(r.Params.Vals[k])] = true
		}
	}
	out := order[:0]
	for _, k := range order {
		if len(values[k]) > 1 {
			out = append(out, k)
		}
	}
	return out
}

// foundOf is what a sweep's trainers reported, ranked as gpuq results ranks it by
// default, for its report: each early_stop group apart; nil when nothing was.
func foundOf(sum api.SweepSummary) *report.Found {
	jobs := rankingJobs(sum, nil)
	var at []int64
	for i, j := range sum.Jobs {
		if j.EarlyStop != nil {
			jobs[i].Group, at = j.EarlyStop.Group, j.EarlyStop.At
		}
	}
	metric := ranking.DefaultMetric(jobs, earlyMetric(sum))
	if metric == "" {
		return nil
	}
	mode := modeOf(sum, metric)
	f := &report.Found{Metric: metric, Mode: mode, Rows: ranking.Rank(jobs, metric, mode), Curves: map[string][]ranking.Point{}, At: at}
	for _, j := range jobs {
		if c, ok := j.Metrics[metric]; ok {
			f.Curves[j.ID] = c.Points
		}
	}
	return f
}
