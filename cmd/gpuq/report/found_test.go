package report

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/gpuq/gpuq/cmd/gpuq/ranking"
	"github.com/gpuq/gpuq/plans"
)

func pts(steps []int64, vs ...float64) []ranking.Point {
	out := make([]ranking.Point, len(vs))
	for i, v := range vs {
		out[i] = ranking.Point{Step: steps[i], Value: v}
	}
	return out
}

// TestSeedsBand: a point's curve is the mean of its seeds at each step one reported,
// each seed interpolated between its readings and counted only within its own span;
// the band is their range.
func TestSeedsBand(t *testing.T) {
	f := &Found{Curves: map[string][]ranking.Point{
		"a": pts([]int64{100, 200, 300}, 3, 2, 1),
		"b": pts([]int64{100, 300}, 5, 3), // 4 at 200, between its readings
		"c": pts([]int64{100}, 9),         // stopped after its first
	}}
	pc := f.combine(ranking.Row{Of: []string{"a", "b", "c", "gone"}})
	if got := fmt.Sprint(pc.steps, pc.mean, pc.low, pc.top); got != "[100 200 300] [5.666666666666667 3 2] [3 2 1] [9 4 3]" {
		t.Errorf("combined %s", got)
	}
}

// TestFoundCharts: a chart a group, each point's line coloured by its rank, a stopped
// point's marked, the steps early stopping judged at drawn where the curves reach.
func TestFoundCharts(t *testing.T) {
	stat := func(v float64) *ranking.Stat { return &ranking.Stat{Mean: v, N: 1} }
	f := &Found{Metric: "eval_loss", Mode: plans.Min, At: []int64{150, 5000}, Curves: map[string][]ranking.Point{
		"a": pts([]int64{100, 200, 300}, 3, 2, 1), "b": pts([]int64{100}, 3.5), "c": pts([]int64{100, 300}, 3, 2)},
		Rows: []ranking.Row{
			{Group: "task=x", Rank: 1, Point: "lr=1", Jobs: []string{"a"}, Of: []string{"a"}, Final: stat(1), Step: 300},
			{Group: "task=x", Rank: 2, Point: "lr=2", Jobs: []string{"b"}, Of: []string{"b"}, Final: stat(3.5), Step: 100, Cut: true, Stopped: 1},
			{Group: "task=y", Rank: 1, Point: "lr=1", Jobs: []string{"c"}, Of: []string{"c"}, Final: stat(2), Step: 300},
		}}
	charts := f.charts()
	if len(charts) != 2 || charts[0].Group != "task=x" || len(charts[0].Lines) != 2 || len(charts[1].Lines) != 1 {
		t.Fatalf("charts %+v", charts)
	}
	worst, best := charts[0].Lines[0], charts[0].Lines[1] // the best drawn last, on top
	if best.Point != "lr=1" || best.Colour != 0 || best.Stopped || worst.Colour != 1 || !worst.Stopped || worst.Band != "" {
		t.Errorf("lines %+v", charts[0].Lines)
	}
	if r := charts[0].Rungs; len(r) != 1 || r[0].Label != "judged at 150" {
		t.Errorf("rungs %+v", r)
	}
	if !strings.HasPrefix(best.Title, "#1 lr=1: eval_loss 1.000 at step 300") || !strings.Contains(worst.Title, "1 of its 1 seeds stopped early") {
		t.Errorf("titles %q, %q", best.Title, worst.Title)
	}
}

func TestTicks(t *testing.T) {
	for _, tt := range []struct {
		lo, hi float64
		want   string
	}{
		{0, 10000, "[0 2000 4000 6000 8000 10000]"},
		{0.83, 3.07, "[1 1.5 2 2.5 3]"},
		{0, 1, "[0 0.2 0.4 0.6 0.8 1]"},
		// An accuracy whose noise dips below 0: its first tick is 0, not -0.
		{-0.004, 0.81, "[0 0.2 0.4 0.6 0.8]"},
	} {
		if got := fmt.Sprint(niceTicks(tt.lo, tt.hi)); got != tt.want {
			t.Errorf("niceTicks(%v, %v) = %s, want %s", tt.lo, tt.hi, got, tt.want)
		}
	}
	if got := strings.Join([]string{stepLabel(500), stepLabel(10000), stepLabel(2.5e6)}, " "); got != "500 10k 2.5M" {
		t.Errorf("labels %s", got)
	}
}

