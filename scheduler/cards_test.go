package scheduler

import (
	"strings"
	"testing"
	"time"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/gpu"
	"github.com/gpuq/gpuq/scheduler/state"
)

// cardsEngine is an engine over cards a test changes between rounds, on the fake
// clock, with a GiB of headroom and cfg's other settings (one slot a card, unless
// cfg says); its trainers run until told how they end.
func cardsEngine(t *testing.T, doc string, cards *[]gpu.Card, owners map[int]string, cfg Config) (*Engine, *state.Store, *fakeRunner, *[]Event) {
	t.Helper()
	sw, err := plans.DecodeSweep("m.yaml", []byte(doc), plans.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	fr := &fakeRunner{script: func(Launch) Exit { return Exit{} }, owners: owners}
	st, _ := state.NewStore()
	if cfg.Slots == nil {
		cfg.Slots = make([]int, len(*cards))
		for i := range cfg.Slots {
			cfg.Slots[i] = 1
		}
	}
	cfg.Headroom = plans.Headroom{Bytes: gib}
	var events []Event
	e := NewEngine(st, cardsInventory{cards}, fr, newFakeClock(), cfg, func(ev Event) { events = append(events, ev) })
	must(t, e.store.Submit(&state.Submission{Sweep: sw}))
	return e, st, fr, &events
}

func kinds(events []Event) string {
	var out []string
	for _, ev := range events {
		if !strings.Contains("started succeeded", ev.Kind) {
			out = append(out, ev.Job+" "+ev.Kind)
		}
	}
	return strings.Join(out, ", ")
}

// TestACardOutOfServiceTakesNoJob: a card NVML cannot read takes no new job and says
// why, once, in the events and in why; its running attempt is not abandoned; the other
// card keeps working; when NVML reads it again, it takes jobs again.
func TestACardOutOfServiceTakesNoJob(t *testing.T) {
	cards := []gpu.Card{{Index: 0, Total: 24 * gib}, {Index: 1, Total: 24 * gib}}
	e, st, fr, events := cardsEngine(t, "name: m\ncommand: [train]\nmatrix: {seed: [1, 2, 3, 4]}\nmemory: 10GiB\n", &cards, map[int]string{}, Config{UtilTarget: memoryAlone})
	e.cfg.Settle = time.Nanosecond // no ghost keeps a card
	round(t, e)
	if len(fr.starts) != 2 {
		t.Fatalf("%d started, want one per card", len(fr.starts))
	}
	onCard1 := fr.starts[1].Attempt.ID
	cards[1] = gpu.Card{Index: 1, Total: 24 * gib, Fault: "NVML: card 1: memory: ERROR_GPU_IS_LOST"}
	round(t, e)
	e.apply(Exit{Attempt: fr.starts[0].Attempt.ID, Outcome: plans.Success})
	e.apply(Exit{Attempt: onCard1, Outcome: plans.Success})
	round(t, e)
	round(t, e)
	if len(fr.starts) != 3 || fr.starts[2].Attempt.GPUs[0] != 0 {
		t.Fatalf("started %d; the third on %v, want it on card 0 alone", len(fr.starts), fr.starts[2].Attempt.GPUs)
	}
	if a := st.View().Attempt(onCard1); a.Outcome != plans.Success || !a.PeakUnknown {
		t.Errorf("the attempt on the lost card: %+v, want it to end as it ended, its peak unknown", a)
	}
	_, why, err := e.why("m.4")
	if err != nil || !strings.Contains(why, "GPU 1 is out of service (NVML: card 1: memory: ERROR_GPU_IS_LOST)") {
		t.Errorf("why m.4: %q %v", why, err)
	}
	cards[1].Fault = ""
	round(t, e)
	if len(fr.starts) != 4 || fr.starts[3].Attempt.GPUs[0] != 1 {
		t.Errorf("card 1 back: %d started", len(fr.starts))
	}
	if got, want := kinds(*events), "GPU 1 out-of-service, GPU 1 in-service"; got != want {
		t.Errorf("events %q, want %q", got, want)
	}
}

// TestUnattributedMemoryIsUnknown: where NVML lists a process this PID namespace does not
// have (a container), its memory is neither foreign nor a known peak: jobs are packed by
// estimates (NVML's total still counts it), and gpuq says so once, when it has seen it
// twice.
func TestUnattributedMemoryIsUnknown(t *testing.T) {
	cards := []gpu.Card{{Index: 0, Total: 24 * gib, Used: 6 * gib,
		Processes: []gpu.Process{{PID: 777001, Used: 5 * gib, Hidden: true}}}}
	e, st, fr, events := cardsEngine(t, "name: m\ncommand: [train]\nmatrix: {seed: [1, 2]}\nmemory: 10GiB\n", &cards, map[int]string{}, Config{UtilTarget: memoryAlone})
	e.cfg.Slots = []int{2}
	round(t, e)
	if got := kinds(*events); got != "" {
		t.Errorf("after one reading: %q; a process may have just ended", got)
	}
	round(t, e)
	if len(fr.starts) != 2 {
		t.Fatalf("%d started: want both, 20 GiB reserved beside NVML's 6 GiB used (not 20 GiB + 5 GiB foreign)", len(fr.starts))
	}
	e.apply(Exit{Attempt: fr.starts[0].Attempt.ID, Outcome: plans.Success})
	if a := st.View().Attempt(fr.starts[0].Attempt.ID); !a.PeakUnknown {
		t.Errorf("attempt %+v: want its peak unknown", a)
	}
	if got := kinds(*events); got != "GPU 0 unattributed" {
		t.Errorf("events %q, want one unattributed", got)
	}
}
