package simulate

import (
	"math"
	"testing"
	"time"

	"github.com/gpuq/gpuq/plans"
)

// ends runs trainers on a machine of cards of 80 GiB and returns when each ended: each
// is {card, start, duration alone, utilization}.
func ends(t *testing.T, cards int, cost float64, trainers ...simRun) []time.Duration {
	t.Helper()
	m := newMachine(plans.GPUSpec{Simulated: []plans.SimulatedCards{{Count: cards, Bytes: 80 * gib}}})
	m.cost = cost
	out := make([]time.Duration, len(trainers))
	for i, tr := range trainers {
		m.wakeAt(tr.start)
		for m.now < tr.start {
			m.step()
		}
		m.start([]int{tr.card}, gib, tr.d, tr.util, func(o plans.Outcome, _ *plans.OOMFacts) {
			if o != plans.Success {
				t.Errorf("trainer %d: %s", i, o)
			}
			out[i] = m.now
		})
	}
	m.run()
	return out
}

// simRun is a trainer to run: on a card, from a moment, for a duration alone, at a
// utilization.
type simRun struct {
	card  int
	start time.Duration
	d     time.Duration
	util  float64
}

// TestSharingPhysics: the hand-worked cases of the model, rate = min(1, 1/Σu) ×
// (1 − c)^(k−1) of the solo speed, re-timed (work-conserving) when a trainer starts or
// ends on the card.
func TestSharingPhysics(t *testing.T) {
	h := time.Hour
	for _, c := range []struct {
		name     string
		cost     float64
		trainers []simRun
		want     []time.Duration
	}{
		{"two half-idle jobs finish at their solo duration", 0,
			[]simRun{{0, 0, h, 0.5}, {0, 0, h, 0.5}}, []time.Duration{h, h}},
		{"two compute-bound jobs take twice as long", 0,
			[]simRun{{0, 0, h, 1}, {0, 0, h, 1}}, []time.Duration{2 * h, 2 * h}},
		{"with a cost of 5% each takes 2.105 times as long", 0.05,
			[]simRun{{0, 0, h, 1}, {0, 0, h, 1}}, []time.Duration{dur(2 / 0.95 * 3600), dur(2 / 0.95 * 3600)}},
		// A runs alone for 30 min (half its work), then both at half speed: A's 30 min
		// left take 60, so it ends at 90; B has done 30 min of work by then, and its
		// last 30 alone end it at 120.
		{"a neighbour arriving half-way re-times the work left", 0,
			[]simRun{{0, 0, h, 1}, {0, h / 2, h, 1}}, []time.Duration{90 * time.Minute, 2 * h}},
		{"jobs on other cards do not slow each other", 0.05,
			[]simRun{{0, 0, h, 1}, {1, 0, h, 1}}, []time.Duration{h, h}},
		// Σu = 1.5: each at 2/3 until the short one's 20 min of work are done (at 30
		// min); the long one has done 20 of its 60 then, and its 40 left end it at 70.
		{"an oversubscribed card is shared in proportion", 0,
			[]simRun{{0, 0, h, 0.75}, {0, 0, h / 3, 0.75}}, []time.Duration{70 * time.Minute, 30 * time.Minute}},
		{"without gpu_util sharing costs nothing: start plus duration to the nanosecond", 0,
			[]simRun{{0, 0, h, 0}, {0, 7 * time.Second, h + 3, 0}, {0, 11 * time.Second, 5 * time.Minute, 0}},
			[]time.Duration{h, 7*time.Second + h + 3, 11*time.Second + 5*time.Minute}},
	} {
		got := ends(t, 2, c.cost, c.trainers...)
		for i := range got {
			if (got[i] - c.want[i]).Abs() > time.Millisecond {
				t.Errorf("%s: trainer %d ended at %v, want %v", c.name, i, got[i], c.want[i])
			}
		}
	}
}

func dur(seconds float64) time.Duration { return time.Duration(seconds * float64(time.Second)) }

// TestSharingRatio is the figure: with c = 0.05, two compute-bound jobs each take
// 2.105 times their solo duration.
func TestSharingRatio(t *testing.T) {
	got := ends(t, 1, 0.05, simRun{0, 0, time.Hour, 1}, simRun{0, 0, time.Hour, 1})
	if r := got[0].Hours(); math.Abs(r-2.105) > 0.0005 {
		t.Errorf("each takes %.4f x its solo duration, want 2.105", r)
	}
}

// TestSlowestCard: a job on two cards runs at the pace of the busier one.
func TestSlowestCard(t *testing.T) {
	m := newMachine(plans.GPUSpec{Simulated: []plans.SimulatedCards{{Count: 2, Bytes: 80 * gib}}})
	var wide, other time.Duration
	m.start([]int{0, 1}, gib, time.Hour, 1, func(plans.Outcome, *plans.OOMFacts) { wide = m.now })
	m.start([]int{1}, gib, time.Hour, 1, func(plans.Outcome, *plans.OOMFacts) { other = m.now })
	m.run()
	if wide != 2*time.Hour || other != 2*time.Hour {
		t.Errorf("ends %v and %v, want both 2h", wide, other)
	}
}

// TestReadUtilization: the simulated NVML reports a card's utilization as min(1, Σu) and
// each process's as its utilization, scaled down by its share where the card is
// oversubscribed; the card's mean since its trainers last changed as their sum.
func TestReadUtilization(t *testing.T) {
	m := newMachine(plans.GPUSpec{Simulated: []plans.SimulatedCards{{Count: 2, Bytes: 80 * gib}}})
	noop := func(plans.Outcome, *plans.OOMFacts) {}
	m.start([]int{0}, gib, time.Hour, 0.3, noop)
	m.start([]int{0}, gib, time.Hour, 0.5, noop)
	m.start([]int{1}, gib, time.Hour, 0.9, noop)
	m.start([]int{1}, gib, time.Hour, 0.6, noop)
	m.step() // every trainer allocates at 60 s
	cards, _ := m.Read()
	if cards[0].Utilization != 80 || cards[0].Processes[0].Util != 30 || cards[0].Processes[1].Util != 50 {
		t.Errorf("card 0: %d%%, processes %+v", cards[0].Utilization, cards[0].Processes)
	}
	if cards[1].Utilization != 100 || cards[1].Processes[0].Util != 60 || cards[1].Processes[1].Util != 40 {
		t.Errorf("card 1: %d%%, processes %+v", cards[1].Utilization, cards[1].Processes)
	}
	// The card's mean since its processes last changed: what they keep busy together.
	at := m.now
	m.now += 20 * time.Second
	cards, _ = m.Read()
	if cards[0].Busy != 80 || cards[0].BusyOver != m.now-at || cards[1].Busy != 100 || cards[1].BusyOver != m.now-at {
		t.Errorf("busy %d%% over %s and %d%% over %s, want 80%% and 100%% over %s", cards[0].Busy, cards[0].BusyOver, cards[1].Busy, cards[1].BusyOver, m.now-at)
	}
}
