package plans

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
)

const lrSweep = "name: t\ncommand: [echo, \"{seed}\"]\nmatrix: {task: [a, b], lr: [0.001, 0.01], seed: [1, 2]}\n"

func TestEarlyStopRead(t *testing.T) {
	s, err := DecodeSweep("t.yaml", []byte(lrSweep+"early_stop: {metric: eval_loss, mode: min, at: [500, 2000, 8000], keep: 0.34, within: [task], min_seeds: 2}\n"), Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	es := s.EarlyStop
	want := EarlyStop{Metric: "eval_loss", Mode: Min, At: []int64{500, 2000, 8000}, Keep: 0.34, Within: []string{"task"}, MinSeeds: 2}
	if es == nil || es.Metric != want.Metric || es.Mode != want.Mode || !slices.Equal(es.At, want.At) || es.Keep != want.Keep ||
		!slices.Equal(es.Within, want.Within) || es.MinSeeds != want.MinSeeds {
		t.Fatalf("early_stop = %+v, want %+v", es, want)
	}
	// Defaults: a third goes on, a point is judged on its first seed, one group.
	s, err = DecodeSweep("t.yaml", []byte(lrSweep+"early_stop: {metric: eval_acc, mode: max, at: 100}\n"), Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	if es := s.EarlyStop; es.Keep != DefaultKeep || es.MinSeeds != 1 || len(es.Within) != 0 || !slices.Equal(es.At, []int64{100}) {
		t.Errorf("defaults: %+v", es)
	}
	if s.GroupOf(&s.Jobs[0]) != "" {
		t.Errorf("without within the sweep is one group, got %q", s.GroupOf(&s.Jobs[0]))
	}
	s, _ = DecodeSweep("t.yaml", []byte(lrSweep), Overrides{})
	if s.EarlyStop != nil {
		t.Errorf("a sweep without early_stop has %+v", s.EarlyStop)
	}
}

func TestEarlyStopRefused(t *testing.T) {
	for _, tt := range []struct{ name, extra, want string }{
		{"not a mapping", "early_stop: eval_loss", "early_stop: write a mapping, e.g. early_stop: {metric: eval_loss"},
		{"unknown key", "early_stop: {metric: l, mode: min, at: [1], kepp: 0.5}", `early_stop.kepp: unknown key (did you mean "keep"?)`},
		{"no metric", "early_stop: {mode: min, at: [1]}", "early_stop.metric: name the metric"},
		{"step as metric", "early_stop: {metric: step, mode: min, at: [1]}", `early_stop.metric: "step" cannot name a metric`},
		{"no mode", "early_stop: {metric: l, at: [1]}", "early_stop.mode: write mode: min (lower is better: a loss) or mode: max"},
		{"bad mode", "early_stop: {metric: l, mode: lower, at: [1]}", "(got lower)"},
		{"no steps", "early_stop: {metric: l, mode: min}", "early_stop.at: write the steps"},
		{"steps not increasing", "early_stop: {metric: l, mode: min, at: [2000, 500]}", "early_stop.at: 500 after 2000: write whole steps from 1, each larger"},
		{"step zero", "early_stop: {metric: l, mode: min, at: [0]}", "early_stop.at"},
		{"keep 1", "early_stop: {metric: l, mode: min, at: [1], keep: 1}", "early_stop.keep: write the share of points that go on at each step, between 0 and 1"},
		{"keep a word", "early_stop: {metric: l, mode: min, at: [1], keep: half}", "(got half)"},
		{"within not a list", "early_stop: {metric: l, mode: min, at: [1], within: task}", "early_stop.within: write a list"},
		{"within misspelt", "early_stop: {metric: l, mode: min, at: [1], within: [taks]}", `early_stop.within: "taks" is a parameter of no job (did you mean "task"?)`},
		{"min_seeds zero", "early_stop: {metric: l, mode: min, at: [1], min_seeds: 0}", "early_stop.min_seeds: 0 is not a whole number of at least 1"},
		{"seeds misspelt", "seeds: [sed]", `seeds: "sed" is a parameter of no job (did you mean "seed"?)`},
		{"seeds not a list", "seeds: seed", "seeds: write a list of the parameters whose values repeat a point"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeSweep("t.yaml", []byte(lrSweep+tt.extra+"\n"), Overrides{})
			var probs Problems
			if !errors.As(err, &probs) {
				t.Fatalf("accepted, or not Problems: %v", err)
			}
			if !strings.Contains(err.Error(), "t.yaml: "+tt.want) && !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error\n  %v\nwant it to contain %q", err, tt.want)
			}
		})
	}
}

