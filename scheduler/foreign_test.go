package scheduler

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuq/gpuq/scheduler/gpu"
	"github.com/gpuq/gpuq/scheduler/state"
)

// TestARunBesideAForeignTrainerIsNotLearnedAlone: an attempt that ran its whole life
// on a card another user's trainer keeps busy shared that card, as much as one beside
// another of gpuq's attempts does: its shape learns it as a run shared, not as one
// alone, whose duration would then be taken for what the shape takes alone.
func TestARunBesideAForeignTrainerIsNotLearnedAlone(t *testing.T) {
	r := newComputeRig(t, "name: c\ncommand: [train]\nmatrix: {seed: [1, 2]}\nmemory: 10GiB\n", 2, Config{})
	r.keepBusy(40, "c.1", "c.2")
	// Not gpuq's: nobody owns pid 9000, which keeps GPU 0 30% busy.
	r.others[0] = []gpu.Process{{PID: 9000, Used: 6 * gib, Util: 30}}
	r.round(0)
	// Neither card is idle to c.2: it joins the other user's trainer.
	if got := r.where(); got != "c.1:1 c.2:0" {
		t.Fatalf("%s, want c.1 on the idle GPU 1 and c.2 beside the other user's trainer", got)
	}
	r.round(time.Minute)         // measured at 40%: 70% on GPU 0
	r.end("c.1", 29*time.Minute) // alone from its start: 30 min
	r.end("c.2", 45*time.Minute) // beside the foreign trainer from its start: 75 min
	a := r.st.View().Attempt("c.2/1")
	// Its first minute counted it as the whole card, beside 30%: at 1/1.3 of its speed.
	if pace := (1/1.3 + 74) / 75; math.Abs(a.Crowd-2) > 1e-6 || math.Abs(a.Pace-pace) > 1e-6 {
		t.Errorf("c.2 shared its card with %v on average at an expected pace of %v, want 2 (with the foreign trainer) and %v", a.Crowd, a.Pace, pace)
	}
	l := r.st.View().Shape(r.st.View().Job("c.1").Shape)
	if l.AloneRuns != 1 || l.Alone != 30*time.Minute {
		t.Errorf("shape learned %d runs alone at %s, want c.1's alone (30m0s): c.2 shared its card", l.AloneRuns, l.Alone)
	}
	if want := 30.0 / 75 / a.Pace; l.SharedRuns != 1 || math.Abs(l.Shared-want) > 1e-6 {
		t.Errorf("shape learned %d runs shared at %v, want c.2's, at 30/75 of its expected pace (%v)", l.SharedRuns, l.Shared, want)
	}
}

// TestAForeignProcessThatComputesNothingIsNoCompany: memory alone is not compute. A
// process of another user that holds memory on the card and keeps it idle (a notebook
// between cells) slows nobody: a run beside it is learned as alone.
func TestAForeignProcessThatComputesNothingIsNoCompany(t *testing.T) {
	r := newComputeRig(t, "name: c\ncommand: [train]\nmatrix: {seed: [1]}\nmemory: 10GiB\n", 1, Config{})
	r.keepBusy(40, "c.1")
	r.others[0] = []gpu.Process{{PID: 9000, Used: 20 * gib, Util: 0}, {PID: 9001, Used: gib, Util: 2}}
	r.round(0)
	if got := r.where(); got != "c.1:0" {
		t.Fatalf("%s, want c.1 on GPU 0", got)
	}
	r.end("c.1", 30*time.Minute)
	if a := r.st.View().Attempt("c.1/1"); a.Crowd != 1 {
		t.Errorf("c.1's crowd %v, want 1: alone", a.Crowd)
	}
	if l := r.st.View().Shape(r.st.View().Job("c.1").Shape); l.AloneRuns != 1 || l.SharedRuns != 0 {
		t.Errorf("shape learned %d runs alone and %d shared, want c.1 alone", l.AloneRuns, l.SharedRuns)
	}
}

