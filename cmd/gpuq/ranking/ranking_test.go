package ranking

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/gpuq/gpuq/plans"
)

// job is a seed of a point with its last and best eval_loss (0: none reported).
func job(id, group, point, state string, seed int64, last, lowest float64, step int64) Job {
	p := plans.NewMap()
	p.Set("lr", point)
	p.Set("seed", seed)
	j := Job{ID: id, Point: "lr=" + point, Group: group, State: state, Params: p, Metrics: map[string]Curve{}}
	if last != 0 {
		j.Metrics["eval_loss"] = Curve{Last: Point{step, last}, Min: lowest, Max: 3}
		j.Metrics["loss"] = Curve{Last: Point{step, 1}}
	}
	return j
}

func rowsText(rows []Row) string {
	var b strings.Builder
	for _, r := range rows {
		fmt.Fprintf(&b, "%s#%d %s n=%d", r.Group, r.Rank, r.Point, len(r.Jobs))
		if r.Final != nil {
			fmt.Fprintf(&b, " final %.3f", r.Final.Mean)
			if r.Final.Std != nil {
				fmt.Fprintf(&b, "±%.3f", *r.Final.Std)
			}
			fmt.Fprintf(&b, "/%d best %.3f step %d", r.Final.N, r.Best.Mean, r.Step)
		}
		if r.Stopped > 0 {
			fmt.Fprintf(&b, " stopped %d", r.Stopped)
		}
		if r.Cut {
			b.WriteString(" cut")
		}
		if r.Broke {
			b.WriteString(" broke")
		}
		b.WriteString("\n")
	}
	return b.String()
}

func TestRank(t *testing.T) {
	jobs := []Job{
		job("s.1", "", "0.1", "succeeded", 1, 1.2, 1.1, 100),
		job("s.2", "", "0.1", "succeeded", 2, 1.4, 1.3, 100),
		job("s.3", "", "0.01", "succeeded", 1, 0.9, 0.8, 100),
		job("s.4", "", "0.01", "running", 2, 1.1, 1.0, 60),
		job("s.5", "", "1", Stopped, 1, 0.5, 0.5, 20), // better so far, but stopped early
		job("s.6", "", "1", Stopped, 2, 0, 0, 0),      // stopped before it reported
		job("s.7", "", "10", "failed", 1, 0, 0, 0),    // reported nothing
		// A point stopped after one seed had finished: that seed's values.
		job("s.8", "", "2", "succeeded", 1, 1.05, 1.0, 100),
		job("s.9", "", "2", Stopped, 2, 3, 3, 20),
	}
	want := `#1 lr=0.01 n=2 final 1.000±0.141/2 best 0.900 step 100
#2 lr=2 n=2 final 1.050/1 best 1.000 step 100 stopped 1
#3 lr=0.1 n=2 final 1.300±0.141/2 best 1.200 step 100
#4 lr=1 n=2 final 0.500/1 best 0.500 step 20 stopped 2 cut
#5 lr=10 n=1
`
	rows := Rank(jobs, "eval_loss", plans.Min)
	if got := rowsText(rows); got != want {
		t.Errorf("got\n%swant\n%s", got, want)
	}
	if r := rows[0]; r.States["succeeded"] != 1 || r.States["running"] != 1 || r.Params.Keys[0] != "lr" || len(r.Params.Keys) != 1 {
		t.Errorf("row %+v: the point's common parameters are lr alone", r)
	}
	// Higher is better: the order of the points that ran turns over.
	if got := rowsText(Rank(jobs, "eval_loss", plans.Max)); !strings.HasPrefix(got, "#1 lr=0.1 n=2 final 1.300") {
		t.Errorf("max:\n%s", got)
	}
}