// TestPointsAndGroups: a job's point is its matrix values less its seeds (shape_ignores
// by default, or seeds as written), and its group the values early_stop.within names.
func TestPointsAndGroups(t *testing.T) {
	for _, tt := range []struct {
		name, extra string
		points      []string
	}{
		{"seed by default", "", []string{"task=a,lr=0.001", "task=a,lr=0.001", "task=a,lr=0.01"}},
		{"shape_ignores", "shape_ignores: [seed, lr]", []string{"task=a", "task=a", "task=a"}},
		// A learning rate that does not change memory is still a point of its own.
		{"seeds win over shape_ignores", "shape_ignores: [seed, lr]\nseeds: [seed]", []string{"task=a,lr=0.001", "task=a,lr=0.001", "task=a,lr=0.01"}},
		{"no seeds", "seeds: []", []string{"task=a,lr=0.001,seed=1", "task=a,lr=0.001,seed=2", "task=a,lr=0.01,seed=1"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, err := DecodeSweep("t.yaml", []byte(lrSweep+tt.extra+"\nearly_stop: {metric: l, mode: min, at: [1], within: [task]}\n"), Overrides{})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for i := range 3 {
				got = append(got, s.PointOf(&s.Jobs[i]))
			}
			if !slices.Equal(got, tt.points) {
				t.Errorf("points %q, want %q", got, tt.points)
			}
			if g := s.GroupOf(&s.Jobs[0]); g != "task=a" {
				t.Errorf("group %q, want task=a", g)
			}
		})
	}
}

// TestAPointOfParamsAloneIsNamedByWhatOthersSet: a point whose own values are its seeds
// alone, beside points an include entry (or a job of jobs) sets apart by a parameter,
// is named by that parameter's value in params (lr=0.001), not by the sweep's name,
// which names no value gpuq results could rank it by; a point with values of its own
// is named by them alone, and a sweep of seeds alone, or whose others set a parameter
// params does not have, after itself.
func TestAPointOfParamsAloneIsNamedByWhatOthersSet(t *testing.T) {
	const head = "name: t\ncommand: [echo, hi]\n"
	const lr = "\nparams: {lr: 0.001}"
	for _, tt := range []struct {
		name, body string
		points     []string
	}{
		{"include entries of their own", "matrix: {seed: [1, 2], include: [{seed: 3, lr: 0.01}, {seed: 4, lr: 0.01}]}" + lr,
			[]string{"lr=0.001", "lr=0.001", "lr=0.01", "lr=0.01"}},
		{"an include entry added to a combination", "matrix: {seed: [1, 2], include: [{seed: 2, lr: 0.01}]}" + lr,
			[]string{"lr=0.001", "lr=0.01"}},
		{"jobs", "jobs: [{seed: 1}, {seed: 2}, {seed: 1, lr: 0.01}]" + lr,
			[]string{"lr=0.001", "lr=0.001", "lr=0.01"}},
		{"several parameters, in the order written", "matrix: {seed: [1], include: [{seed: 2, warmup: 10, lr: 0.01}]}\nparams: {lr: 0.001, warmup: 0}",
			[]string{"warmup=0,lr=0.001", "warmup=10,lr=0.01"}},
		{"a point with values of its own", "matrix: {task: [a, b], include: [{task: a, lr: 0.01}]}" + lr,
			[]string{"task=a,lr=0.01", "task=b"}},
		{"seeds alone", "matrix: {seed: [1, 2]}" + lr, []string{"t", "t"}},
		{"a parameter params lacks", "matrix: {seed: [1], include: [{seed: 2, warmup: 10}]}" + lr,
			[]string{"t", "warmup=10"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, err := DecodeSweep("t.yaml", []byte(head+tt.body+"\n"), Overrides{})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for i := range s.Jobs {
				got = append(got, s.PointOf(&s.Jobs[i]))
			}
			if !slices.Equal(got, tt.points) {
				t.Errorf("points %q, want %q", got, tt.points)
			}
		})
	}
}