// TestAForeignTrainerThatComesLaterIsCompanyFromThen: another user's trainer that
// starts on the card half-way through an attempt's run is company from then on: the
// attempt shared its card for half its run, and is learned as shared.
func TestAForeignTrainerThatComesLaterIsCompanyFromThen(t *testing.T) {
	r := newComputeRig(t, "name: c\ncommand: [train]\nmatrix: {seed: [1]}\nmemory: 10GiB\n", 1, Config{UtilTarget: memoryAlone})
	r.keepBusy(40, "c.1")
	r.round(0)
	r.round(time.Minute) // measured at 40%
	r.others[0] = []gpu.Process{{PID: 9000, Used: 6 * gib, Util: 50}}
	r.round(29 * time.Minute)
	r.end("c.1", 30*time.Minute)
	a := r.st.View().Attempt("c.1/1")
	// Alone 30 min; then beside it, at 0.4 + 0.5 (1, pace 1) for 30 min.
	if math.Abs(a.Crowd-1.5) > 1e-6 || math.Abs(a.Pace-1) > 1e-6 {
		t.Errorf("c.1's crowd %v at pace %v, want 1.5 at 1", a.Crowd, a.Pace)
	}
	if l := r.st.View().Shape(r.st.View().Job("c.1").Shape); l.AloneRuns != 0 {
		t.Errorf("shape learned %d runs alone, want none: c.1 shared its card half its run", l.AloneRuns)
	}
}

// TestAForeignTrainerIsCompanyByTheCardsFigure: where NVML gives no figure of each
// process, what the card's own figure has beyond what gpuq's attempts there count at is
// what the processes that are not gpuq's keep busy: company, once gpuq's attempt there
// counts at what its shape was measured at (as compute-bound, at first, it leaves them
// nothing).
func TestAForeignTrainerIsCompanyByTheCardsFigure(t *testing.T) {
	r := newComputeRig(t, "name: c\ncommand: [train]\nmatrix: {seed: [1, 2]}\nmemory: 10GiB\n", 2, Config{})
	r.perProcess = false
	r.keepBusy(40, "c.1", "c.2")
	r.others[0] = []gpu.Process{{PID: 9000, Used: 6 * gib, Util: 30}}
	r.round(0)
	// By the card's figure, the other user's trainer keeps GPU 0 busy to the packer
	// too: c.1 takes the idle GPU 1, and c.2 joins the trainer.
	if got := r.where(); got != "c.1:1 c.2:0" {
		t.Fatalf("%s, want c.1 on GPU 1 and c.2 beside the other user's trainer", got)
	}
	r.round(time.Minute) // c.1 measured alone at 40%: c.2 counts at it, the card's 70% leaves the other 30%
	r.round(time.Minute)
	r.end("c.1", 28*time.Minute)
	r.end("c.2", 45*time.Minute)
	// Beside the other user's trainer from its start, as the card read 30% before it
	// started, at 1/1.3 of its speed while it counted as the whole card; beside the
	// trainer, at 70%, from its first minute, as its shape was measured then.
	a := r.st.View().Attempt("c.2/1")
	if crowd, pace := 2.0, (1/1.3+74)/75; math.Abs(a.Crowd-crowd) > 1e-6 || math.Abs(a.Pace-pace) > 1e-6 {
		t.Errorf("c.2's crowd %v at pace %v, want %v at %v", a.Crowd, a.Pace, crowd, pace)
	}
	if l := r.st.View().Shape(r.st.View().Job("c.1").Shape); l.AloneRuns != 1 || l.Alone != 30*time.Minute || l.SharedRuns != 1 {
		t.Errorf("shape learned %d runs alone (%s) and %d shared, want c.1 alone (30m0s) and c.2 shared", l.AloneRuns, l.Alone, l.SharedRuns)
	}
}

