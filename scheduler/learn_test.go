package scheduler

import (
	"testing"
	"time"

	"github.com/gpuq/gpuq/scheduler/gpu"
)

// TestRoundMeasuresAsOneAttemptAtATime: a round measures every running attempt from one
// pass over the cards' processes (usesOf); Apply measures one attempt by reading its
// cards (useOn). Both must read the same: the sum of the attempt's processes on each
// card, the most of those sums, and unknown where NVML cannot tell some of it, cannot
// tell whose a process is, or cannot read a card.
func TestRoundMeasuresAsOneAttemptAtATime(t *testing.T) {
	cards := []gpu.Card{
		{Index: 0, Total: 80 * gib, Processes: []gpu.Process{
			{PID: 1, Used: 3 * gib}, {PID: 2, Used: 4 * gib}, {PID: 3, Used: 5 * gib}, {PID: 9, Used: gib}}},
		{Index: 1, Total: 80 * gib, Processes: []gpu.Process{{PID: 4, Used: 9 * gib}, {PID: 5, Used: gpu.Unknown}}},
		{Index: 2, Total: 80 * gib, Processes: []gpu.Process{{PID: 6, Used: 2 * gib}, {PID: 7, Used: gib, Hidden: true}}},
		{Index: 3, Total: 80 * gib, Fault: "NVML: unknown error", Processes: []gpu.Process{{PID: 8, Used: gib}}},
		{Worker: "node1", Index: 0, Total: 80 * gib, Processes: []gpu.Process{{PID: 1, Used: 7 * gib, Attempt: "w.1/1"}}},
	}
	owners := map[int]string{1: "a.1/1", 2: "a.1/1", 3: "b.1/1", 4: "a.1/1", 5: "c.1/1", 6: "d.1/1", 8: "e.1/1"}
	st, _ := NewStore()
	e := NewEngine(st, cardsInventory{&cards}, &fakeRunner{owners: owners}, &fakeClock{now: time.Unix(0, 0)}, Config{}, nil)
	must(t, e.readCards())
	e.resolveOwners()
	for _, tc := range []struct {
		a       *Attempt
		most    int64
		unknown bool
	}{
		{&Attempt{ID: "a.1/1", GPUs: []int{0, 1}}, 9 * gib, false}, // 3+4 on card 0, 9 on card 1
		{&Attempt{ID: "b.1/1", GPUs: []int{0}}, 5 * gib, false},
		{&Attempt{ID: "c.1/1", GPUs: []int{1}}, 0, true},       // NVML cannot tell its use
		{&Attempt{ID: "d.1/1", GPUs: []int{2}}, 2 * gib, true}, // whose is the hidden process?
		{&Attempt{ID: "e.1/1", GPUs: []int{3}}, gib, true},     // the card cannot be read
		{&Attempt{ID: "w.1/1", Worker: "node1", GPUs: []int{0}}, 7 * gib, false},
		{&Attempt{ID: "f.1/1", GPUs: []int{0, 7}}, 0, false}, // nothing of its own; card 7 is gone
	} {
		one, oneUnknown := e.measure(tc.a)
		round, roundUnknown := e.measureBy(tc.a, e.usesOf())
		if one != tc.most || oneUnknown != tc.unknown {
			t.Errorf("%s alone: %d GiB (unknown %v), want %d GiB (unknown %v)", tc.a.ID, one/gib, oneUnknown, tc.most/gib, tc.unknown)
		}
		if round != one || roundUnknown != oneUnknown {
			t.Errorf("%s in a round: %d GiB (unknown %v), alone %d GiB (unknown %v)", tc.a.ID, round/gib, roundUnknown, one/gib, oneUnknown)
		}
	}
}
