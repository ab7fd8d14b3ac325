package main

import (
	"cmp"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuq/gpuq/cmd/gpuq/ranking"
	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/schedtest"
)

// resultsSummary is a run's summary: two tasks, two learning rates, two seeds; the
// trainers reported eval_loss and loss; lr=0.1 of sst2 was stopped early, one of
// its seeds before it started; a job of qnli ran out of memory and started its curve
// again.
func resultsSummaryFile(t *testing.T) string {
	t.Helper()
	sum := api.SweepSummary{Sweep: "s", Counts: map[string]int{}}
	n := 0
	add := func(task, lr string, seed int64, state string, curves ...[]api.MetricPoint) {
		n++
		p := plans.NewMap()
		p.Set("task", task)
		p.Set("lr", lr)
		p.Set("seed", seed)
		j := api.JobSummary{ID: "s." + string(rune('0'+n)), Name: fmt.Sprintf("%s,lr=%s,seed=%d", task, lr, seed), Params: p, State: state,
			Point: fmt.Sprintf("task=%s,lr=%s,seed=%d", task, lr, seed), SeedOf: "task=" + task + ",lr=" + lr, Attempts: []api.AttemptSummary{},
			EarlyStop: &api.Judged{Metric: "eval_loss", Mode: plans.Min, At: []int64{100}}}
		for i, c := range curves {
			m := api.MetricSummary{Name: "eval_loss", Step: c[len(c)-1].Step, Last: c[len(c)-1].Value, Curve: c, Min: c[0].Value, Max: c[0].Value}
			for _, q := range c {
				m.Min, m.Max = min(m.Min, q.Value), max(m.Max, q.Value)
			}
			j.Attempts = append(j.Attempts, api.AttemptSummary{N: i + 1, Metrics: []api.MetricSummary{m, {Name: "loss", Step: 1, Last: 1}}})
		}
		sum.Jobs = append(sum.Jobs, j)
	}
	c := func(vs ...float64) []api.MetricPoint {
		var out []api.MetricPoint
		for i, v := range vs {
			out = append(out, api.MetricPoint{Step: int64(100 * (i + 1)), Value: v})
		}
		return out
	}
	add("sst2", "0.001", 1, "succeeded", c(2, 1.2, 0.9))
	add("sst2", "0.001", 2, "succeeded", c(2, 1.3, 1.1))
	add("sst2", "0.1", 1, "stopped", c(2.5))
	add("sst2", "0.1", 2, "stopped")
	add("qnli", "0.001", 1, "succeeded", c(1.5, 0.9), c(1.6, 1.1, 0.8)) // its second attempt's curve counts
	add("qnli", "0.1", 1, "succeeded", c(1.5, 1.2, 1.0))
	return writeSummary(t, sum, "s.json")
}

// TestResults: gpuq results ranks the points, seeds aggregated, as a table, --by
// task apart, as JSON and as CSV for a notebook.
func TestResults(t *testing.T) {
	file := resultsSummaryFile(t)
	out, errOut, code := gpuq(t, "results", file)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	schedtest.Golden(t, "results.txt", out)
	out, _, _ = gpuq(t, "results", file, "--by", "task")
	schedtest.Golden(t, "results_by_task.txt", out)
	// A parameter no job has would group every point alike: refused, with the one meant.
	if _, errOut, code := gpuq(t, "results", file, "--by", "tsak"); code != exitBadInput || !strings.Contains(errOut, `--by: no job of `) || !strings.Contains(errOut, `parameter "tsak" (did you mean "task"?)`) {
		t.Errorf("--by tsak: exit %d, %s", code, errOut)
	}

	out, errOut, code = gpuq(t, "results", file, "--json", "--by", "task", "--max")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var res Results
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if res.Metric != "eval_loss" || res.Mode != plans.Max || len(res.Points) != 4 || res.Points[0].Group != "task=sst2" ||
		res.Points[0].Point != "task=sst2,lr=0.001" || res.Points[0].Final.N != 2 || *res.Points[0].Final.Std == 0 || len(res.Points[0].Jobs) != 2 {
		t.Errorf("--json: %s", out)
	}

	out, _, code = gpuq(t, "results", file, "--csv", "--metric", "eval_loss")
	recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if code != exitOK || err != nil || len(recs) != 5 {
		t.Fatalf("--csv: exit %d, %v:\n%s", code, err, out)
	}
	if got := strings.Join(recs[0], ","); got != "group,rank,point,seeds,n,final_mean,final_std,best_mean,best_std,step,from_step,stopped_early,failed,task,lr" {
		t.Errorf("header %s", got)
	}
	if got := strings.Join(recs[1], ","); got != ",1,task=qnli,lr=0.001,1,1,0.8,,0.8,,300,300,0,0,qnli,0.001" {
		t.Errorf("first row %s", got)
	}
}

func TestResultsRefusals(t *testing.T) {
	file := resultsSummaryFile(t)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--metric", "eval_los"}, `no job of s reported "eval_los" (did you mean "eval_loss"?); they reported eval_loss, loss: give one with --metric`},
		{[]string{"--max", "--min"}, "--max and --min: give one"},
		{[]string{"--json", "--csv"}, "--json and --csv: give one"},
	} {
		_, errOut, code := gpuq(t, append([]string{"results", file}, tt.args...)...)
		if code != exitBadInput || !strings.Contains(errOut, tt.want) {
			t.Errorf("%v: exit %d: %s", tt.args, code, errOut)
		}
	}
	empty := filepath.Join(t.TempDir(), "e.json")
	os.WriteFile(empty, []byte(`{"sweep": "e", "jobs": [{"id": "e.1", "state": "succeeded", "attempts": []}]}`), 0o600)
	if _, errOut, code := gpuq(t, "results", empty); code != exitBadInput || !strings.Contains(errOut, "no job of e has reported a metric: a trainer writes them to the file $GPUQ_METRICS_FILE names") {
		t.Errorf("no metrics: exit %d: %s", code, errOut)
	}
}