// TestForeignOnReadsEachCard: what processes that are not gpuq's keep busy on a card,
// by their own figures, or by the card's beyond gpuq's where they have none; a process
// whose owner cannot be told (it could be gpuq's) is none.
func TestForeignOnReadsEachCard(t *testing.T) {
	cards := []gpu.Card{
		{Index: 0, Total: 80 * gib, Utilization: 90, Processes: []gpu.Process{{PID: 1, Used: gib, Util: 40}, {PID: 2, Used: gib, Util: 30}, {PID: 3, Used: gib, Util: 20}}},
		{Index: 1, Total: 80 * gib, Utilization: 90, Processes: []gpu.Process{{PID: 4, Used: gib, Util: gpu.NoReading}, {PID: 5, Used: gib, Util: gpu.NoReading}}},
		{Index: 2, Total: 80 * gib, Utilization: 45, Busy: 70, BusyOver: 30 * time.Second, Processes: []gpu.Process{{PID: 6, Used: gib, Util: gpu.NoReading}, {PID: 7, Used: gib, Util: gpu.NoReading}}},
		{Index: 3, Total: 80 * gib, Utilization: 43, Processes: []gpu.Process{{PID: 8, Used: gib, Util: gpu.NoReading}, {PID: 9, Used: gib, Util: gpu.NoReading}}},
		{Index: 4, Total: 80 * gib, Utilization: 90, Processes: []gpu.Process{{PID: 10, Used: gib, Util: 60, Hidden: true}, {PID: 11, Used: 20 * gib, Util: 4}}},
		{Index: 5, Total: 80 * gib, Fault: "unreadable"},
	}
	owners := map[int]string{1: "a.1/1", 4: "b.1/1", 6: "c.1/1", 8: "d.1/1"}
	e, _, _, _ := cardsEngine(t, "name: m\ncommand: [train]\nmatrix: {seed: [1]}\nmemory: 4GiB\n", &cards, owners, Config{})
	must(t, e.readCards())
	e.resolveOwners()
	now := e.clock.Now()
	for i, id := range []string{"a.1/1", "b.1/1", "c.1/1", "d.1/1"} {
		e.crowdJoin(&state.Attempt{ID: id, Shape: "s", GPUs: []int{i}, Started: now}, now, true)
	}
	_, err := e.changeShape("s", func(l *state.Shape) { l.LearnUtil(0.4) }, nil)
	must(t, err)
	for i, want := range []company{
		{2, 0.5}, // two others by their own figures
		{1, 0.5}, // the card's 90% less the attempt's 40%, for the other
		{1, 0.3}, // the card's mean (70%), not its moment's
		{},       // 3% beyond the attempt's 40%: nothing busy
		{},       // one that could be gpuq's, and one at 4%
		{},       // a card NVML cannot read
	} {
		if f := e.foreignOn(i); f.n != want.n || math.Abs(f.util-want.util) > 1e-9 {
			t.Errorf("GPU %d: %d at %v, want %d at %v", i, f.n, f.util, want.n, want.util)
		}
	}
	// The round looks through the cards that list a process of no attempt alone (GPU 4's
	// hidden one is none), and finds what foreignOn finds of each card; the packer
	// counts the same.
	e.crowdForeign(now)
	if want := []int{0, 1, 2, 3, 4}; !slices.Equal(e.owners.strangers, want) {
		t.Errorf("cards looked through %v, want %v", e.owners.strangers, want)
	}
	for i := range cards {
		if got, want := e.crowds.foreign[cards[i].ID()], e.foreignOn(i); got != want || e.foreignAt(i) != want {
			t.Errorf("GPU %d: the round counts %+v, the packer %+v, want %+v", i, got, e.foreignAt(i), want)
		}
	}
}

