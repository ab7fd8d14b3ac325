package state

import (
	"fmt"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/gpuq/gpuq/plans"
)

func TestMetricsAdd(t *testing.T) {
	r := func(step int64, name string, v float64) plans.Reading {
		return plans.Reading{Step: step, Name: name, Value: v}
	}
	var ms Metrics
	ms, changed := ms.Add([]plans.Reading{r(100, "loss", 2.5), r(100, "eval_acc", 0.5), r(200, "loss", 1.5)})
	if !changed || len(ms) != 2 {
		t.Fatalf("metrics %+v, changed %v", ms, changed)
	}
	loss := ms.Get("loss")
	if loss.Last != (Point{200, 1.5}) || loss.Min != 1.5 || loss.Max != 2.5 || len(loss.Series) != 2 {
		t.Errorf("loss %+v", loss)
	}
	if loss.Best(plans.Min) != 1.5 || loss.Best(plans.Max) != 2.5 {
		t.Errorf("best %v %v", loss.Best(plans.Min), loss.Best(plans.Max))
	}
	// A file read again from its start (a daemon started again) changes nothing.
	before := fmt.Sprint(ms)
	again, changed := ms.Add([]plans.Reading{r(100, "loss", 2.5), r(200, "loss", 1.5)})
	if changed || fmt.Sprint(again) != before {
		t.Errorf("read again: changed %v: %+v", changed, again)
	}
	// A value that is not a number is no point of a curve, but the metric keeps the
	// step it diverged at, past its latest reading (its final value is not 1.5), until
	// a number comes after it; read again, it changes nothing.
	nan, changed := ms.Add([]plans.Reading{r(300, "loss", math.NaN()), r(400, "loss", math.Inf(1))})
	if l := nan.Get("loss"); !changed || l.Diverged != 400 || l.Last != (Point{200, 1.5}) || len(l.Series) != 2 || ms.Get("loss").Diverged != 0 {
		t.Errorf("diverged: changed %v: %+v", changed, l)
	}
	if again, changed := nan.Add([]plans.Reading{r(200, "loss", 1.5), r(300, "loss", math.NaN()), r(400, "loss", 7)}); changed || again.Get("loss").Diverged != 400 {
		t.Errorf("diverged, read again: changed %v: %+v", changed, again.Get("loss"))
	}
	if back, _ := nan.Add([]plans.Reading{r(500, "loss", 1.2)}); back.Get("loss").Diverged != 0 || back.Get("loss").Last != (Point{500, 1.2}) {
		t.Errorf("a number after it: %+v", back.Get("loss"))
	}
	// The same step again replaces its reading (a trainer that logs twice a step).
	replaced, _ := ms.Add([]plans.Reading{r(200, "loss", 1.4)})
	if l := replaced.Get("loss"); l.Last != (Point{200, 1.4}) || len(l.Series) != 2 || l.Min != 1.4 {
		t.Errorf("replaced: %+v", l)
	}
	// Never in place: the store's copy stays as it was.
	if fmt.Sprint(ms) != before {
		t.Errorf("Add changed the metrics it was called on: %+v", ms)
	}
}

// TestMetricsBounded: however long a run and however many names its trainer reports,
// an attempt keeps maxMetrics curves of maxPoints, each spanning the whole run, with
// the latest reading and the best exact.
func TestMetricsBounded(t *testing.T) {
	var ms Metrics
	for step := int64(1); step <= 10_000; step++ {
		rs := []plans.Reading{{Step: step, Name: "loss", Value: 10 / float64(step)}}
		if step == 1 {
			for i := range 40 {
				rs = append(rs, plans.Reading{Step: 1, Name: fmt.Sprintf("m%02d", i), Value: 1})
			}
		}
		ms, _ = ms.Add(rs)
	}
	if len(ms) != maxMetrics {
		t.Errorf("%d metrics kept, want %d", len(ms), maxMetrics)
	}
	loss := ms.Get("loss")
	if n := len(loss.Series); n > maxPoints || n < maxPoints/2 {
		t.Errorf("%d points kept, want %d at most and half of that at least", n, maxPoints)
	}
	if first, last := loss.Series[0], loss.Series[len(loss.Series)-1]; first.Step != 1 || last != (Point{10_000, 0.001}) {
		t.Errorf("the curve runs from %+v to %+v, want from step 1 to the latest", first, last)
	}
	if loss.Min != 0.001 || loss.Max != 10 {
		t.Errorf("min %v max %v", loss.Min, loss.Max)
	}
}

// TestMetricsAndRungsJournal: an attempt's metrics, its stop reason and a job's rung
// readings come back from the journal as they were put.
func TestMetricsAndRungsJournal(t *testing.T) {
	dir := t.TempDir()
	s, _, _ := openState(t, dir)
	fill(t, s)
	snap := s.View()
	j := *snap.Job("j.3")
	j.State, j.Attempts, j.Rungs = JobRunning, 1, []Point{{500, 1.25}, {2000, math.MaxFloat64}}
	ms, _ := Metrics(nil).Add([]plans.Reading{{Step: 500, Name: "eval_loss", Value: 1.25}})
	a := &Attempt{ID: "j.3/1", Job: "j.3", Shape: j.Shape, N: 1, GPUs: []int{0}, Started: time.Unix(1e9, 0),
		Metrics: ms, StopReason: "stopped early at step 2000"}
	must(t, s.Put(Change{Jobs: []*Job{&j}, Attempts: []*Attempt{a}}))
	s.Close()
	again, _, _ := openState(t, dir)
	got := again.View()
	if !reflect.DeepEqual(got.Job("j.3").Rungs, j.Rungs) {
		t.Errorf("rungs %+v, want %+v", got.Job("j.3").Rungs, j.Rungs)
	}
	if ga := got.Attempt("j.3/1"); !reflect.DeepEqual(ga.Metrics, a.Metrics) || ga.StopReason != a.StopReason {
		t.Errorf("attempt %+v", ga)
	}
}
