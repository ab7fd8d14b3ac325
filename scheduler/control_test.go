package scheduler

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/gpu"
	"github.com/gpuq/gpuq/scheduler/pack"
	"github.com/gpuq/gpuq/scheduler/state"
)

// stepEngine is an engine driven round by round over cards of 24 GiB with slots each;
// its trainers run until stopped.
func stepEngine(t *testing.T, doc string, slots ...int) (*Engine, *state.Store) {
	t.Helper()
	return limitedEngine(t, doc, nil, slots...)
}

// limitedEngine is stepEngine with the sweep limited to its own plan.
func limitedEngine(t *testing.T, doc string, limit state.Limit, slots ...int) (*Engine, *state.Store) {
	t.Helper()
	sw, err := plans.DecodeSweep("c.yaml", []byte(doc), plans.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	inv := fakeInventory{reads: new(int)}
	for i := range slots {
		inv.cards = append(inv.cards, gpu.Card{Index: i, Total: 24 * gib})
	}
	st, _ := state.NewStore()
	fr := &fakeRunner{script: func(Launch) Exit { return Exit{} }}
	e := NewEngine(st, inv, fr, newFakeClock(), Config{Slots: slots, Headroom: plans.Headroom{Bytes: gib}, UtilTarget: memoryAlone}, nil)
	must(t, e.store.Submit(&state.Submission{Sweep: sw, Limit: limit}))
	return e, st
}

func round(t *testing.T, e *Engine) {
	t.Helper()
	must(t, e.round(nil))
}

// applyStop applies the end of a stopped attempt.
func applyStop(e *Engine) { e.apply(<-e.runner.Exits()) }

func states(st *state.Store) string {
	var parts []string
	for _, j := range st.View().Jobs() {
		parts = append(parts, j.ID+":"+string(j.ShownState()))
	}
	return strings.Join(parts, " ")
}

const threeJobs = `name: c
command: [train]
matrix: {seed: [1, 2, 3]}
memory: 10GiB
`

func TestHoldCancelReleaseRetryAndDrain(t *testing.T) {
	e, st := stepEngine(t, threeJobs, 1)
	if _, err := e.hold(Selection{IDs: []string{"c.2"}}); err != nil {
		t.Fatal(err)
	}
	round(t, e)
	if got := states(st); got != "c.1:running c.2:held c.3:queued" {
		t.Fatalf("after hold: %s", got)
	}
	if _, detail, _ := e.why("c.2"); !strings.Contains(detail, "held; gpuq release c.2") {
		t.Errorf("why c.2: %s", detail)
	}
	if reason, _, _ := e.why("c.3"); reason != pack.NoSlot {
		t.Errorf("why c.3: %s", reason)
	}
	ids, err := e.cancel(Selection{IDs: []string{"c.1"}})
	if err != nil || len(ids) != 1 {
		t.Fatal(ids, err)
	}
	applyStop(e)
	round(t, e)
	if got := states(st); got != "c.1:cancelled c.2:held c.3:running" {
		t.Fatalf("after cancel: %s", got)
	}
	must(t, e.drain(plans.CardID{Index: 0}, true))
	if _, err := e.release(Selection{Sweep: "c"}); err != nil {
		t.Fatal(err)
	}
	e.cancel(Selection{IDs: []string{"c.3"}})
	applyStop(e)
	round(t, e)
	if got := states(st); got != "c.1:cancelled c.2:queued c.3:cancelled" {
		t.Fatalf("a drained card started a job: %s", got)
	}
	must(t, e.drain(plans.CardID{Index: 0}, false))
	round(t, e)
	if got := states(st); got != "c.1:cancelled c.2:running c.3:cancelled" {
		t.Fatalf("after undrain: %s", got)
	}
	if _, err := e.retry(Selection{IDs: []string{"c.1"}}); err != nil {
		t.Fatal(err)
	}
	if j := st.View().Job("c.1"); j.State != state.JobQueued || j.Since != 1 {
		t.Errorf("retried: %+v", j.Status)
	}
	for name, err := range map[string]error{
		"retry of a running job": second(e.retry(Selection{IDs: []string{"c.2"}})),
		"unknown job":            second(e.cancel(Selection{IDs: []string{"c.9"}})),
		"unknown sweep":          second(e.hold(Selection{Sweep: "nope"})),
		"unknown card":           e.drain(plans.CardID{Index: 7}, true),
	} {
		var r Refused
		if !errors.As(err, &r) {
			t.Errorf("%s: %v, want a refusal", name, err)
		}
	}
}

func second(_ []string, err error) error { return err }

// TestRetryAsCancelStops: gpuq retry of a sweep right after gpuq cancel of it, while
// cancel is still stopping its running jobs, puts those back in the queue as they stop,
// with the queued ones it cancelled, rather than pass them over as running. Cancelled
// again before it stops, a job forgets the retry; one that succeeds as it is being
// stopped has succeeded; one cancelled that ends otherwise than cancelled (lost, to
// be requeued) ends cancelled all the same.
func TestRetryAsCancelStops(t *testing.T) {
	e, st := stepEngine(t, threeJobs, 1, 1)
	round(t, e)
	if got := states(st); got != "c.1:running c.2:running c.3:queued" {
		t.Fatalf("before: %s", got)
	}
	if ids, err := e.cancel(Selection{Sweep: "c"}); err != nil || len(ids) != 3 {
		t.Fatal(ids, err)
	}
	if j := st.View().Job("c.1"); j.State != state.JobRunning || !j.Cancelling || j.RetryOnStop {
		t.Errorf("c.1 as cancel stops it: %+v", j.Status)
	}
	if n, err := WouldChange(st.View(), "retry", Selection{Sweep: "c"}); n != 3 || err != nil {
		t.Errorf("a retry of the sweep would change %d (%v), want 3", n, err)
	}
	ids, err := e.retry(Selection{Sweep: "c"})
	if err != nil || len(ids) != 3 {
		t.Fatalf("retry --sweep c as it stops: %v %v", ids, err)
	}
	if got := states(st); got != "c.1:running c.2:running c.3:queued" {
		t.Errorf("retried as they stop: %s", got)
	}
	if j := st.View().Job("c.2"); !j.Cancelling || !j.RetryOnStop {
		t.Errorf("c.2 retried as it stops: %+v", j.Status)
	}
	// c.1 stops; c.2, cancelled again, forgets the retry.
	if _, err := e.cancel(Selection{IDs: []string{"c.2"}}); err != nil {
		t.Fatal(err)
	}
	applyStop(e)
	applyStop(e)
	applyStop(e) // c.2's second stop: it has ended
	v := st.View()
	for id, want := range map[string]state.JobState{"c.1": state.JobQueued, "c.2": state.JobCancelled, "c.3": state.JobQueued} {
		j := v.Job(id)
		if j.State != want || j.Cancelling || j.RetryOnStop {
			t.Errorf("%s once stopped: %+v, want %s", id, j.Status, want)
		}
	}
	if j := v.Job("c.1"); j.Since != j.Attempts {
		t.Errorf("c.1 requeued by retry counts its attempts afresh: %+v", j.Status)
	}
	// A job that succeeds as it is being stopped has succeeded, retry or not.
	round(t, e)
	fr := e.runner.(*fakeRunner)
	fr.onStop = func(string) Exit { return Exit{Outcome: plans.Success} }
	if _, err := e.cancel(Selection{IDs: []string{"c.1"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.retry(Selection{IDs: []string{"c.1"}}); err != nil {
		t.Fatal(err)
	}
	applyStop(e)
	if j := st.View().Job("c.1"); j.State != state.JobSucceeded {
		t.Errorf("c.1, succeeded as it was stopped: %+v", j.Status)
	}
	// Lost as it was being stopped (its worker gone, say), which would requeue it.
	round(t, e)
	fr.onStop = func(string) Exit { return Exit{Outcome: plans.Lost, Requeue: true} }
	if _, err := e.cancel(Selection{IDs: []string{"c.3"}}); err != nil {
		t.Fatal(err)
	}
	applyStop(e)
	if j := st.View().Job("c.3"); j.State != state.JobCancelled || j.Cancelling {
		t.Errorf("c.3, lost as it was cancelled: %+v", j.Status)
	}
}

func TestASweepsOwnPlanLimitsItsJobs(t *testing.T) {
	e, st := limitedEngine(t, threeJobs, state.Limit{1: 1}, 4, 4)
	round(t, e)
	running := st.View().Running()
	if len(running) != 1 || running[0].GPUs[0] != 1 {
		t.Fatalf("running %+v; want one job, on GPU 1", running)
	}
	reason, detail, _ := e.why("c.2")
	if reason != pack.NoSlot || !strings.Contains(detail, "the sweep's gpu_plan") {
		t.Errorf("why c.2: %s %s", reason, detail)
	}
}

func TestCleanForgetsEndedSweeps(t *testing.T) {
	e, st := stepEngine(t, threeJobs, 1)
	round(t, e)
	var refused Refused
	if _, err := e.clean("c", 0); !errors.As(err, &refused) || !strings.Contains(err.Error(), "(1 running, 2 queued): gpuq cancel --sweep c") {
		t.Errorf("clean of a sweep that runs: %v", err)
	}
	if _, err := e.clean("nope", 0); !errors.As(err, &refused) {
		t.Errorf("clean of no sweep: %v", err)
	}
	// A sweep whose jobs never ran (cancelled while queued: the card is c's) ended
	// when it was cancelled, not long ago.
	q, _ := plans.DecodeSweep("q.yaml", []byte(strings.Replace(threeJobs, "name: c", "name: q", 1)), plans.Overrides{})
	must(t, e.store.Submit(&state.Submission{Sweep: q, Submitted: e.clock.Now()}))
	round(t, e)
	e.cancel(Selection{Sweep: "q"})
	e.cancel(Selection{Sweep: "c"})
	applyStop(e)
	if gone, err := e.clean("", time.Hour); err != nil || len(gone) != 0 {
		t.Errorf("clean of sweeps ended an hour ago forgot %d (%v); c and q have just ended", len(gone), err)
	}
	gone, err := e.clean("", 0)
	if err != nil || len(gone) != 2 || gone[0].Sweep.Name != "c" || len(st.View().Jobs()) != 0 {
		t.Fatalf("clean: %v, %v; %d jobs left", gone, err, len(st.View().Jobs()))
	}
	sw, _ := plans.DecodeSweep("c.yaml", []byte(threeJobs), plans.Overrides{})
	if err := e.store.Submit(&state.Submission{Sweep: sw}); err != nil {
		t.Errorf("a forgotten sweep's name submitted again: %v", err)
	}
}

// TestTheDefaultOfOneJobPerCardHoldsAcrossSweeps: sweeps whose jobs have no memory
// estimate and that write no gpu_plan each take the default of one job per card; two
// of them must not put two jobs on a card, whose memory nobody declared, either. A
// sweep with estimates is packed beside them by memory.
func TestTheDefaultOfOneJobPerCardHoldsAcrossSweeps(t *testing.T) {
	cards := []gpu.Card{{Index: 0, Total: 24 * gib}, {Index: 1, Total: 24 * gib}}
	st, _ := state.NewStore()
	e := NewEngine(st, fakeInventory{cards: cards, reads: new(int)}, &fakeRunner{script: func(Launch) Exit { return Exit{} }},
		newFakeClock(), Config{Slots: []int{plans.NoSlotLimit, plans.NoSlotLimit}, Headroom: plans.Headroom{Bytes: gib}, UtilTarget: memoryAlone}, nil)
	for _, doc := range []string{
		"name: a\ncommand: [train]\nmatrix: {seed: [1, 2]}\n",
		"name: b\ncommand: [train]\nmatrix: {seed: [1, 2]}\n",
		"name: m\ncommand: [train]\nmatrix: {seed: [1, 2]}\nmemory: 4GiB\n",
	} {
		sw, err := plans.DecodeSweep("s.yaml", []byte(doc), plans.Overrides{})
		must(t, err)
		limit, err := Admit(sw, cards)
		must(t, err)
		must(t, e.store.Submit(&state.Submission{Sweep: sw, Limit: limit}))
	}
	round(t, e)
	perCard := map[int][]string{}
	for _, a := range st.View().Running() {
		perCard[a.GPUs[0]] = append(perCard[a.GPUs[0]], a.Job)
	}
	for card, jobs := range perCard {
		unknown := 0
		for _, j := range jobs {
			if !strings.HasPrefix(j, "m.") {
				unknown++
			}
		}
		if unknown > 1 {
			t.Errorf("GPU %d runs %v: two jobs of unknown memory on one card", card, jobs)
		}
	}
	if got := states(st); got != "a.1:running a.2:running b.1:queued b.2:queued m.1:running m.2:running" {
		t.Errorf("after a round: %s", got)
	}
	if reason, detail, _ := e.why("b.1"); reason != pack.NoSlot || !strings.Contains(detail, "one job per card, the default") {
		t.Errorf("why b.1: %s %s", reason, detail)
	}
}

// TestSelectByWhere: a Where selects the jobs whose parameters meet it, in a sweep or in
// every sweep, passing over those the request does not apply to; a key or a value no
// job has is refused, so that a misspelt one does not read as "nothing to do".
func TestSelectByWhere(t *testing.T) {
	e, st := stepEngine(t, "name: c\ncommand: [train]\nmatrix: {task: [sst2, rte], seed: [1, 2]}\nmemory: 10GiB\n", 1)
	where := func(s string) plans.Where {
		w, err := plans.ParseWhere(s)
		must(t, err)
		return w
	}
	ids, err := e.hold(Selection{Where: where("task=sst2,seed=2|1")})
	if err != nil || strings.Join(ids, " ") != "c.1 c.2" {
		t.Fatalf("hold task=sst2: %v %v", ids, err)
	}
	ids, err = e.hold(Selection{Sweep: "c", Where: where("seed=1")})
	if err != nil || strings.Join(ids, " ") != "c.3" {
		t.Errorf("hold seed=1 of c passes over c.1, held already: %v %v", ids, err)
	}
	if got := states(st); got != "c.1:held c.2:held c.3:held c.4:queued" {
		t.Errorf("states: %s", got)
	}
	var refused Refused
	if _, err := e.release(Selection{Where: where("sed=1")}); !errors.As(err, &refused) || !strings.Contains(err.Error(), `(did you mean "seed"?)`) {
		t.Errorf("an unknown key: %v", err)
	}
	// A value no job has is refused alike, naming the values there are; a Where that
	// jobs meet, none of them in a state the request applies to, is not.
	for _, tc := range []struct {
		sel  Selection
		want string
	}{
		{Selection{Where: where("task=mnli")}, "no job has task=mnli (its task: rte, sst2)"},
		{Selection{Sweep: "c", Where: where("task=sst2,seed=3")}, "sweep c: no job has seed=3 (its seed: 1, 2)"},
		{Selection{Where: where("task=rte|mnli,seed=2|3")}, ""},
	} {
		_, err := e.cancel(tc.sel)
		if tc.want == "" && err != nil || tc.want != "" && (!errors.As(err, &refused) || err.Error() != tc.want) {
			t.Errorf("cancel %+v: %v, want %q", tc.sel, err, tc.want)
		}
	}
	ids, err = e.hold(Selection{Sweep: "c", Where: where("task=sst2")})
	if err != nil || len(ids) != 0 {
		t.Errorf("hold task=sst2, held already: %v %v", ids, err)
	}
}

// tickingClock moves on a nanosecond at each reading, as the wall clock does between
// two readings.
type tickingClock struct{ *fakeClock }

func (c tickingClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(time.Nanosecond)
	return c.now
}

// TestAVerbOfASweepStampsItsJobsAlike: the jobs that a cancel or a retry of a sweep
// ends or queues again get the one time of that change, so that they stay alike and
// are journaled as one set (see state.Change), not a record each.
func TestAVerbOfASweepStampsItsJobsAlike(t *testing.T) {
	e, st := stepEngine(t, threeJobs, 1)
	e.clock = tickingClock{newFakeClock()}
	alike := func(verb string, at func(*state.Job) time.Time) {
		t.Helper()
		jobs := st.View().Jobs()
		for _, j := range jobs[1:] {
			if !at(j).Equal(at(jobs[0])) || at(j).IsZero() {
				t.Errorf("after %s, %s at %s, %s at %s: want one time", verb, jobs[0].ID, at(jobs[0]), j.ID, at(j))
			}
		}
	}
	if _, err := e.cancel(Selection{Sweep: "c"}); err != nil {
		t.Fatal(err)
	}
	alike("cancel", func(j *state.Job) time.Time { return j.Ended })
	if _, err := e.retry(Selection{Sweep: "c"}); err != nil {
		t.Fatal(err)
	}
	alike("retry", func(j *state.Job) time.Time { return j.Queued })
}

// TestWhyOfAJobThatEnded: why tells how a job ended in words, and a reason that begins
// as the state is told goes on from it rather than say it twice.
func TestWhyOfAJobThatEnded(t *testing.T) {
	for _, tc := range []struct {
		state  state.JobState
		reason string
		want   string
	}{
		{state.JobSucceeded, "", "it succeeded"},
		{state.JobFailed, "out of memory on each of 4 attempts", "it failed: out of memory on each of 4 attempts"},
		{state.JobCancelled, "cancelled while running", "it was cancelled while running"},
		{state.JobCancelled, "", "it was cancelled"},
		{state.JobStopped, "stopped early at step 2000: eval_loss 0.91", "it was stopped early at step 2000: eval_loss 0.91"},
	} {
		if got := endedDetail(tc.state, tc.reason); got != tc.want {
			t.Errorf("%s, %q: %q, want %q", tc.state, tc.reason, got, tc.want)
		}
	}
}

// TestAVerbTellsEachJobOnce: a job named twice is changed and told once; a release of
// a sweep leaves out its jobs that ended held (cancelled while held), and a release
// of one of them by name is refused.
func TestAVerbTellsEachJobOnce(t *testing.T) {
	e, _ := stepEngine(t, threeJobs, 1)
	if ids, err := e.hold(Selection{IDs: []string{"c.2", "c.3", "c.2"}}); err != nil || strings.Join(ids, " ") != "c.2 c.3" {
		t.Fatalf("hold c.2 c.3 c.2: %v, %v", ids, err)
	}
	if _, err := e.cancel(Selection{IDs: []string{"c.3"}}); err != nil {
		t.Fatal(err)
	}
	if ids, err := e.release(Selection{Sweep: "c"}); err != nil || strings.Join(ids, " ") != "c.2" {
		t.Errorf("release of the sweep: %v, %v; want c.2 alone, not the cancelled c.3", ids, err)
	}
	var r Refused
	if _, err := e.release(Selection{IDs: []string{"c.3"}}); !errors.As(err, &r) || !strings.Contains(err.Error(), "ended") {
		t.Errorf("release of the cancelled c.3: %v, want a refusal", err)
	}
}

// adoptingRunner is a fakeRunner that takes up the attempts a last engine left.
type adoptingRunner struct {
	*fakeRunner
	adopted []string
}

func (r *adoptingRunner) Adopt(a *state.Attempt) Started {
	r.adopted = append(r.adopted, a.ID)
	return Started{}
}

// TestAdoptStopsWhatCancelWasStopping: a daemon that ended as gpuq cancel was stopping
// a job (its trainer perhaps not told) stops it again as the next one takes it up, and
// it ends cancelled; the others run on.
func TestAdoptStopsWhatCancelWasStopping(t *testing.T) {
	e, st := stepEngine(t, threeJobs, 1, 1)
	round(t, e)
	j := *st.View().Job("c.1")
	j.Cancelling = true
	must(t, st.Put(state.Change{Jobs: []*state.Job{&j}}))
	r := &adoptingRunner{fakeRunner: &fakeRunner{script: func(Launch) Exit { return Exit{} }}}
	next := NewEngine(st, e.inv, r, newFakeClock(), e.cfg, nil)
	if n, err := next.Adopt(); n != 2 || err != nil || len(r.adopted) != 2 {
		t.Fatalf("Adopt: %d %v, adopted %v", n, err, r.adopted)
	}
	select {
	case x := <-r.Exits():
		if x.Attempt != "c.1/1" {
			t.Fatalf("stopped %s, want c.1/1", x.Attempt)
		}
		next.apply(x)
	case <-time.After(time.Minute):
		t.Fatal("c.1, being cancelled, was not stopped again")
	}
	if got := states(st); got != "c.1:cancelled c.2:running c.3:queued" {
		t.Errorf("after adoption: %s", got)
	}
}

// TestSchedulesOnInWords: a drain of a card gpuq does not have lists those it has as
// gpuq names cards elsewhere, not as a Go slice ("[0 1 2]").
func TestSchedulesOnInWords(t *testing.T) {
	for _, tc := range []struct {
		cards []string
		want  string
	}{
		{nil, "gpuq has no card to schedule on"},
		{[]string{"node7:3"}, "gpuq schedules on GPU node7:3"},
		{[]string{"0", "1", "2"}, "gpuq schedules on GPUs 0, 1 and 2"},
	} {
		if got := schedulesOn(tc.cards); got != tc.want {
			t.Errorf("%q: %q, want %q", tc.cards, got, tc.want)
		}
	}
}