// TestAPlanSpeaksNotForAnotherUsersProcess: a gpu_plan is its sweep's word on how many
// of its own jobs share a card, and no word on another user's trainer: beside one that
// keeps the card busy, the sweep's jobs not measured yet count as any job not measured
// yet, and its second job does not join its first on a card the trainer keeps 90%
// busy, each counted as nothing.
func TestAPlanSpeaksNotForAnotherUsersProcess(t *testing.T) {
	r := newComputeRig(t, "name: a\ncommand: [train]\nmatrix: {seed: [1, 2]}\nmemory: 10GiB\ngpu_plan: \"2\"\n", 1, Config{})
	must(t, r.st.DeriveLimit("a", state.Limit{0: 2}))
	r.keepBusy(100, "a.1", "a.2")
	r.others[0] = []gpu.Process{{PID: 9000, Used: 6 * gib, Util: 90}}
	r.round(0)
	if got := r.where(); got != "a.1:0" {
		t.Fatalf("%s, want a.1 alone beside the other user's trainer, a.2 waiting", got)
	}
	if w := r.why("a.2"); !strings.Contains(w, "beside another sweep's or another user's process it counts as compute-bound") ||
		!strings.Contains(w, "GPU 0 runs a job of sweep a not measured yet, which counts as compute-bound beside another sweep's or another user's busy process") {
		t.Errorf("why a.2: %s", w)
	}
	// Without it, the plan has a's jobs fill the card's two slots.
	r.others = map[int][]gpu.Process{}
	r.round(time.Second)
	if got := r.where(); got != "a.1:0 a.2:0" {
		t.Errorf("the other user's trainer gone: %s, want a's two jobs on the card", got)
	}
}

// TestTheCardsFigureKeepsACardBusyToThePacker: where NVML gives no figure of each
// process, the packer counts on a card what processes that are not gpuq's keep busy
// by the card's own figure, as the crowd does (foreignOn): a card another user's
// trainer keeps 90% busy is no idle card, so the first job spreads to the idle one,
// and once the shape is measured, what the trainer keeps busy counts against the
// target there, so that a job that would join gpuq's job beside it would slow them.
func TestTheCardsFigureKeepsACardBusyToThePacker(t *testing.T) {
	r := newComputeRig(t, fourJobs, 2, Config{})
	r.perProcess = false
	r.keepBusy(40, "c.1", "c.2", "c.3", "c.4")
	// On GPU 0, the tighter fit by its memory: nothing else tells the cards apart to
	// a packer that counts the trainer as nothing.
	r.others[0] = []gpu.Process{{PID: 9000, Used: 6 * gib, Util: 90}}
	r.round(0)
	if got := r.where(); got != "c.1:1 c.2:0" {
		t.Fatalf("%s, want c.1 on the idle GPU 1 first, and c.2 beside the other user's trainer (GPU 1 runs a guess)", got)
	}
	cards := r.e.cardStates(nil, r.e.slots(), r.e.runningNow())
	if f := r.e.crowds.foreign[cards[0].ID()]; cards[0].Util != f.util+1 || f.n != 1 {
		t.Errorf("GPU 0's load %v, want the crowd's %v for the trainer, with c.2's guess (1)", cards[0].Util, f.util)
	}
	r.round(time.Minute) // c.1 measured alone at 40%
	r.round(time.Second) // c.2 counts at 40%: the card's 100% (capped) leaves the trainer 60%
	// c.3 fits GPU 1 (80%); beside c.2 and the trainer it would have GPU 0 at 140%.
	if got := r.where(); got != "c.1:1 c.2:0 c.3:1" {
		t.Fatalf("measured: %s, want c.3 beside c.1 on GPU 1, and c.4 waiting", got)
	}
	if w := r.why("c.4"); !strings.HasPrefix(w, "would-slow: would slow the jobs on GPU") {
		t.Errorf("why c.4: %s", w)
	}
	cards = r.e.cardStates(nil, r.e.slots(), r.e.runningNow())
	if math.Abs(cards[0].Util-1) > 1e-9 || !cards[0].Others {
		t.Errorf("GPU 0 counts at %v (others: %v), want c.2's 40%% and the trainer's 60%%", cards[0].Util, cards[0].Others)
	}
}