// TestAFailedSeedDoesNotWin: a seed that failed or was cancelled speaks for its point
// only where none of its seeds finished or was stopped early, and such a point ranks
// after those that did, however low the loss it reported before it crashed.
func TestAFailedSeedDoesNotWin(t *testing.T) {
	jobs := []Job{
		job("s.1", "", "-0.3", "failed", 1, 0.37, 0.37, 300), // diverged: a low loss, then a crash
		job("s.2", "", "0.5", "succeeded", 1, 0.9, 0.9, 500),
		job("s.3", "", "1", Stopped, 1, 1.5, 1.5, 100),
		job("s.4", "", "0.1", "cancelled", 1, 0.2, 0.2, 50),
		// One seed finished: its values, not the failed one's.
		job("s.5", "", "0.2", "succeeded", 1, 1.2, 1.1, 500),
		job("s.6", "", "0.2", "failed", 2, 0.1, 0.1, 200),
	}
	want := `#1 lr=0.5 n=1 final 0.900/1 best 0.900 step 500
#2 lr=0.2 n=2 final 1.200/1 best 1.100 step 500
#3 lr=1 n=1 final 1.500/1 best 1.500 step 100 stopped 1 cut
#4 lr=0.1 n=1 final 0.200/1 best 0.200 step 50 broke
#5 lr=-0.3 n=1 final 0.370/1 best 0.370 step 300 broke
`
	rows := Rank(jobs, "eval_loss", plans.Min)
	if got := rowsText(rows); got != want {
		t.Errorf("got\n%swant\n%s", got, want)
	}
	// The seeds the values are of, which the report draws the point's curve of.
	if got := fmt.Sprint(rows[1].Of, rows[3].Of); got != "[s.5] [s.4]" {
		t.Errorf("the values of lr=0.2 and lr=0.1 are of %s, want [s.5] [s.4]", got)
	}
}

func TestRankByGroup(t *testing.T) {
	jobs := []Job{
		job("s.1", "task=a", "0.1", "succeeded", 1, 2, 2, 9),
		job("s.2", "task=a", "0.2", "succeeded", 1, 1, 1, 9),
		job("s.3", "task=b", "0.1", "succeeded", 1, 1, 1, 9),
		job("s.4", "task=b", "0.2", "succeeded", 1, 2, 2, 9),
	}
	want := `task=a#1 lr=0.2 n=1 final 1.000/1 best 1.000 step 9
task=a#2 lr=0.1 n=1 final 2.000/1 best 2.000 step 9
task=b#1 lr=0.1 n=1 final 1.000/1 best 1.000 step 9
task=b#2 lr=0.2 n=1 final 2.000/1 best 2.000 step 9
`
	if got := rowsText(Rank(jobs, "eval_loss", plans.Min)); got != want {
		t.Errorf("got\n%swant\n%s", got, want)
	}
}

func TestStat(t *testing.T) {
	s := stat([]float64{1, 2, 3, 4})
	if s.Mean != 2.5 || s.N != 4 || math.Abs(*s.Std-math.Sqrt(5.0/3)) > 1e-12 {
		t.Errorf("%+v", s)
	}
	if stat(nil) != nil || stat([]float64{7}).Std != nil {
		t.Error("no values, or one: no deviation")
	}
}

// TestStatOfSeedsAlike: seeds that read alike deviate by nothing, not by the rounding
// of their mean ("0.4000 ± 6.8e-17" reads as a spread that is not there).
func TestStatOfSeedsAlike(t *testing.T) {
	for _, xs := range [][]float64{{0.4, 0.4, 0.4}, {0.1, 0.1}, {2.3, 2.3, 2.3, 2.3, 2.3}} {
		if s := stat(xs); *s.Std != 0 || s.Text() != figures(xs[0], 4)+" ± 0.0" {
			t.Errorf("%v: deviation %g, shown %q", xs, *s.Std, s.Text())
		}
	}
}

