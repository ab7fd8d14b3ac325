package daemon

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/schedtest"
	"github.com/gpuq/gpuq/scheduler/state"
)

// TestOverview: what gpuq top reads: the simulated cards with their plan, each running
// attempt on its card (a held one says so), the queue with each job's reason (a held
// one says how to release it), and the events so far.
func TestOverview(t *testing.T) {
	d, _ := testAPI(t)
	c := clientOf(t, d)
	if _, err := c.Submit(api.SubmitRequest{File: "/s/o.yaml", Source: "name: o\ncommand: [train]\nmatrix: {seed: [1, 2, 3, 4]}\nmemory: 10GiB\ngpu_plan: \"1\"\n"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Act(api.Hold, api.SelectRequest{IDs: []string{"o.2", "o.4"}}); err != nil {
		t.Fatal(err)
	}
	ov, err := c.Overview()
	if err != nil {
		t.Fatal(err)
	}
	if ov.Simulated != "sim:2x24GiB" || len(ov.GPUs) != 2 || ov.Time.IsZero() {
		t.Fatalf("overview: %+v", ov)
	}
	for i, g := range ov.GPUs {
		if g.Index != i || g.TotalBytes != 24<<30 || g.Slots != -1 || g.Busy != 1 || len(g.Jobs) != 1 || g.Jobs[0].ReservedBytes != 10<<30 {
			t.Errorf("GPU %d: %+v", i, g)
		}
	}
	if len(ov.Running) != 2 || ov.Running[0].Job != "o.1" || ov.Running[0].DeclaredBytes != 10<<30 || ov.Running[0].Attempt != 1 ||
		ov.Running[0].Held || !ov.Running[1].Held {
		t.Errorf("running: %+v", ov.Running)
	}
	if len(ov.Queue) != 2 || !strings.HasPrefix(ov.Queue[0].Reason, "no-slot: ") || !ov.Queue[1].Held ||
		ov.Queue[1].Reason != "held: gpuq release o.4 lets it start" || ov.Queue[0].State != "queued" || ov.Queue[1].State != "held" {
		t.Errorf("queue: %+v", ov.Queue)
	}
	if len(ov.Events) != 4 || ov.Events[0].Job != "o.1" || ov.Events[0].Kind != "started" || ov.Events[3].Kind != "held" {
		t.Errorf("events: %+v", ov.Events)
	}
}

// TestOverviewTellsABlockedJob: a job that waits for what it runs after is blocked in
// the queue top reads, as gpuq status says, not queued.
func TestOverviewTellsABlockedJob(t *testing.T) {
	d, _ := testAPI(t)
	c := clientOf(t, d)
	if _, err := c.Submit(api.SubmitRequest{File: "/s/b.yaml", Source: "name: b\ncommand: [train]\nmatrix: {seed: [1]}\njobs: [{seed: 2, after: [b.1]}]\nmemory: 10GiB\n"}); err != nil {
		t.Fatal(err)
	}
	ov, err := c.Overview()
	if err != nil {
		t.Fatal(err)
	}
	if len(ov.Queue) != 1 || ov.Queue[0].Job != "b.2" || ov.Queue[0].State != "blocked" {
		t.Errorf("queue: %+v", ov.Queue)
	}
}

// TestOverviewTellsAnUnmeasuredShape: a running job whose shape counts as the whole
// card for want of a measurement says so to top, as gpuq status is told (all?), not as
// a measured 100%.
func TestOverviewTellsAnUnmeasuredShape(t *testing.T) {
	d, _ := testAPI(t)
	c := clientOf(t, d)
	if _, err := c.Submit(api.SubmitRequest{File: "/s/u.yaml", Source: "name: u\ncommand: [train]\nmatrix: {seed: [1]}\nmemory: 10GiB\n"}); err != nil {
		t.Fatal(err)
	}
	shape := d.store.View().Job("u.1").Shape
	if err := d.eng.Put(context.Background(), state.Change{Shapes: []*state.Shape{{Name: shape, Util: 1, UtilRuns: 1, Unmeasured: true}}}); err != nil {
		t.Fatal(err)
	}
	ov, err := c.Overview()
	if err != nil {
		t.Fatal(err)
	}
	if len(ov.Running) != 1 || ov.Running[0].Util == nil || *ov.Running[0].Util != 1 || !ov.Running[0].UtilUnmeasured {
		t.Errorf("running: %+v", ov.Running)
	}
}

// TestOverviewTellsARequeuedJob: a job that ran out of memory and waits again tells
// top how its latest attempt ended and at what tier, as gpuq status's REASON says it;
// one that has not run tells nothing of the kind.
func TestOverviewTellsARequeuedJob(t *testing.T) {
	d, r, _ := testDaemon(t)
	c := clientOf(t, d)
	if _, err := c.Submit(api.SubmitRequest{File: "/s/q.yaml", Source: "name: q\ncommand: [train]\nparams: {gradient_checkpointing: false}\nmatrix: {seed: [1, 2, 3, 4]}\nmemory: 10GiB\ngpu_plan: \"1\"\n" +
		"oom: {ladder: [{set: {gradient_checkpointing: true}}]}\n"}); err != nil {
		t.Fatal(err)
	}
	// Held as it runs, q.1 waits at tier 1 once it has run out of memory, and q.3 takes
	// its card.
	if _, err := c.Act(api.Hold, api.SelectRequest{IDs: []string{"q.1"}}); err != nil {
		t.Fatal(err)
	}
	r.exits <- scheduler.Exit{Attempt: "q.1/1", Outcome: plans.GPUOOM, OOM: &plans.OOMFacts{TriedBytes: 1 << 30}}
	var ov api.Overview
	schedtest.WaitFor(t, "q.3 to start", func() bool {
		var err error
		ov, err = c.Overview()
		return err == nil && slices.ContainsFunc(ov.Running, func(j api.RunningJob) bool { return j.Job == "q.3" })
	})
	want := []api.WaitingJob{{Job: "q.1", State: "held", Requeued: "requeued after gpu-oom at tier 0"}, {Job: "q.4", State: "queued"}}
	if len(ov.Queue) != len(want) {
		t.Fatalf("queue: %+v", ov.Queue)
	}
	for i, w := range want {
		if q := ov.Queue[i]; q.Job != w.Job || q.State != w.State || q.Requeued != w.Requeued {
			t.Errorf("queue[%d]: %+v, want %s %s with requeued %q", i, q, w.Job, w.State, w.Requeued)
		}
	}
}

// TestEventsToldLateKeepTheirPlace: an event told after others that it came before (an
// attempt on a lost worker, dated as its trainer ended) takes its place among them by
// time, and events of one time keep the order they were told in.
func TestEventsToldLateKeepTheirPlace(t *testing.T) {
	var r recentEvents
	at := time.Date(2026, 11, 27, 13, 59, 0, 0, time.UTC)
	for _, ev := range []scheduler.Event{
		{Time: at, Job: "wk.3", Kind: "started"},
		{Time: at.Add(20 * time.Second), Job: "wk.2", Kind: "succeeded"},
		{Time: at.Add(20 * time.Second), Job: "wk.4", Kind: "started"},
		{Time: at.Add(13 * time.Second), Job: "wk.1", Kind: "requeued"},
	} {
		r.add(ev)
	}
	var got []string
	for _, ev := range r.last() {
		got = append(got, ev.Job)
	}
	if want := []string{"wk.3", "wk.1", "wk.2", "wk.4"}; !slices.Equal(got, want) {
		t.Errorf("events in the order %v, want %v", got, want)
	}
}
