package report

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/state"
)

var update = flag.Bool("update", false, "rewrite the golden files")

const gib = 1 << 30

var t0 = time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)

func at(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }

// sample is a sweep of four jobs on two cards of 24 GiB, two slots each: one crowded
// out and retried, one stepped down its ladder twice, one still running at Now, one
// that failed. The machine has a third card, which the sweep did not use.
func sample() Data {
	busy := 0.45
	flat := func(b int64) state.Samples {
		return state.Samples{{At: 0, Bytes: 1 * gib}, {At: time.Minute, Bytes: b}}
	}
	return Data{Sweep: "gla-e1", Source: "gpuq run", Now: at(90),
		Cards: []Card{{Card: plans.Card{Index: 0, Name: "NVIDIA A10", Total: 24 * gib}}, {Card: plans.Card{Index: 1, Name: "NVIDIA A10", Total: 24 * gib}},
			{Card: plans.Card{Index: 2, Name: "NVIDIA A10", Total: 24 * gib}}},
		Jobs: []Job{
			{ID: "gla-e1.1", Name: "task=qnli,seed=87", State: "succeeded", Declared: 11 * gib, Learned: 14 * gib, Attempts: []Attempt{
				{N: 1, GPUs: []int{0}, Estimate: 11 * gib, Peak: 12 * gib, Outcome: plans.GPUOOM, Started: at(0), Ended: at(6),
					Memory: flat(12 * gib), OOM: &plans.OOMFacts{TriedBytes: 2 * gib}, Exit: "1",
					Error: "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."},
				{N: 2, GPUs: []int{0}, Estimate: 14 * gib, Peak: 14 * gib, Outcome: plans.Success, Started: at(7), Ended: at(60),
					Memory: flat(14 * gib), EffectiveBatch: 32, Util: &busy},
			}},
			{ID: "gla-e1.2", Name: "task=sst2,seed=87", State: "succeeded", Declared: 11 * gib, Learned: 9 * gib, Attempts: []Attempt{
				{N: 1, GPUs: []int{0}, Estimate: 11 * gib, Peak: 12 * gib, Outcome: plans.GPUOOM, Started: at(0), Ended: at(5),
					Memory: flat(12 * gib)},
				{N: 2, GPUs: []int{1}, Tier: 1, Changed: "gradient_checkpointing=true", Estimate: 12 * gib, Peak: 12 * gib,
					Outcome: plans.GPUOOM, Started: at(6), Ended: at(10), Memory: flat(12 * gib)},
				{N: 3, GPUs: []int{1}, Tier: 2, Changed: "batch_size=4,gradient_accumulation_steps=8", Estimate: 9 * gib,
					Peak: 9 * gib, Outcome: plans.Success, Started: at(11), Ended: at(80), Memory: flat(9 * gib), EffectiveBatch: 32},
			}},
			{ID: "gla-e1.3", Name: "task=cola,seed=87", State: "running", Declared: 10 * gib, Attempts: []Attempt{
				{N: 1, GPUs: []int{1}, Estimate: 10 * gib, Peak: 8 * gib, Started: at(12), Memory: flat(8 * gib)},
			}},
			{ID: "gla-e1.4", Name: "task=rte,seed=87", State: "failed", Declared: 10 * gib,
				Reason: "attempt 1 failed: exited with status 1: ValueError: loss is NaN", Attempts: []Attempt{
					{N: 1, GPUs: []int{0}, Estimate: 10 * gib, Peak: 3 * gib, Outcome: plans.Failed, Started: at(61), Ended: at(62),
						Memory: flat(3 * gib), Exit: "1", Error: "ValueError: loss is NaN"},
				}},
			{ID: "gla-e1.5", Name: "task=mrpc,seed=87", State: "queued", Declared: 10 * gib},
		}}
}

func TestFigures(t *testing.T) {
	f := figures(sample())
	checks := []struct {
		name      string
		got, want any
	}{
		{"makespan", f.Makespan, 90 * time.Minute},
		{"jobs", f.Jobs, 5},
		{"states", f.States, []Count{{"succeeded", 2}, {"failed", 1}, {"running", 1}, {"queued", 1}}},
		{"attempts", f.Attempts, 7},
		{"ooms", f.OOMs, 3},
		{"per job", f.PerJob, []Count{{"no attempt", 1}, {"1 attempt", 2}, {"2 attempts", 1}, {"3 attempts", 1}}},
		// 6+53+5+4+69+78+1 minutes
		{"attempt time", f.AttemptTime, 216 * time.Minute},
		{"attempt time lost", f.AttemptTimeLost, 16 * time.Minute},
		// GPU 0: 0-6, 7-60, 61-62; GPU 1: 6-10, 11-90.
		{"gpu time busy", f.GPUBusy, (6 + 53 + 1 + 4 + 79) * time.Minute},
		{"gpu time available", f.GPUAvailable, 3 * time.Hour}, // of the 2 cards used
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}
	// Attempt 2 of job 1 held 1 GiB for a minute, then 14 GiB for 52.
	if got, want := round(held(sample().Jobs[0].Attempts[1], at(60))), round((1.0+14*52)/60); got != want {
		t.Errorf("held %v GiB-hours, want %v", got, want)
	}
}