// TestEndedLegend: the legend names what the dashed curves are: points stopped early,
// points whose seeds all failed (a sweep without early_stop has no stopped points),
// or both; none where every point ran on.
func TestEndedLegend(t *testing.T) {
	for _, tt := range []struct {
		name string
		rows []ranking.Row
		want string
	}{
		{"all ran on", []ranking.Row{{Point: "lr=1"}}, ""},
		{"one stopped", []ranking.Row{{Point: "lr=1"}, {Point: "lr=2", Cut: true}}, "stopped early (✕ where it stopped)"},
		{"one failed", []ranking.Row{{Point: "lr=1"}, {Point: "lr=2", Broke: true}}, "failed or cancelled (✕ where it ended)"},
		{"both", []ranking.Row{{Point: "lr=2", Cut: true}, {Point: "lr=3", Broke: true}}, "stopped early, or failed or cancelled (✕ where it ended)"},
	} {
		var buf strings.Builder
		d := Data{Sweep: "s", Now: t0, Found: &Found{Metric: "eval_loss", Rows: tt.rows}}
		if err := Write(&buf, d); err != nil {
			t.Fatal(err)
		}
		legend := regexp.MustCompile(`<span class="stop">([^<]*)</span>`).FindStringSubmatch(buf.String())
		switch {
		case tt.want == "" && legend != nil:
			t.Errorf("%s: the legend names %q, and no curve is dashed", tt.name, legend[1])
		case tt.want != "" && (legend == nil || legend[1] != tt.want):
			t.Errorf("%s: the legend names %q, want %q", tt.name, legend, tt.want)
		}
	}
}

// TestOneReadingIsDrawn: a point whose seeds have reported once so far (a sweep
// drawn as it runs) is a dot on its chart, where a line of one point draws nothing; a
// stopped one keeps its ✕.
func TestOneReadingIsDrawn(t *testing.T) {
	stat := func(v float64) *ranking.Stat { return &ranking.Stat{Mean: v, N: 1} }
	d := Data{Sweep: "s", Now: t0, Found: &Found{Metric: "eval_loss", Mode: plans.Min, Curves: map[string][]ranking.Point{
		"a": pts([]int64{100, 200}, 3, 2), "b": pts([]int64{100}, 3.5), "c": pts([]int64{100}, 4)},
		Rows: []ranking.Row{
			{Rank: 1, Point: "lr=1", Jobs: []string{"a"}, Of: []string{"a"}, Final: stat(2), Step: 200},
			{Rank: 2, Point: "lr=2", Jobs: []string{"b"}, Of: []string{"b"}, Final: stat(3.5), Step: 100},
			{Rank: 3, Point: "lr=3", Jobs: []string{"c"}, Of: []string{"c"}, Final: stat(4), Step: 100, Cut: true, Stopped: 1},
		}}}
	var buf strings.Builder
	if err := Write(&buf, d); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	if n := strings.Count(page, `<circle class="dot"`); n != 1 {
		t.Errorf("%d dots, want one, of lr=2's one reading", n)
	}
	if n := strings.Count(page, `<path class="end"`); n != 1 {
		t.Errorf("%d ✕, want one, of lr=3 stopped", n)
	}
}

// TestCurveIsOfTheSeedsRanked: a point's curve is drawn of the seeds its row's values
// are of: a seed that crashed after a low reading (0.4, then NaN) pulls neither the
// mean nor the band of a point whose other seeds ran on, as it moves none of its
// values in the ranking beside the chart.
func TestCurveIsOfTheSeedsRanked(t *testing.T) {
	seed := func(id, state string, c []ranking.Point) ranking.Job {
		last := c[len(c)-1]
		return ranking.Job{ID: id, Point: "lr=1e-3", State: state,
			Metrics: map[string]ranking.Curve{"eval_loss": {Points: c, Last: last, Min: last.Value}}}
	}
	steps := []int64{100, 200, 300}
	jobs := []ranking.Job{
		seed("s.1", "succeeded", pts(steps, 2.5, 2, 1.5)),
		seed("s.2", "succeeded", pts(steps, 2.5, 2, 1.5)),
		seed("s.3", "failed", pts(steps, 2.5, 1.9, 0.4)),
	}
	f := &Found{Metric: "eval_loss", Mode: plans.Min, Rows: ranking.Rank(jobs, "eval_loss", plans.Min), Curves: map[string][]ranking.Point{}}
	for _, j := range jobs {
		f.Curves[j.ID] = j.Metrics["eval_loss"].Points
	}
	pc := f.combine(f.Rows[0])
	if got := fmt.Sprint(pc.mean, pc.low); got != "[2.5 2 1.5] [2.5 2 1.5]" {
		t.Errorf("the point's curve (mean, low) is %s, want that of its two seeds that succeeded", got)
	}
}