// TestAPlanCountsTheCardsFigure: gpuq plan (Preview, of an engine that never ran a
// round, whose crowd has read no card) counts what another user's trainer keeps busy
// by the card's own figure too, read there and then: its first job goes to the idle
// card.
func TestAPlanCountsTheCardsFigure(t *testing.T) {
	r := newComputeRig(t, fourJobs, 2, Config{})
	r.perProcess = false
	r.others[0] = []gpu.Process{{PID: 9000, Used: 6 * gib, Util: 90}, {PID: 9001, Used: gib, Util: 0}}
	r.show()
	d, cards, err := r.e.Preview()
	must(t, err)
	if len(d.Placements) == 0 || d.Placements[0].Cards[0] != 1 {
		t.Errorf("placements %+v, want the first job on the idle GPU 1", d.Placements)
	}
	if math.Abs(cards[0].Util-0.9) > 1e-9 || !cards[0].Others || cards[1].Util != 0 || cards[1].Others {
		t.Errorf("GPU 0 at %v (others: %v), GPU 1 at %v (others: %v), want 90%% of another user's and nothing", cards[0].Util, cards[0].Others, cards[1].Util, cards[1].Others)
	}
	// A card whose own figure leaves the processes that are not gpuq's less than
	// busyForeign is idle: memory alone is not compute.
	r.others[0] = []gpu.Process{{PID: 9000, Used: 6 * gib, Util: 4}}
	r.show()
	_, cards, err = r.e.Preview()
	must(t, err)
	if cards[0].Util != 0 || cards[0].Others {
		t.Errorf("GPU 0 at 4%% counts at %v (others: %v), want nothing", cards[0].Util, cards[0].Others)
	}
}

// notebook is another user's process that holds memory on a card and ran no kernel over
// NVML's window: NVML gives it no figure of its own.
var notebook = gpu.Process{PID: 9000, Used: 6 * gib, Util: gpu.NoReading}

// TestAnIdleNotebookIsNoCompanyBesideAPlannedSweep: where NVML gives gpuq's trainers
// their figures, a process it gives none ran nothing: a notebook holding its tensors
// between cells. It is no company, and no other user's process the sweep's plan would
// not speak for: its two jobs share the card as the plan says, each run beside the
// other alone. Read by the card's figure, the notebook was the whole card's 90% beyond
// the planned jobs, which count as nothing.
func TestAnIdleNotebookIsNoCompanyBesideAPlannedSweep(t *testing.T) {
	r := newComputeRig(t, "name: a\ncommand: [train]\nmatrix: {seed: [1, 2]}\nmemory: 10GiB\ngpu_plan: \"2\"\n", 1, Config{})
	must(t, r.st.DeriveLimit("a", state.Limit{0: 2}))
	r.keepBusy(45, "a.1", "a.2")
	r.others[0] = []gpu.Process{notebook}
	r.round(0)
	if got := r.where(); got != "a.1:0 a.2:0" {
		t.Fatalf("%s, want a's two jobs on the card, as planned", got)
	}
	r.round(30 * time.Second) // the trainers keep the card 90% busy
	if f, ok := r.e.crowds.foreign[r.cards[0].ID()]; ok {
		t.Errorf("the notebook counts as %+v, want nothing", f)
	}
	if cards := r.e.cardStates(nil, r.e.slots(), r.e.runningNow()); cards[0].Others {
		t.Errorf("GPU 0 has others busy to the packer, want none: the notebook computes nothing")
	}
	r.end("a.1", 29*time.Minute)
	if a := r.st.View().Attempt("a.1/1"); math.Abs(a.Crowd-2) > 1e-6 {
		t.Errorf("a.1 shared its card with %v on average, want 2: a.2, not the notebook", a.Crowd)
	}
}