func TestModeBetter(t *testing.T) {
	nan := math.NaN()
	for _, tt := range []struct {
		mode Mode
		a, b float64
		want bool
	}{
		{Min, 0.9, 1.2, true}, {Min, 1.2, 0.9, false}, {Min, 1, 1, false},
		{Max, 0.9, 0.7, true}, {Max, 0.7, 0.9, false},
		// A diverged run is worse than any other, whichever way is better.
		{Min, nan, 5, false}, {Min, 5, nan, true}, {Max, nan, 0, false}, {Max, 0, nan, true}, {Max, nan, nan, false},
	} {
		if got := tt.mode.Better(tt.a, tt.b); got != tt.want {
			t.Errorf("%s.Better(%v, %v) = %v, want %v", tt.mode, tt.a, tt.b, got, tt.want)
		}
	}
}

func TestParseMetricsRecord(t *testing.T) {
	for _, tt := range []struct {
		name, line string
		n          int64
		want       []Reading
		ok         bool
	}{
		{"the issue's", `{"step": 500, "loss": 1.92, "eval_acc": 0.71}`, 1, []Reading{{500, "eval_acc", 0.71}, {500, "loss", 1.92}}, true},
		{"no step: the record's number", `{"loss": 2.5}`, 7, []Reading{{7, "loss", 2.5}}, true},
		{"global_step", `{"global_step": 40, "loss": 2.5}`, 1, []Reading{{40, "loss", 2.5}}, true},
		{"float step", `{"step": 12.0, "loss": 1}`, 1, []Reading{{12, "loss", 1}}, true},
		{"not numbers left out", `{"step": 1, "loss": 1, "phase": "train", "lrs": [1, 2], "ok": true, "sub": {"a": 1}}`, 1, []Reading{{1, "loss", 1}}, true},
		{"names that are no metric left out", `{"step": 1, "a b": 1, "loss": 2}`, 1, []Reading{{1, "loss", 2}}, true},
		{"Python's NaN", `{"step": 3, "loss": NaN, "gn": Infinity}`, 1, []Reading{{3, "gn", math.Inf(1)}, {3, "loss", math.NaN()}}, true},
		{"not JSON", `step 500 loss 1.9`, 1, nil, false},
		{"torn", `{"step": 500, "lo`, 1, nil, false},
		{"negative step", `{"step": -1, "loss": 1}`, 1, nil, false},
		{"step a string", `{"step": "x", "loss": 1}`, 1, nil, false},
		{"blank", `  `, 1, nil, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ParseMetricsRecord([]byte(tt.line), tt.n)
			if ok != tt.ok || len(got) != len(tt.want) {
				t.Fatalf("got %v %v, want %v %v", got, ok, tt.want, tt.ok)
			}
			for i := range got {
				g, w := got[i], tt.want[i]
				if g.Step != w.Step || g.Name != w.Name || g.Value != w.Value && !(math.IsNaN(g.Value) && math.IsNaN(w.Value)) {
					t.Errorf("reading %d = %+v, want %+v", i, g, w)
				}
			}
		})
	}
}