// TestStoppedEarlyTimeIsNotLost: the time of an attempt early stopping stopped (its
// point was losing) is counted apart from the time lost to attempts that failed, ran
// out of memory or were cancelled, and the page says both: the sweep meant it.
func TestStoppedEarlyTimeIsNotLost(t *testing.T) {
	d := Data{Sweep: "s", Now: at(30), Jobs: []Job{
		{ID: "s.1", State: "succeeded", Attempts: []Attempt{{N: 1, GPUs: []int{0}, Outcome: plans.Success, Started: at(0), Ended: at(20)}}},
		{ID: "s.2", State: "stopped", Attempts: []Attempt{{N: 1, GPUs: []int{1}, Outcome: plans.StoppedEarly, Started: at(0), Ended: at(7)}}},
		{ID: "s.3", State: "failed", Attempts: []Attempt{
			{N: 1, GPUs: []int{1}, Outcome: plans.GPUOOM, Started: at(7), Ended: at(9)},
			{N: 2, GPUs: []int{1}, Outcome: plans.Cancelled, Started: at(10), Ended: at(13)}}},
	}}
	f := figures(d)
	if f.AttemptTimeLost != 5*time.Minute || f.AttemptTimeStopped != 7*time.Minute || f.AttemptTime != 32*time.Minute {
		t.Errorf("lost %v, stopped %v of %v; want 5m0s and 7m0s of 32m0s", f.AttemptTimeLost, f.AttemptTimeStopped, f.AttemptTime)
	}
	var b bytes.Buffer
	if err := Write(&b, d); err != nil {
		t.Fatal(err)
	}
	if want := "5m of it lost in attempts that failed, ran out of memory or were cancelled, and 7m in attempts stopped early as their points were losing"; !strings.Contains(b.String(), want) {
		t.Errorf("the page does not say %q", want)
	}
}

// TestAttemptTimeSaysOnlyWhatHappened: the attempts' time names time lost, and time
// stopped early, only where there was some: "0s of it lost" reads as a loss.
func TestAttemptTimeSaysOnlyWhatHappened(t *testing.T) {
	ran := func(id, state string, o plans.Outcome) Job {
		return Job{ID: id, State: state, Attempts: []Attempt{{N: 1, GPUs: []int{0}, Outcome: o, Started: at(0), Ended: at(4)}}}
	}
	ok, cut, oom := ran("s.1", "succeeded", plans.Success), ran("s.2", "stopped", plans.StoppedEarly), ran("s.3", "failed", plans.GPUOOM)
	sentence := regexp.MustCompile(`attempts ran [^<]*`)
	for _, c := range []struct {
		jobs []Job
		want string
	}{
		{[]Job{ok}, "attempts ran 4m"},
		{[]Job{ok, oom}, "attempts ran 8m, 4m of it lost in attempts that failed, ran out of memory or were cancelled"},
		{[]Job{ok, cut}, "attempts ran 8m, 4m of it in attempts stopped early as their points were losing"},
		{[]Job{ok, oom, cut}, "attempts ran 12m, 4m of it lost in attempts that failed, ran out of memory or were cancelled, and 4m in attempts stopped early as their points were losing"},
	} {
		var b bytes.Buffer
		if err := Write(&b, Data{Sweep: "s", Now: at(30), Jobs: c.jobs}); err != nil {
			t.Fatal(err)
		}
		if got := sentence.FindString(b.String()); got != c.want {
			t.Errorf("%d jobs: the page says %q; want %q", len(c.jobs), got, c.want)
		}
	}
}

// TestFiguresCountEveryState: a sweep drawn as it runs counts its jobs in every state,
// those that wait for what they run after and those stopped early among them.
func TestFiguresCountEveryState(t *testing.T) {
	d := Data{Sweep: "s", Now: at(1), Jobs: []Job{{ID: "s.1", State: "blocked"}, {ID: "s.2", State: "stopped"}, {ID: "s.3", State: "held"}}}
	if got, want := figures(d).States, []Count{{"stopped", 1}, {"held", 1}, {"blocked", 1}}; !reflect.DeepEqual(got, want) {
		t.Errorf("states %v, want %v", got, want)
	}
}

func round(f float64) float64 { return float64(int64(f*1000+0.5)) / 1000 }