// TestResultsOfARunThatEnded: results and report of a sweep by name that nothing they
// read has (a gpuq run of it that was killed, and left nothing) say where a gpuq run's
// sweep is, its --json summary, not that gpuq submit starts a daemon: that would run
// the sweep again. A sweep nobody has is bad input (exit 2), no daemon or none.
func TestResultsOfARunThatEnded(t *testing.T) {
	t.Setenv("GPUQ_STATE_DIR", t.TempDir())
	for _, verb := range []string{"results", "report"} {
		_, errOut, code := gpuq(t, verb, "early-stop")
		if code != exitBadInput || !strings.Contains(errOut, `early-stop is no file here, and no sweep "early-stop": neither a gpuq run of it nor a gpuq daemon runs on`) ||
			!strings.Contains(errOut, "nor did a gpuq run of it leave its jobs there as it ended") ||
			!strings.Contains(errOut, "from the summary its --json printed (gpuq run SWEEP.yaml --json > s.json; gpuq "+verb+" s.json)") || strings.Contains(errOut, "submit") {
			t.Errorf("%s: exit %d: %s", verb, code, errOut)
		}
	}
}

// TestResultsRankWithinGroupsApart: the points of a sweep whose early_stop judged each
// task's apart (within: [task]) are ranked each task's apart, as --by task and the
// report rank them: one task's loss is not another's.
func TestResultsRankWithinGroupsApart(t *testing.T) {
	file := resultsSummaryFile(t)
	want, _, _ := gpuq(t, "results", file, "--by", "task")
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var sum api.SweepSummary
	if err := json.Unmarshal(data, &sum); err != nil {
		t.Fatal(err)
	}
	for _, j := range sum.Jobs {
		task, _ := j.Params.Get("task")
		j.EarlyStop.Group = "task=" + plans.FormatValue(task)
	}
	if data, err = json.Marshal(sum); err != nil {
		t.Fatal(err)
	}
	within := filepath.Join(t.TempDir(), "within.json")
	if err := os.WriteFile(within, data, 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := gpuq(t, "results", within)
	if code != exitOK || out != want {
		t.Errorf("exit %d: %s%s\nwant, as --by task:\n%s", code, out, errOut, want)
	}
	out, _, _ = gpuq(t, "results", within, "--json")
	var res Results
	if err := json.Unmarshal([]byte(out), &res); err != nil || len(res.By) != 1 || res.By[0] != "task" || res.Points[0].Group != "task=sst2" {
		t.Errorf("--json: %v: %s", err, out)
	}
}

// TestResultsFitTheTerminal: on a terminal of 80 columns, 60 or 40, gpuq results' lines
// fit its width, a point a line, as status's do: a grouped point shows the values its
// group does not; the best values give way, then the points lose their text values'
// keys and their other keys' ends for the seeds' states (JOBS), then the step, the
// seeds counted and the rank go (the rows are in its order), and the states are
// shortened, never wrapped: they are the only sign that a point's value still moves
// or was judged early, and are left out only where not even "3 st…" fits. Each point
// keeps its final mean, and its values where the states need none of their room.
// The groups lose their keys and starts, and the points their keys, before the
// states are left out. Piped, every value stays whole. (The states went first at 80 columns, the points
// keeping their task= keys, and a point still running, or stopped early, read as
// finished; below about 66 columns the rows overflowed, or their states wrapped onto
// lines of their own.)
func TestResultsFitTheTerminal(t *testing.T) {
	file, long, glue := resultsSummaryFile(t), longResultsFile(t), runningResultsFile(t)
	for _, tt := range []struct {
		file  string
		by    []string
		width int
		want  []string // in the table, row by row: its point's values, its final mean, its states
		shown string   // the header at that width
	}{
		{file, nil, 80, []string{"task=qnli,lr=0.001 .* 0.8000 .* 1 succeeded$", "task=sst2,lr=0.001 .* 1.000 ± 0.14 ", "task=qnli,lr=0.1 .* 1.000 ", "task=sst2,lr=0.1 .* 2.500 .* 2 stopped early$"},
			"RANK  POINT               SEEDS   FINAL         STEP  JOBS"},
		{file, nil, 60, []string{"^1 +qnli,lr=0.001 +1 +0.8000 +1 succeeded$", "^2 +sst2,lr=0.001 .* 1.000 ± 0.14  2 succeeded$", "qnli,lr=0.1 .* 1.000 ", "^4 +sst2,lr=0.1 +1 of 2  2.500 +2 stopped early$"},
			"RANK  POINT          SEEDS   FINAL         JOBS"},
		{file, nil, 40, []string{"^qnli,lr=0.001  0.8000 +1 succeeded$", "^sst2,lr=0.001  1.000 ± 0.14  2 succeeded$", "^qnli,lr=0.1 +1.000 +1 succeeded$", "^sst2,lr=0.1 +2.500 +2 stopped …$"},
			"POINT          FINAL         JOBS"},
		{file, []string{"task"}, 80, []string{"^task=sst2  1     lr=0.001 .* 1.000 ± 0.14 ", "^task=sst2  2 .* lr=0.1 .* 2.500 .* 2 stopped early$", "^task=qnli .* lr=0.001 .* 0.8000 ", "^task=qnli .* lr=0.1 .* 1.000 "},
			"GROUP      RANK  POINT     SEEDS   FINAL         STEP  JOBS"},
		// The groups lose their keys, every one alike, before the seeds' states are
		// shortened.
		{file, []string{"task"}, 60, []string{"^sst2   1     lr=0.001  2       1.000 ± 0.14  2 succeeded$", "^sst2   2 +lr=0.1 +1 of 2  2.500 +2 stopped early$", "^qnli .* lr=0.001 .* 0.8000 ", "^qnli .* lr=0.1 .* 1.000 "},
			"GROUP  RANK  POINT     SEEDS   FINAL         JOBS"},
		{file, []string{"task"}, 40, []string{"^sst2   lr=0.001  1.000 ± 0.14  2 succee…$", "^sst2   lr=0.1 +2.500 +2 stoppe…$", "^qnli   lr=0.001  0.8000 +1 succee…$", "^qnli   lr=0.1 +1.000 +1 succee…$"},
			"GROUP  POINT     FINAL         JOBS"},
		// Long points lose their text values' keys, then their text values' starts
		// for the states' first cells; long groups their starts, and the names their
		// keys, before the states go: a failed seed still shows.
		{long, nil, 60, []string{"^roberta-large,lr=0.00001    0.8915 ± 0.00071  1 failed, 2 s…$", "^roberta-large,lr=0.00003 ", "^deberta-v3-base,lr=0.00001 ", "^deberta-v3-base,lr=0.00003 "},
			"POINT                       FINAL             JOBS"},
		{long, nil, 40, []string{"^…rge,lr=0.00001  0.8915 ± 0.00071  1 fa…$", "^…rge,lr=0.00003 ", "^…ase,lr=0.00001 ", "^…ase,lr=0.00003 "},
			"POINT            FINAL             JOBS"},
		{long, []string{"model"}, 40, []string{"^…arge  0.00001  0.8915 ± 0.00071  1 fai…$", "^…arge  0.00003 ", "^…base  0.00001 ", "^…base  0.00003 "},
			"GROUP  POINT    FINAL             JOBS"},
		// While the sweep runs: at 80 columns the points lose their task= keys, not
		// the states; narrower, the states are shortened, still telling running
		// points and those stopped early from finished ones.
		{glue, nil, 80, []string{"^1 +glue-tvt_qnli,le…=1e-3 +3 +3.480 ± 0.010  100 +3 running$", "^2 +glue-tvt_sst2,le…=1e-3 .* 3 running$", "^3 +glue-tvt_qnli,le…=1e-4 .* 2 running, 1 succeeded$", "^4 .* 2 running, 1 succeeded$", "^5 +glue-tvt_qnli,le…=1e-5 .* 3 stopped early$", "^6 .* 3 stopped early$"},
			"RANK  POINT                   SEEDS  FINAL          STEP  JOBS"},
		{glue, nil, 60, []string{"^1 +glue-tvt_qnli,l…=1e-3  3.480 ± 0.010  3 running$", "^2 .* 3 running$", "^3 .* 4.480 ± 0.010  2 running, 1 su…$", "^4 ", "^5 +glue-tvt_qnli,l…=1e-5  5.480 ± 0.010  3 stopped early$", "^6 "},
			"RANK  POINT                  FINAL          JOBS"},
		{glue, nil, 40, []string{"^…-tvt_qnli,l…=1e-3  3.480 ± 0.010  3 ru…$", "^…-tvt_sst2,l…=1e-3 .* 3 ru…$", "^…-tvt_qnli,l…=1e-4 .* 2 ru…$", "2 ru…$", "^…-tvt_qnli,l…=1e-5  5.480 ± 0.010  3 st…$", "3 st…$"},
			"POINT               FINAL          JOBS"},
		{glue, []string{"task"}, 60, []string{"^glue-tvt_qnli  1     l…=1e-3  3.480 ± 0.010  3 running$", "2 running, 1 s…$", "^glue-tvt_qnli  3     l…=1e-5 .* 3 stopped early$", "3 running$", "2 running, 1 s…$", "3 stopped early$"},
			"GROUP          RANK  POINT    FINAL          JOBS"},
	} {
		args := append([]string{"results", tt.file}, "--by", strings.Join(tt.by, ","))
		if tt.by == nil {
			args = args[:2]
		}
		out, errOut, code := gpuqIn(t, tt.width, args...)
		if code != exitOK {
			t.Fatalf("%v: exit %d: %s", args, code, errOut)
		}
		fitsWidth(t, out, tt.width)
		_, table, _ := strings.Cut(out, "\n\n")
		rows := strings.Split(strings.TrimSuffix(table, "\n"), "\n")
		if len(rows) != 1+len(tt.want) || rows[0] != tt.shown {
			t.Errorf("%d columns, %v: the table is %d lines, headed %q; want a point a line, headed %q:\n%s", tt.width, tt.by, len(rows), rows[0], tt.shown, out)
			continue
		}
		for i, want := range tt.want {
			if !regexp.MustCompile(want).MatchString(rows[i+1]) {
				t.Errorf("%d columns, %v: row %d is %q, want %q:\n%s", tt.width, tt.by, i+1, rows[i+1], want, out)
			}
		}
	}
	out, _, _ := gpuq(t, "results", long, "--by", "model")
	if !strings.Contains(out, "model=deberta-v3-base  2     model=deberta-v3-base,lr=0.00003  2 of 3  0.8615 ± 0.00071  0.9000 ± 0.0  12001-12002  1 failed, 2 succeeded") {
		t.Errorf("piped, a value is cut:\n%s", out)
	}
}

// runningResultsFile is a daemon's sweep as it runs: two tasks of a long prefix, three
// learning rates, three seeds; those of 1e-3 run, one of 1e-4 has succeeded and the
// others run, those of 1e-5 were stopped early, all at step 100.
func runningResultsFile(t *testing.T) string {
	t.Helper()
	sum := api.SweepSummary{Sweep: "glue", Counts: map[string]int{}}
	for _, task := range []string{"glue-tvt_qnli", "glue-tvt_sst2"} {
		for i, lr := range []string{"1e-3", "1e-4", "1e-5"} {
			for seed := int64(1); seed <= 3; seed++ {
				p := plans.NewMap()
				p.Set("task", task)
				p.Set("learning_rate", lr)
				p.Set("seed", seed)
				point := "task=" + task + ",learning_rate=" + lr
				j := api.JobSummary{ID: fmt.Sprintf("glue.%d", len(sum.Jobs)+1), Name: fmt.Sprintf("%s,learning_rate=%s,seed=%d", task, lr, seed), Params: p,
					State: "running", Point: fmt.Sprintf("%s,seed=%d", point, seed), SeedOf: point}
				switch {
				case i == 2:
					j.State = "stopped"
				case i == 1 && seed == 3:
					j.State = "succeeded"
				}
				v := 3.46 + float64(i) + float64(seed)/100
				c := []api.MetricPoint{{Step: 100, Value: v}}
				j.Attempts = []api.AttemptSummary{{N: 1, Metrics: []api.MetricSummary{{Name: "eval_loss", Step: 100, Last: v, Curve: c, Min: v, Max: v}}}}
				sum.Jobs = append(sum.Jobs, j)
			}
		}
	}
	return writeSummary(t, sum, "glue.json")
}

// longResultsFile is a run's summary whose points and groups are long: two models, two
// learning rates, three seeds, the third of each point failed.
func longResultsFile(t *testing.T) string {
	t.Helper()
	sum := api.SweepSummary{Sweep: "glue", Counts: map[string]int{}}
	k := 0.0 // the point's, ranked in this order
	for _, model := range []string{"roberta-large", "deberta-v3-base"} {
		for _, lr := range []string{"0.00001", "0.00003"} {
			k++
			for seed := int64(1); seed <= 3; seed++ {
				p := plans.NewMap()
				p.Set("model", model)
				p.Set("lr", lr)
				p.Set("seed", seed)
				point := "model=" + model + ",lr=" + lr
				j := api.JobSummary{ID: fmt.Sprintf("glue.%d", len(sum.Jobs)+1), Name: fmt.Sprintf("%s,%s,seed=%d", model, lr, seed), Params: p,
					State: "succeeded", Point: fmt.Sprintf("%s,seed=%d", point, seed), SeedOf: point}
				if seed == 3 {
					j.State = "failed"
				}
				c := []api.MetricPoint{{Step: 1000, Value: 0.9}, {Step: 12000 + seed, Value: 0.9 - k/100 + float64(seed)/1000}}
				j.Attempts = []api.AttemptSummary{{N: 1, Metrics: []api.MetricSummary{{Name: "eval_accuracy", Step: c[1].Step, Last: c[1].Value, Curve: c, Min: c[1].Value, Max: 0.9}}}}
				sum.Jobs = append(sum.Jobs, j)
			}
		}
	}
	return writeSummary(t, sum, "glue.json")
}

// TestAStoppedPointEndsWhereItWasJudged: a point stopped early ends, in gpuq results
// and in the report's curves (its ✕), at the readings early stopping judged it by, at
// the rung it was stopped at: not at the readings its trainers made as they were
// being stopped. A seed stopped with its point has its rung reading from what it left
// as it ended (later): its curve has the first reading at the rung. A sweep from a
// gpuq that did not keep the rung ends where its readings do.
func TestAStoppedPointEndsWhereItWasJudged(t *testing.T) {
	at := []int64{200, 500}
	// curve is readings written step, value, step, value...
	curve := func(sv ...float64) []api.MetricPoint {
		var out []api.MetricPoint
		for i := 0; i < len(sv); i += 2 {
			out = append(out, api.MetricPoint{Step: int64(sv[i]), Value: sv[i+1]})
		}
		return out
	}
	job := func(id, point, state string, readings []api.MetricPoint, es api.Judged) api.JobSummary {
		p := plans.NewMap()
		p.Set("lr", point)
		last := readings[len(readings)-1]
		es.Metric, es.Mode, es.At = "eval_loss", plans.Min, at
		m := api.MetricSummary{Name: "eval_loss", Step: last.Step, Last: last.Value, Min: last.Value, Max: readings[0].Value, Curve: readings}
		return api.JobSummary{ID: id, Name: "lr=" + point, SeedOf: "lr=" + point, Params: p, State: state, EarlyStop: &es,
			Attempts: []api.AttemptSummary{{N: 1, Metrics: []api.MetricSummary{m}}}}
	}
	sum := api.SweepSummary{Sweep: "s", Jobs: []api.JobSummary{
		job("s.1", "0.001", "succeeded", curve(100, 3, 200, 2, 500, 1.5, 1000, 1),
			api.Judged{Rungs: curve(200, 2, 500, 1.5)}),
		job("s.2", "0.1", "stopped", curve(100, 4, 200, 3, 300, 2.8),
			api.Judged{Rungs: curve(200, 3), StoppedAt: 200}),
		job("s.3", "0.1", "stopped", curve(100, 4.2, 200, 3.2, 300, 2.9),
			api.Judged{Rungs: curve(300, 2.9), StoppedAt: 200}),
	}}
	f := foundOf(sum)
	var row ranking.Row
	for _, r := range f.Rows {
		if r.Point == "lr=0.1" {
			row = r
		}
	}
	if row.Final == nil || math.Abs(row.Final.Mean-3.1) > 1e-9 || row.Step != 200 || row.FromStep != nil || math.Abs(row.Best.Mean-3.1) > 1e-9 {
		t.Errorf("the stopped point: %+v, final %+v, best %+v; want final and best 3.1 at step 200", row, row.Final, row.Best)
	}
	for _, id := range []string{"s.2", "s.3"} {
		if c := f.Curves[id]; len(c) != 2 || c[1].Step != 200 {
			t.Errorf("%s's curve %v, want it to end at step 200", id, c)
		}
	}
	if c := f.Curves["s.1"]; len(c) != 4 {
		t.Errorf("s.1, not stopped, curve %v", c)
	}
	// Without the rung, as an older gpuq left it: its last readings.
	for _, j := range sum.Jobs {
		j.EarlyStop.StoppedAt = 0
	}
	if r := foundOf(sum).Rows[1]; r.Step != 300 {
		t.Errorf("without the rung kept: %+v, want its last readings", r)
	}
}

// TestResultsOfADivergedRun: a seed whose loss went NaN after its last number ends at
// NaN, the worst, not at that number: its point ranks after the others, though its
// last finite loss was the lowest; --json writes the NaN as null.
func TestResultsOfADivergedRun(t *testing.T) {
	sum := api.SweepSummary{Sweep: "d"}
	for i, lr := range []string{"0.1", "0.001"} {
		p := plans.NewMap()
		p.Set("lr", lr)
		m := api.MetricSummary{Name: "eval_loss", Step: 300, Last: 1.3, Min: 1.1, Max: 1.3,
			Curve: []api.MetricPoint{{Step: 100, Value: 1.1}, {Step: 300, Value: 1.3}}}
		if lr == "0.1" {
			m = api.MetricSummary{Name: "eval_loss", Step: 100, Last: 0.11, Min: 0.11, Max: 0.11, Curve: []api.MetricPoint{{Step: 100, Value: 0.11}}, DivergedAt: 200}
		}
		sum.Jobs = append(sum.Jobs, api.JobSummary{ID: fmt.Sprintf("d.%d", i+1), Name: "lr=" + lr, Params: p, State: "succeeded",
			Attempts: []api.AttemptSummary{{N: 1, Metrics: []api.MetricSummary{m}}}})
	}
	file := writeSummary(t, sum, "d.json")
	out, errOut, code := gpuq(t, "results", file, "--json")
	var res Results
	if err := json.Unmarshal([]byte(out), &res); code != exitOK || err != nil || len(res.Points) != 2 {
		t.Fatalf("exit %d, %v: %s%s", code, err, out, errOut)
	}
	if first, last := res.Points[0], res.Points[1]; first.Point != "lr=0.001" || last.Point != "lr=0.1" || last.Step != 200 || !strings.Contains(out, `"mean": null`) {
		t.Errorf("the diverged point is not last, at NaN:\n%s", out)
	}
	if out, _, _ := gpuq(t, "results", file); !regexp.MustCompile(`2 +lr=0\.1 +1 +NaN +0\.1100 +200 `).MatchString(out) {
		t.Errorf("table:\n%s", out)
	}
}

// TestAResultIsOfTheSeedsCurrentRun: a seed queued to run again (gpuq retry of one
// cancelled, failed or stopped early; the next rung after an out-of-memory end; a
// timeout's retry), whose trainer will start again from its first step, counts by
// nothing until its next attempt reports, and then by that attempt alone: not at the
// readings its attempt before made, averaged with its point's finished seeds as if
// they were a result. Its point says it has a seed still to run (1 of 2, 1 queued).
// A seed stopped early ends at its reading at the rung it was judged at, kept on the
// job, whichever attempt made it.
func TestAResultIsOfTheSeedsCurrentRun(t *testing.T) {
	started := time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC)
	// attempt is an attempt that ended as outcome ("" while it runs), having reported
	// eval_loss at steps and values step, value, step, value...
	attempt := func(n int, outcome string, sv ...float64) api.AttemptSummary {
		a := api.AttemptSummary{N: n, Outcome: outcome, Started: started.Add(time.Duration(n) * time.Hour)}
		if outcome != "" {
			a.Ended = a.Started.Add(30 * time.Minute)
		}
		if len(sv) == 0 {
			return a
		}
		m := api.MetricSummary{Name: "eval_loss", Min: math.Inf(1), Max: math.Inf(-1)}
		for i := 0; i < len(sv); i += 2 {
			p := api.MetricPoint{Step: int64(sv[i]), Value: sv[i+1]}
			m.Curve, m.Step, m.Last, m.Min, m.Max = append(m.Curve, p), p.Step, p.Value, min(m.Min, p.Value), max(m.Max, p.Value)
		}
		a.Metrics = []api.MetricSummary{m}
		return a
	}
	es := func(stoppedAt int64, rungs ...api.MetricPoint) *api.Judged {
		return &api.Judged{Metric: "eval_loss", Mode: plans.Min, At: []int64{200, 600}, Rungs: rungs, StoppedAt: stoppedAt}
	}
	// want are the point's final mean over n seeds, its step and the earliest of its
	// seeds' (0: the same), and the last reading of the second seed's curve in the
	// report (nil: not drawn).
	type want struct {
		n          int
		mean       float64
		step, from int64
		last       *ranking.Point
	}
	// lossOnly is an attempt whose trainer has reported its training loss, not yet
	// its evaluation's.
	lossOnly := func(a api.AttemptSummary) api.AttemptSummary {
		a.Metrics = []api.MetricSummary{{Name: "loss", Step: 50, Last: 3.1, Min: 3.1, Max: 3.1, Curve: []api.MetricPoint{{Step: 50, Value: 3.1}}}}
		return a
	}
	finished := attempt(1, "success", 200, 2.4, 600, 2.0, 1000, 1.8)
	for _, tt := range []struct {
		name     string
		state    string
		attempts []api.AttemptSummary
		judged   *api.Judged
		want     want
	}{
		{name: "cancelled at step 900, then retried: queued", state: "queued", want: want{n: 1, mean: 1.8, step: 1000},
			attempts: []api.AttemptSummary{attempt(1, "cancelled", 200, 2.5, 600, 2.1, 900, 1.85)}, judged: es(0, api.MetricPoint{Step: 200, Value: 2.5}, api.MetricPoint{Step: 600, Value: 2.1})},
		{name: "retried and running, its trainer not yet reporting", state: "running", want: want{n: 1, mean: 1.8, step: 1000},
			attempts: []api.AttemptSummary{attempt(1, "cancelled", 200, 2.5, 900, 1.85), attempt(2, "")}},
		{name: "retried and running, its trainer reporting again", state: "running", want: want{n: 2, mean: 2.0, step: 1000, from: 300, last: &ranking.Point{Step: 300, Value: 2.2}},
			attempts: []api.AttemptSummary{attempt(1, "cancelled", 200, 2.5, 900, 1.85), attempt(2, "", 100, 2.6, 300, 2.2)}},
		{name: "requeued after an out-of-memory end", state: "queued", want: want{n: 1, mean: 1.8, step: 1000},
			attempts: []api.AttemptSummary{attempt(1, "gpu-oom", 200, 2.5, 400, 2.2)}, judged: es(0, api.MetricPoint{Step: 200, Value: 2.5})},
		{name: "held after an out-of-memory end", state: "held", want: want{n: 1, mean: 1.8, step: 1000},
			attempts: []api.AttemptSummary{attempt(1, "gpu-oom", 200, 2.5, 400, 2.2)}},
		{name: "requeued after its timeout", state: "queued", want: want{n: 1, mean: 1.8, step: 1000},
			attempts: []api.AttemptSummary{attempt(1, "timed-out", 200, 2.5, 700, 1.9)}},
		{name: "stopped early, then retried", state: "queued", want: want{n: 1, mean: 1.8, step: 1000},
			attempts: []api.AttemptSummary{attempt(1, "stopped-early", 200, 2.6, 300, 2.5)}, judged: es(0, api.MetricPoint{Step: 200, Value: 2.6})},
		{name: "running again after an out-of-memory end, no evaluation yet", state: "running", want: want{n: 1, mean: 1.8, step: 1000},
			attempts: []api.AttemptSummary{attempt(1, "gpu-oom", 200, 2.5, 400, 2.2), lossOnly(attempt(2, ""))}},
		{name: "running again after an out-of-memory end, past where it ended", state: "running", want: want{n: 2, mean: 1.9, step: 1000, from: 600, last: &ranking.Point{Step: 600, Value: 2.0}},
			attempts: []api.AttemptSummary{attempt(1, "gpu-oom", 200, 2.5, 400, 2.2), attempt(2, "", 200, 2.4, 600, 2.0)}},
		{name: "succeeded at its second rung", state: "succeeded", want: want{n: 2, mean: 1.85, step: 1000, last: &ranking.Point{Step: 1000, Value: 1.9}},
			attempts: []api.AttemptSummary{attempt(1, "gpu-oom", 200, 2.5, 400, 2.2), attempt(2, "success", 200, 2.4, 1000, 1.9)}},
		{name: "cancelled for good: its readings count only where no seed ran on", state: "cancelled", want: want{n: 1, mean: 1.8, step: 1000, last: &ranking.Point{Step: 900, Value: 1.85}},
			attempts: []api.AttemptSummary{attempt(1, "cancelled", 200, 2.5, 900, 1.85)}},
		{name: "stopped with its point before its trainer reported again after an out-of-memory end", state: "stopped", want: want{n: 1, mean: 1.8, step: 1000, last: &ranking.Point{Step: 200, Value: 2.6}},
			attempts: []api.AttemptSummary{attempt(1, "gpu-oom", 200, 2.6, 400, 2.2), attempt(2, "stopped-early")}, judged: es(200, api.MetricPoint{Step: 200, Value: 2.6})},
	} {
		t.Run(tt.name, func(t *testing.T) {
			want := tt.want
			sum := api.SweepSummary{Sweep: "gla-lr"}
			for i, j := range []struct {
				state    string
				attempts []api.AttemptSummary
				judged   *api.Judged
			}{{"succeeded", []api.AttemptSummary{finished}, es(0, api.MetricPoint{Step: 200, Value: 2.4}, api.MetricPoint{Step: 600, Value: 2.0})}, {tt.state, tt.attempts, tt.judged}} {
				p := plans.NewMap()
				p.Set("lr", "0.01")
				p.Set("seed", int64(i+1))
				sum.Jobs = append(sum.Jobs, api.JobSummary{ID: fmt.Sprintf("gla-lr.%d", i+1), Name: fmt.Sprintf("lr=0.01,seed=%d", i+1), Params: p,
					SeedOf: "lr=0.01", State: j.state, Attempts: j.attempts, EarlyStop: cmp.Or(j.judged, es(0))})
			}
			f := foundOf(sum)
			if len(f.Rows) != 1 {
				t.Fatalf("rows %+v", f.Rows)
			}
			r := f.Rows[0]
			from := cmp.Or(want.from, want.step)
			if r.Final == nil || r.Final.N != want.n || math.Abs(r.Final.Mean-want.mean) > 1e-9 || r.Step != want.step || *cmp.Or(r.FromStep, &r.Step) != from || r.Cut || r.Broke {
				t.Errorf("the point: %+v, final %+v; want %v over %d seeds at steps %d-%d", r, r.Final, want.mean, want.n, from, want.step)
			}
			c := f.Curves["gla-lr.2"]
			switch {
			case want.last == nil && len(c) > 0:
				t.Errorf("the second seed is drawn by readings that are no result of its run: %v", c)
			case want.last != nil && (len(c) == 0 || c[len(c)-1] != *want.last):
				t.Errorf("the second seed's curve %v, want it to end at %v", c, *want.last)
			}
			if tt.name != "cancelled at step 900, then retried: queued" {
				return
			}
			// As the defect was seen: the table says the point has a seed still to run.
			file := writeSummary(t, sum, "gla-lr.json")
			out, errOut, code := gpuq(t, "results", file)
			if code != exitOK || !regexp.MustCompile(`\n1 +lr=0\.01 +1 of 2 +1\.800 +1\.800 +1000 +1 queued, 1 succeeded\n`).MatchString(out) {
				t.Errorf("exit %d: %s%s", code, out, errOut)
			}
		})
	}
}