// TestStepAxisIsNamed: the curves' x axis counts the trainers' steps, and says so;
// bare, its 0 to 1000 under the Gantt chart's seconds reads as time.
func TestStepAxisIsNamed(t *testing.T) {
	d := Data{Sweep: "s", Now: t0, Found: &Found{Metric: "eval_loss", Mode: plans.Min,
		Curves: map[string][]ranking.Point{"a": pts([]int64{100, 1000}, 3, 2)},
		Rows:   []ranking.Row{{Rank: 1, Point: "lr=1", Jobs: []string{"a"}, Of: []string{"a"}, Final: &ranking.Stat{Mean: 2, N: 1}, Step: 1000}}}}
	var buf strings.Builder
	if err := Write(&buf, d); err != nil {
		t.Fatal(err)
	}
	axis := regexp.MustCompile(`(?s)<svg class="curves".*?</svg>`).FindString(buf.String())
	if !regexp.MustCompile(`<text [^>]*>step</text>`).MatchString(axis) {
		t.Errorf("the curves' x axis is not named step:\n%s", axis)
	}
}

// TestTableStepIsTheRankingsStepText: the step a point's row of the report's table
// shows is the one gpuq results shows for it, Row.StepText, written in one place. A
// point stopped early while one of its seeds had read only step 100 and the other step
// 200 has a final mean that mixes the two, and both say "100-200"; the table once
// wrote the furthest step alone, 200, as though both seeds' readings were from it. A
// point that reported nothing reads "-" in both, and the curve's title agrees too.
func TestTableStepIsTheRankingsStepText(t *testing.T) {
	seed := func(id, point, state string, c []ranking.Point) ranking.Job {
		j := ranking.Job{ID: id, Point: point, State: state, Metrics: map[string]ranking.Curve{}}
		if len(c) > 0 {
			last := c[len(c)-1]
			j.Metrics["eval_loss"] = ranking.Curve{Points: c, Last: last, Min: last.Value, Max: last.Value}
		}
		return j
	}
	jobs := []ranking.Job{
		seed("s.1", "lr=1e-3", "succeeded", pts([]int64{100, 200, 300}, 3, 2, 1)),
		seed("s.2", "lr=1e-2", ranking.Stopped, pts([]int64{100}, 3.5)),
		seed("s.3", "lr=1e-2", ranking.Stopped, pts([]int64{100, 200}, 3.4, 3.0)),
		seed("s.4", "lr=1e-1", "failed", nil),
	}
	f := &Found{Metric: "eval_loss", Mode: plans.Min, Rows: ranking.Rank(jobs, "eval_loss", plans.Min), Curves: map[string][]ranking.Point{}}
	for _, j := range jobs {
		f.Curves[j.ID] = j.Metrics["eval_loss"].Points
	}
	var buf strings.Builder
	if err := Write(&buf, Data{Sweep: "s", Now: t0, Found: f}); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	want := map[string]string{"lr=1e-3": "300", "lr=1e-2": "100-200", "lr=1e-1": "-"}
	for _, r := range f.Rows {
		if r.StepText() != want[r.Point] {
			t.Fatalf("the ranking's step of %s is %q, want %q", r.Point, r.StepText(), want[r.Point])
		}
		// The step is the cell before the last (the jobs' states) of the point's row.
		row := regexp.MustCompile(`<tr[^>]*>.*?` + regexp.QuoteMeta(r.Point) + `.*?<td class="num">([^<]*)</td><td>[^<]*</td></tr>`).FindStringSubmatch(page)
		if row == nil {
			t.Fatalf("no row of %s in the table", r.Point)
		}
		if row[1] != r.StepText() {
			t.Errorf("the table's step of %s is %q, where gpuq results shows %q", r.Point, row[1], r.StepText())
		}
	}
	if !strings.Contains(page, "eval_loss 3.250 ± 0.35 at step 100-200") {
		t.Errorf("the curve of lr=1e-2 does not say its step is 100-200")
	}
}