// TestLanes: attempts that overlap on a card get lanes of their own, and a lane is
// reused once free; a card row is as tall as its busiest moment; a card that ran
// nothing has no row.
func TestLanes(t *testing.T) {
	d := sample()
	f := figures(d)
	g := newGantt(d, timeline{start: f.Start, span: f.Makespan}, cards(d))
	if len(g.Rows) != 2 {
		t.Fatalf("%d rows, want the 2 cards that ran attempts", len(g.Rows))
	}
	lanes := func(r row) int { return int((r.H + laneGap) / (laneHeight + laneGap)) }
	if lanes(g.Rows[0]) != 2 || lanes(g.Rows[1]) != 2 {
		t.Errorf("lanes %d and %d, want 2 on each card", lanes(g.Rows[0]), lanes(g.Rows[1]))
	}
	ys := map[string]float64{}
	for _, b := range g.Bars {
		ys[b.Attempt] = b.Rects[0].Y
	}
	if ys["gla-e1.1/1"] == ys["gla-e1.2/1"] {
		t.Error("two attempts that ran at once on GPU 0 share a lane")
	}
	if ys["gla-e1.4/1"] != ys["gla-e1.1/1"] && ys["gla-e1.4/1"] != ys["gla-e1.2/1"] {
		t.Error("GPU 0's later attempt did not reuse a free lane")
	}
}

// TestGolden: the page as written for the sample sweep; -update rewrites it. One bar
// and one memory band per attempt, OOMs marked, nothing fetched from elsewhere.
func TestGolden(t *testing.T) {
	var buf bytes.Buffer
	if err := Write(&buf, sample()); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	if n := strings.Count(page, `<g class="bar `); n != 7 {
		t.Errorf("%d bars, want one per attempt (7)", n)
	}
	if n := strings.Count(page, `<polygon class="mem `); n != 7 {
		t.Errorf("%d memory bands, want one per attempt (7)", n)
	}
	if n := strings.Count(page, `<g class="oom">`); n != 3 {
		t.Errorf("%d OOM marks, want 3", n)
	}
	// Each attempt's history says how its trainer exited, and why.
	// The error on a row of its own under its attempt, across the page, not in a last
	// column that a narrow window scrolls away.
	if !regexp.MustCompile(`<td class="num">1</td></tr>\s*<tr class="error" data-job="[^"]+"><td colspan="5"></td><td colspan="11" class="reason">ValueError: loss is NaN</td></tr>`).MatchString(page) {
		t.Error("the failed attempt's exit status and error line are not in its history")
	}
	if m := regexp.MustCompile(`(src|href)="[^"#]`).FindString(page); m != "" {
		t.Errorf("the page loads something from elsewhere: %s", m)
	}
	golden := filepath.Join("testdata", "sample.html")
	if *update {
		if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if page != string(want) {
		t.Errorf("the page differs from %s (go test -update rewrites it)", golden)
	}
}

// TestWorkersCardsAreTheirOwn: card 0 of one worker and card 0 of another are two rows,
// each sized as its worker's, and two cards' busy time; an attempt names its worker.
func TestWorkersCardsAreTheirOwn(t *testing.T) {
	d := Data{Sweep: "w", Now: at(10),
		Cards: []Card{{Worker: "wa", Card: plans.Card{Index: 0, Total: 24 * gib}}, {Worker: "wb", Card: plans.Card{Index: 0, Total: 80 * gib}}},
		Jobs: []Job{
			{ID: "w.1", State: "succeeded", Attempts: []Attempt{{N: 1, Worker: "wa", GPUs: []int{0}, Started: at(0), Ended: at(10), Outcome: plans.Success}}},
			{ID: "w.2", State: "succeeded", Attempts: []Attempt{{N: 1, Worker: "wb", GPUs: []int{0}, Started: at(0), Ended: at(10), Outcome: plans.Success}}},
		}}
	cs := cards(d)
	if len(cs) != 2 || cs[0].id().String() != "wa:0" || cs[1].id().String() != "wb:0" || cs[1].Total != 80*gib {
		t.Fatalf("cards %+v, want wa:0 and wb:0 apart", cs)
	}
	f := figures(d)
	g := newGantt(d, timeline{start: f.Start, span: f.Makespan}, cs)
	if len(g.Rows) != 2 || g.Rows[0].Label != "GPU wa:0" || g.Rows[1].Label != "GPU wb:0" {
		t.Errorf("rows %+v", g.Rows)
	}
	if f.GPUBusy != 20*time.Minute {
		t.Errorf("busy %s, want the two cards' 10 minutes each", f.GPUBusy)
	}
	if got := cardsText(&d.Jobs[1].Attempts[0]); got != "wb:0" {
		t.Errorf("attempt's cards %q", got)
	}
}

// TestUnmeasuredMemoryIsNoFigure: where no attempt's memory was measured (no samples:
// the trainers' processes out of NVML's sight), the page says so, not that the
// trainers used 0% of what was reserved for them.
func TestUnmeasuredMemoryIsNoFigure(t *testing.T) {
	d := sample()
	for i := range d.Jobs {
		for k := range d.Jobs[i].Attempts {
			d.Jobs[i].Attempts[k].Memory = nil
		}
	}
	var b bytes.Buffer
	if err := Write(&b, d); err != nil {
		t.Fatal(err)
	}
	figure := regexp.MustCompile(`(?s)<div class="k">memory used / reserved</div>.*?</div></div>`).FindString(b.String())
	if strings.Contains(figure, "0%") || !strings.Contains(figure, "no attempt's memory was measured") {
		t.Errorf("the figure of memory nobody measured reads:\n%s", figure)
	}
}
