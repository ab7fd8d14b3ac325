package scheduler

import (
	"strings"
	"testing"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/gpu"
	"github.com/gpuq/gpuq/scheduler/pack"
)

// TestLook: what people see of the machine: each card's holders (gpuq's attempts by
// what their processes hold, other processes apart), whose each process is, the plan,
// drains, and why each queued job waits.
func TestLook(t *testing.T) {
	cards := []gpu.Card{{Index: 0, Total: 24 * gib, Utilization: 90, Temperature: 70}, {Index: 1, Total: 24 * gib}}
	e, _, _, _ := cardsEngine(t, "name: m\ncommand: [train]\nmemory: 10GiB\nmatrix: {seed: [1, 2, 3]}\n", &cards,
		map[int]string{4001: "m.1/1", 4002: "m.1/1"}, Config{UtilTarget: memoryAlone})
	must(t, e.round(nil)) // m.1 starts on GPU 0, m.2 on GPU 1
	must(t, e.drain(plans.CardID{Index: 1}, true))
	cards[0].Processes = []gpu.Process{{PID: 4001, Used: 6 * gib}, {PID: 4002, Used: gib}, {PID: 9000, Used: 2 * gib}}
	must(t, e.round(nil))

	views := e.cardViews()
	if len(views) != 2 {
		t.Fatalf("%d cards", len(views))
	}
	v0, v1 := views[0], views[1]
	if len(v0.Attempts) != 1 || v0.Attempts[0].Attempt.ID != "m.1/1" || v0.Attempts[0].Held != 7*gib || v0.Foreign != 2*gib || v0.Reserved != 10*gib ||
		v0.Slots != 1 || v0.Running != 1 || v0.Utilization != 90 || v0.Drained {
		t.Errorf("GPU 0: %+v", v0)
	}
	if ps := v0.Processes; len(ps) != 3 || ps[0].Attempt != "m.1/1" || ps[1].Attempt != "m.1/1" || ps[2].Attempt != "" || cards[0].Processes[0].Attempt != "" {
		t.Errorf("GPU 0's processes %+v (the round's card %+v)", ps, cards[0].Processes)
	}
	if !v1.Drained || v1.Slots != 1 || v1.Running != 1 || len(v1.Attempts) != 1 || v1.Attempts[0].Held != 0 {
		t.Errorf("GPU 1: %+v", v1)
	}

	waits, err := e.waits()
	if err != nil {
		t.Fatal(err)
	}
	if len(waits) != 1 || waits["m.3"].Reason != pack.NoSlot || !strings.Contains(waits["m.3"].Detail, "slot") {
		t.Errorf("waits: %+v", waits)
	}
}