// TestAnIdleNotebookIsNoCompanyBesideABusierTrainer: a trainer that keeps its card busier
// than its shape was measured at leaves the card's figure beyond that to nobody: where
// NVML gives the trainer its figure, the notebook it gives none ran nothing.
func TestAnIdleNotebookIsNoCompanyBesideABusierTrainer(t *testing.T) {
	r := newComputeRig(t, "name: c\ncommand: [train]\nmatrix: {seed: [1]}\nmemory: 10GiB\n", 1, Config{})
	r.keepBusy(40, "c.1")
	r.others[0] = []gpu.Process{notebook}
	r.round(0)
	r.round(time.Minute) // measured at 40%
	r.keepBusy(70, "c.1")
	r.round(time.Minute)
	if f, ok := r.e.crowds.foreign[r.cards[0].ID()]; ok {
		t.Errorf("the notebook counts as %+v, want nothing", f)
	}
	r.end("c.1", 28*time.Minute)
	if l := r.st.View().Shape(r.st.View().Job("c.1").Shape); l.AloneRuns != 1 || l.SharedRuns != 0 {
		t.Errorf("shape learned %d runs alone and %d shared, want c.1 alone", l.AloneRuns, l.SharedRuns)
	}
}

// TestAForeignProcessWithoutAFigureIsIdleBesideOneWithOne: on a card where NVML gives
// processes their figures, another user's trainer counts by its own, and another
// process it gives none counts as nothing, whatever the card's figure has beyond them;
// even one that keeps the card busy, once NVML gives it no figure (one that started
// since NVML last read them), counts as nothing until it has one.
func TestAForeignProcessWithoutAFigureIsIdleBesideOneWithOne(t *testing.T) {
	r := newComputeRig(t, "name: c\ncommand: [train]\nmatrix: {seed: [1]}\nmemory: 10GiB\n", 1, Config{})
	r.keepBusy(40, "c.1")
	r.others[0] = []gpu.Process{{PID: 9001, Used: 6 * gib, Util: 30}, notebook}
	r.round(0)
	r.round(time.Minute) // measured at 40%: the card reads 70%
	id := r.cards[0].ID()
	if f := r.e.crowds.foreign[id]; f != (company{1, 0.3}) {
		t.Errorf("others count as %+v, want the trainer's 30%% alone", f)
	}
	r.others[0] = append(r.others[0], gpu.Process{PID: 9002, Used: 6 * gib, Util: 20})
	r.unreadPIDs[9002] = true
	r.round(time.Second) // the card reads 90%
	if f := r.e.crowds.foreign[id]; f != (company{1, 0.3}) {
		t.Errorf("with a third process of no figure yet: others count as %+v, want the trainer's 30%% alone", f)
	}
	delete(r.unreadPIDs, 9002)
	r.round(time.Second)
	if f := r.e.crowds.foreign[id]; f.n != 2 || math.Abs(f.util-0.5) > 1e-9 {
		t.Errorf("once it reads 20%%: others count as %+v, want 2 at 50%%", f)
	}
}

// TestTheCardsFigureLeavesOthersNothingOfAPlannedSweep: where NVML gives no process a
// figure of its own, what the card's figure has beyond gpuq's is the others', gpuq's
// counted as the packer counts them: a planned sweep's jobs not measured yet at what
// they count beside others' (all of the card each), not the nothing their plan has
// them count as.
func TestTheCardsFigureLeavesOthersNothingOfAPlannedSweep(t *testing.T) {
	r := newComputeRig(t, "name: a\ncommand: [train]\nmatrix: {seed: [1, 2]}\nmemory: 10GiB\ngpu_plan: \"2\"\n", 1, Config{})
	must(t, r.st.DeriveLimit("a", state.Limit{0: 2}))
	r.perProcess = false
	r.keepBusy(45, "a.1", "a.2")
	r.others[0] = []gpu.Process{notebook}
	r.round(0)
	r.round(30 * time.Second)
	if got := r.where(); got != "a.1:0 a.2:0" {
		t.Fatalf("%s, want a's two jobs on the card, as planned", got)
	}
	if f, ok := r.e.crowds.foreign[r.cards[0].ID()]; ok {
		t.Errorf("the notebook counts as %+v, want nothing", f)
	}
	if cards := r.e.cardStates(nil, r.e.slots(), r.e.runningNow()); cards[0].Others {
		t.Errorf("GPU 0 has others busy to the packer, want none")
	}
}