func TestDefaults(t *testing.T) {
	m := func(names ...string) Job {
		j := Job{Metrics: map[string]Curve{}}
		for _, n := range names {
			j.Metrics[n] = Curve{}
		}
		return j
	}
	jobs := []Job{m("loss", "eval_acc", "epoch"), m("loss", "eval_acc", "epoch"), m("loss")}
	for _, tt := range []struct {
		jobs        []Job
		early, want string
	}{
		{jobs, "eval_f1", "eval_f1"},
		{jobs, "", "loss"},
		{jobs[:2], "", "eval_acc"}, // as many as loss and epoch: an eval one first
		{nil, "", ""},
	} {
		if got := DefaultMetric(tt.jobs, tt.early); got != tt.want {
			t.Errorf("DefaultMetric(%d jobs, %q) = %q, want %q", len(tt.jobs), tt.early, got, tt.want)
		}
	}
	for name, want := range map[string]plans.Mode{"eval_loss": plans.Min, "val/perplexity": plans.Min, "wer": plans.Min,
		"eval_accuracy": plans.Max, "f1": plans.Max, "bleu": plans.Max,
		// A word of the name, not a word inside another: answer holds wer, cancer cer,
		// power wer, eval_samples_per_second nothing.
		"valloss": plans.Min, "testError": plans.Min, "valWER": plans.Min, "top1_err": plans.Min, "eval_runtime": plans.Min,
		"mean_squared_error": plans.Min, "eval_answer_f1": plans.Max, "cancer_auroc": plans.Max, "eval_power_score": plans.Max,
		"eval_samples_per_second": plans.Max} {
		if got := GuessMode(name); got != want {
			t.Errorf("GuessMode(%q) = %s, want %s", name, got, want)
		}
	}
}

// TestSeedsText: a point's seeds, as results and the report both count them: those its
// values are of, out of all, where some reported nothing.
func TestSeedsText(t *testing.T) {
	rows := Rank([]Job{
		job("s.1", "", "0.1", "succeeded", 1, 1.2, 1.1, 100),
		job("s.2", "", "0.1", "running", 2, 0, 0, 0), // nothing reported yet
		job("s.3", "", "1", "succeeded", 1, 1.4, 1.3, 100),
		job("s.4", "", "10", "failed", 1, 0, 0, 0),
	}, "eval_loss", plans.Min)
	var got []string
	for _, r := range rows {
		got = append(got, r.Point+":"+r.SeedsText())
	}
	if s := strings.Join(got, " "); s != "lr=0.1:1 of 2 lr=1:1 lr=10:0 of 1" {
		t.Errorf("seeds: %s", s)
	}
}

// TestStepText: a point's step is its seeds' furthest, with the earliest beside it
// where their final readings are from different steps (a seed behind, run again); a
// seed that reported nothing yet counts at no step.
func TestStepText(t *testing.T) {
	rows := Rank([]Job{
		job("s.1", "", "0.1", "running", 1, 1.2, 1.1, 1000),
		job("s.2", "", "0.1", "running", 2, 1.9, 1.9, 200),
		job("s.3", "", "0.1", "running", 3, 0, 0, 0), // nothing reported yet
		job("s.4", "", "1", "succeeded", 1, 1.4, 1.3, 1000),
		job("s.5", "", "1", "succeeded", 2, 1.5, 1.3, 1000),
		job("s.6", "", "10", "queued", 1, 0, 0, 0),
	}, "eval_loss", plans.Min)
	var got []string
	for _, r := range rows {
		got = append(got, r.Point+":"+r.StepText())
	}
	if s := strings.Join(got, " "); s != "lr=1:1000 lr=0.1:200-1000 lr=10:-" {
		t.Errorf("steps: %s", s)
	}
}

// TestStatText: a mean to four significant figures and its deviation to two, trailing
// zeros kept, so that a column of means reads alike (1.100, not 1.1 beside 3.806).
func TestStatText(t *testing.T) {
	sd := func(v float64) *float64 { return &v }
	for _, tt := range []struct {
		s    *Stat
		want string
	}{
		{nil, "-"},
		{&Stat{Mean: 1.10045, Std: sd(0.022980970388562776), N: 2}, "1.100 ± 0.023"},
		{&Stat{Mean: 3.80645, Std: sd(0.02015254326381674), N: 2}, "3.806 ± 0.020"},
		{&Stat{Mean: 0.5, Std: sd(0), N: 3}, "0.5000 ± 0.0"},
		{&Stat{Mean: 0.912, Std: sd(0.0041), N: 3}, "0.9120 ± 0.0041"},
		{&Stat{Mean: 1234.5, N: 1}, "1234"},
		{&Stat{Mean: 12345, Std: sd(150), N: 2}, "1.234e+04 ± 1.5e+02"},
		{&Stat{Mean: math.NaN(), N: 1}, "NaN"},
	} {
		if got := tt.s.Text(); got != tt.want {
			t.Errorf("%q, want %q", got, tt.want)
		}
	}
}