// writeSummary writes a run's summary as gpuq run --json does, to a file of name in a
// test's directory, and returns its path.
func writeSummary(t *testing.T, sum api.SweepSummary, name string) string {
	t.Helper()
	data, err := json.Marshal(sum)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestACutDeviationKeepsItsSize: on a narrow terminal a final deviation that has no
// room whole is cut so that what is left says how large it is: 5.9e-05, cut as text,
// read "± 5.…", five where it is a hundred-thousandth.
func TestACutDeviationKeepsItsSize(t *testing.T) {
	sum := api.SweepSummary{Sweep: "glue", Counts: map[string]int{}}
	for _, task := range []string{"glue-tvt_qnli", "glue-mrpc"} {
		for _, lr := range []string{"1e-2", "1e-3"} {
			for seed := int64(1); seed <= 2; seed++ {
				p := plans.NewMap()
				p.Set("task", task)
				p.Set("lr", lr)
				p.Set("seed", seed)
				point := "task=" + task + ",lr=" + lr
				v := 0.5965 + float64(seed)*0.00008 // a deviation of 5.7e-05
				if lr == "1e-3" {
					v = 0.7989 + float64(seed)*0.0093 // of 0.0066
				}
				c := []api.MetricPoint{{Step: 100, Value: 0.3}, {Step: 200, Value: v}}
				sum.Jobs = append(sum.Jobs, api.JobSummary{ID: fmt.Sprintf("glue.%d", len(sum.Jobs)+1), Name: fmt.Sprintf("%s,lr=%s,seed=%d", task, lr, seed),
					Params: p, State: "succeeded", Point: fmt.Sprintf("%s,seed=%d", point, seed), SeedOf: point,
					Attempts: []api.AttemptSummary{{N: 1, Metrics: []api.MetricSummary{{Name: "eval_acc", Step: 200, Last: v, Curve: c, Min: 0.3, Max: v}}}}})
			}
		}
	}
	file := writeSummary(t, sum, "glue.json")
	for _, width := range []int{36, 37, 38, 40, 44} {
		out, errOut, code := gpuqIn(t, width, "results", file, "--by", "task", "--max")
		if code != exitOK {
			t.Fatalf("%d columns: exit %d: %s", width, code, errOut)
		}
		fitsWidth(t, out, width)
		_, table, _ := strings.Cut(out, "\n\n")
		for _, l := range strings.Split(table, "\n") {
			_, dev, ok := strings.Cut(l, "± ")
			if !ok || strings.HasPrefix(dev, "…") {
				continue
			}
			dev = strings.Fields(dev)[0]
			if !regexp.MustCompile(`^(0\.0066|0\.00[0-9]*…|0\.0…|0\.…|7e-03|5\.7e-05|6e-05)$`).MatchString(dev) {
				t.Errorf("%d columns: a deviation reads %q, which is not the size it is:\n%s", width, dev, out)
			}
		}
	}
}

// wideResultsFile is a sweep as a researcher names its parameters: 48 jobs, three
// tasks, two values each of learning_rate_for_the_optimizer,
// warmup_proportion_of_total_steps and model_dropout, two seeds; in each task the
// points of 1e-5 were stopped early, and a seed of each point of 1e-3 at dropout nan
// failed.
func wideResultsFile(t *testing.T) string {
	t.Helper()
	sum := api.SweepSummary{Sweep: "glue", Counts: map[string]int{}}
	for ti, task := range []string{"glue-tvt_qnli", "glue-mrpc", "glue-sst2"} {
		for li, lr := range []string{"1e-3", "1e-5"} {
			for wi, warmup := range []string{"0.06", "0.1"} {
				for di, dropout := range []string{"0.1", "nan"} {
					point := "task=" + task + ",learning_rate_for_the_optimizer=" + lr + ",warmup_proportion_of_total_steps=" + warmup + ",model_dropout=" + dropout
					for seed := int64(1); seed <= 2; seed++ {
						p := plans.NewMap()
						p.Set("task", task)
						p.Set("learning_rate_for_the_optimizer", lr)
						p.Set("warmup_proportion_of_total_steps", warmup)
						p.Set("model_dropout", dropout)
						p.Set("seed", seed)
						j := api.JobSummary{ID: fmt.Sprintf("glue.%d", len(sum.Jobs)+1), Name: fmt.Sprintf("%s,seed=%d", point, seed), Params: p,
							State: "succeeded", Point: fmt.Sprintf("%s,seed=%d", point, seed), SeedOf: point}
						switch {
						case li == 1:
							j.State = "stopped"
						case di == 1 && seed == 2:
							j.State = "failed"
						}
						v := 0.61 + float64(ti)/10 + float64(li)/5 + float64(wi)/50 + float64(di)/100 + float64(seed)/1000
						c := []api.MetricPoint{{Step: 100, Value: v + 0.3}, {Step: 1000, Value: v}}
						j.Attempts = []api.AttemptSummary{{N: 1, Metrics: []api.MetricSummary{{Name: "eval_loss", Step: 1000, Last: v, Curve: c, Min: v, Max: v + 0.3}}}}
						sum.Jobs = append(sum.Jobs, j)
					}
				}
			}
		}
	}
	return writeSummary(t, sum, "glue.json")
}

// TestResultsFitEveryWidth: gpuq results' table fits every terminal from 30 columns up,
// a point a line, grouped or not, whatever its points' names (at 34 columns, --by
// task, a row of long parameter names was 35 cells: the terminal wrapped it). Down to
// where every value fits whole, a name keeps each of its values whole, in its order,
// losing keys first (never a value while its key's stub stays: l…=1e-3,0.06 read as
// if the second value were the first's, and …s=0.06,mod… had lost one); and every row
// of a column cuts its names alike (one group read glue-tvt_qnli, the next
// task=glue-mrpc).
func TestResultsFitEveryWidth(t *testing.T) {
	for _, file := range []string{resultsSummaryFile(t), longResultsFile(t), runningResultsFile(t), wideResultsFile(t)} {
		for _, by := range []string{"", "task", "model"} {
			// The points as ranked, whole, a row each (a header first).
			piped, _, code := gpuq(t, "results", file, "--csv", "--by", by)
			if code != exitOK { // a sweep without that parameter
				continue
			}
			recs, err := csv.NewReader(strings.NewReader(piped)).ReadAll()
			if err != nil {
				t.Fatal(err)
			}
			for width := 30; width <= 100; width++ {
				args := []string{"results", file}
				if by != "" {
					args = append(args, "--by", by)
				}
				out, errOut, code := gpuqIn(t, width, args...)
				if code != exitOK {
					t.Fatalf("%v at %d: exit %d: %s", args, width, code, errOut)
				}
				fitsWidth(t, out, width)
				_, table, _ := strings.Cut(out, "\n\n")
				rows := strings.Split(strings.TrimSuffix(table, "\n"), "\n")
				if len(rows) != len(recs) {
					t.Fatalf("%v at %d: %d lines for %d points:\n%s", args, width, len(rows)-1, len(recs)-1, out)
				}
				if by != "" {
					keyed := 0
					for _, r := range rows[1:] {
						if strings.HasPrefix(r, by+"=") {
							keyed++
						}
					}
					if keyed != 0 && keyed != len(rows)-1 {
						t.Errorf("%v at %d: %d groups of %d keep their key:\n%s", args, width, keyed, len(rows)-1, out)
					}
				}
				if width < 40 {
					continue
				}
				// Each shown point has its values whole (a text value may lose its
				// start, "…qnli"), in order; a key where any of its row's has one.
				for i, r := range rows[1:] {
					fields := strings.Fields(r)
					if by != "" { // the group
						fields = fields[1:]
					}
					if _, err := strconv.Atoi(fields[0]); err == nil { // the rank
						fields = fields[1:]
					}
					point := fields[0]
					var want []string
					for _, p := range strings.Split(recs[i+1][2], ",") {
						if by == "" || !strings.HasPrefix(p, by+"=") {
							want = append(want, p)
						}
					}
					got := strings.Split(point, ",")
					if len(got) != len(want) {
						t.Errorf("%v at %d: point %q shown as %q, a value lost:\n%s", args, width, recs[i+1][2], point, out)
						continue
					}
					keys := strings.Contains(point, "=")
					for j, g := range got {
						wk, wv, _ := strings.Cut(want[j], "=")
						gk, gv, hasKey := strings.Cut(g, "=")
						if !hasKey {
							gk, gv = "", g
						}
						_, numErr := strconv.ParseFloat(wv, 64)
						switch {
						case gv != wv && (numErr == nil || !strings.HasPrefix(gv, "…") || !strings.HasSuffix(wv, strings.TrimPrefix(gv, "…"))):
							t.Errorf("%v at %d: point %q shown as %q: value %q is not whole:\n%s", args, width, recs[i+1][2], point, wv, out)
						case hasKey && !strings.HasPrefix(wk, strings.TrimSuffix(gk, "…")):
							t.Errorf("%v at %d: point %q shown as %q: key %q is not %q's:\n%s", args, width, recs[i+1][2], point, gk, wk, out)
						case keys && !hasKey && numErr == nil:
							t.Errorf("%v at %d: point %q shown as %q: %q without its key beside keys:\n%s", args, width, recs[i+1][2], point, wv, out)
						}
					}
				}
			}
		}
	}
}

// TestResultsStatesOutlastAWideGroup: on 40 columns, grouped, the seeds' states (JOBS)
// stay, shortened, where the groups and the points' keys can give them room: they
// were left out while each group kept 12 cells of its name, and a point whose seed
// failed, or was stopped early, read as finished.
func TestResultsStatesOutlastAWideGroup(t *testing.T) {
	for _, tt := range []struct {
		file, by string
		width    int
		want     []string
	}{
		{longResultsFile(t), "model", 40, []string{"1 fai…$", "1 fai…$", "1 fai…$", "1 fai…$"}},
		{wideResultsFile(t), "task", 45, []string{"2 su…$", "1 fa…$", "2 su…$", "1 fa…$", "2 st…$"}},
	} {
		out, _, _ := gpuqIn(t, tt.width, "results", tt.file, "--by", tt.by)
		_, table, _ := strings.Cut(out, "\n\n")
		rows := strings.Split(table, "\n")
		if !strings.HasSuffix(rows[0], "JOBS") {
			t.Errorf("%d columns, --by %s: no JOBS:\n%s", tt.width, tt.by, out)
			continue
		}
		for i, want := range tt.want {
			if !regexp.MustCompile(want).MatchString(rows[i+1]) {
				t.Errorf("%d columns, --by %s: row %d is %q, want %q:\n%s", tt.width, tt.by, i+1, rows[i+1], want, out)
			}
		}
	}
}