// TestTheCardsFigureLeavesOthersNothingOfAStoppingTrainer: where NVML gives no process a
// figure of its own, an attempt that ended, whose trainer the card still lists as it
// stops, keeps the card busy by its shape's figure, not the other user's.
func TestTheCardsFigureLeavesOthersNothingOfAStoppingTrainer(t *testing.T) {
	r := newComputeRig(t, "name: c\ncommand: [train]\nmatrix: {seed: [1, 2]}\nmemory: 10GiB\n", 2, Config{})
	r.perProcess = false
	r.keepBusy(40, "c.1", "c.2")
	r.others[0] = []gpu.Process{{PID: 9001, Used: 6 * gib, Util: 30}}
	r.round(0)
	if got := r.where(); got != "c.1:1 c.2:0" {
		t.Fatalf("%s, want c.1 on GPU 1 and c.2 beside the other user's trainer", got)
	}
	r.round(time.Minute) // c.1 measured alone at 40%
	r.end("c.2", 29*time.Minute)
	// Its trainer still stops, on the card, as busy as it ran.
	r.fr.owners[9100] = "c.2/1"
	r.others[0] = append(r.others[0], gpu.Process{PID: 9100, Used: 5 * gib, Util: 40})
	r.round(time.Second)
	if f := r.e.crowds.foreign[r.cards[0].ID()]; f.n != 1 || math.Abs(f.util-0.3) > 1e-9 {
		t.Errorf("others count as %+v, want the other user's 30%% alone", f)
	}
}

// TestAForeignFigureThatMovesLittleRefreshesNoCrowd: NVML's figures move a point or so at
// nearly every reading; the attempts beside another user's trainer find their pace
// again only once what it keeps busy moved by more than foreignNear from what they
// count it at, not each round.
func TestAForeignFigureThatMovesLittleRefreshesNoCrowd(t *testing.T) {
	if !(company{1, 0.3}).near(company{1, 0.305}) || (company{1, 0.3}).near(company{1, 0.4}) || (company{1, 0.3}).near(company{2, 0.3}) {
		t.Errorf("near: want half a point near, ten points or one more process not")
	}
	r := newComputeRig(t, "name: c\ncommand: [train]\nmatrix: {seed: [1]}\nmemory: 10GiB\n", 1, Config{UtilTarget: memoryAlone})
	r.keepBusy(40, "c.1")
	r.others[0] = []gpu.Process{{PID: 9001, Used: 6 * gib, Util: 30}}
	r.round(0)
	r.round(time.Minute) // measured at 40%
	c, id := r.e.crowds.of["c.1/1"], r.cards[0].ID()
	was := c.since
	for _, step := range []struct {
		util    int
		refresh bool
		counted float64
	}{
		{31, false, 0.30}, // a point: counted as it was
		{30, false, 0.30},
		{31, false, 0.30},
		{32, true, 0.32}, // two points from what it counts at: found again
		{42, true, 0.42}, // ten points
		{42, false, 0.42},
	} {
		r.others[0][0].Util = step.util
		r.round(time.Minute)
		if refreshed := c.since != was; refreshed != step.refresh {
			t.Errorf("at %d%%: refreshed %v, want %v", step.util, refreshed, step.refresh)
		}
		if f := r.e.crowds.foreign[id]; f.n != 1 || math.Abs(f.util-step.counted) > 1e-9 {
			t.Errorf("at %d%%: counted at %+v, want %v", step.util, f, step.counted)
		}
		if cards := r.e.cardStates(nil, r.e.slots(), r.e.runningNow()); math.Abs(cards[0].Util-0.4-step.counted) > 1e-9 {
			t.Errorf("at %d%%: the packer counts %v, want c.1's 40%% and the crowd's %v", step.util, cards[0].Util, step.counted)
		}
		was = c.since
	}
}
