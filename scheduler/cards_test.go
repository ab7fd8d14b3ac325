package scheduler

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/gpu"
	"github.com/gpuq/gpuq/scheduler/pack"
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

// TestIdleUseIsWithinTheHeadroom: what NVML counts as used on a card with nothing on it
// (the driver's own) is within the card's headroom, up to half of it, not on top of
// it: a job whose estimate is within a card's room fits the card idle, rather than fit
// no card and wait for ever; and at least half the headroom is kept free whatever the
// card reads.
func TestIdleUseIsWithinTheHeadroom(t *testing.T) {
	const idle = 600 << 20
	const big = "name: t\ncommand: [train]\nmatrix: {seed: [1, 2]}\nshape_ignores: [seed]\nmemory: 22.7GiB\n" // room 23 GiB
	submit := func(t *testing.T, e *Engine, doc string, limit state.Limit) {
		t.Helper()
		sw, err := plans.DecodeSweep("m.yaml", []byte(doc), plans.Overrides{})
		must(t, err)
		must(t, e.store.Submit(&state.Submission{Sweep: sw, Limit: limit}))
	}
	engine := func(t *testing.T, doc string, cards *[]gpu.Card, limit state.Limit, cfg Config) (*Engine, *state.Store) {
		t.Helper()
		if cfg.Slots == nil {
			cfg.Slots = slices.Repeat([]int{1}, len(*cards))
		}
		if cfg.Headroom == (plans.Headroom{}) {
			cfg.Headroom = plans.Headroom{Bytes: gib}
		}
		cfg.UtilTarget = memoryAlone
		st, _ := state.NewStore()
		e := NewEngine(st, cardsInventory{cards}, &fakeRunner{script: func(Launch) Exit { return Exit{} }, owners: map[int]string{101: "t.1/1", 102: "x.1/1", 103: "x.2/1"}},
			newFakeClock(), cfg, nil)
		submit(t, e, doc, limit)
		return e, st
	}
	rounds := func(t *testing.T, e *Engine, n int) {
		t.Helper()
		for range n {
			e.clock.(*fakeClock).now = e.clock.Now().Add(time.Minute)
			must(t, e.round(nil))
		}
	}
	runsOn := func(t *testing.T, e *Engine, st *state.Store, job string, gpus []int) {
		t.Helper()
		if j := st.View().Job(job); j.State != state.JobRunning {
			r, d, _ := e.why(job)
			t.Fatalf("%s is %s, want running on %v (why: %s: %s)", job, j.State, gpus, r, d)
		}
		if a := st.View().Attempt(job + "/1"); !slices.Equal(a.GPUs, gpus) {
			t.Errorf("%s runs on %v, want %v", job, a.GPUs, gpus)
		}
	}
	waits := func(t *testing.T, st *state.Store, job, why string) {
		t.Helper()
		if j := st.View().Job(job); j.State != state.JobQueued {
			t.Errorf("%s is %s, want queued: %s", job, j.State, why)
		}
	}
	t.Run("its estimate declared", func(t *testing.T) {
		cards := []gpu.Card{{Index: 0, Total: 24 * gib, Used: idle}}
		e, st := engine(t, big, &cards, nil, Config{})
		rounds(t, e, 1)
		runsOn(t, e, st, "t.1", []int{0})
	})
	t.Run("learned of a job of its shape", func(t *testing.T) {
		cards := []gpu.Card{{Index: 0, Total: 24 * gib, Used: idle}}
		doc := strings.Replace(big, "memory: 22.7GiB", "memory: 10GiB", 1)
		e, st := engine(t, doc, &cards, nil, Config{LearnAfter: time.Minute})
		rounds(t, e, 1)
		peak := 22*gib + 7*gib/10
		cards[0].Processes, cards[0].Used = []gpu.Process{{PID: 101, Used: peak}}, peak+idle
		rounds(t, e, 2)
		cards[0].Processes, cards[0].Used = nil, idle
		e.clock.(*fakeClock).now = e.clock.Now().Add(time.Minute)
		must(t, e.round([]Exit{{Attempt: "t.1/1", Outcome: plans.Success}}))
		rounds(t, e, 2)
		runsOn(t, e, st, "t.2", []int{0})
	})
	t.Run("beside a card never read idle", func(t *testing.T) {
		for _, other := range []gpu.Card{
			{Index: 1, Total: 24 * gib, Used: idle + 300<<20, Processes: []gpu.Process{{PID: 900, Used: 300 << 20}}},
			{Index: 1, Total: 24 * gib, Fault: "NVML: card 1: memory: ERROR_GPU_IS_LOST"},
			{Index: 1, Total: 48 * gib, Used: idle, Processes: []gpu.Process{{PID: 900, Used: 30 * gib}}},
		} {
			cards := []gpu.Card{{Index: 0, Total: 24 * gib, Used: idle}, other}
			e, st := engine(t, big, &cards, nil, Config{})
			rounds(t, e, 1)
			runsOn(t, e, st, "t.1", []int{0})
		}
	})
	t.Run("limited to the smaller of two", func(t *testing.T) {
		cards := []gpu.Card{{Index: 0, Total: 24 * gib, Used: idle}, {Index: 1, Total: 48 * gib, Used: idle}}
		e, st := engine(t, big, &cards, state.Limit{0: 1}, Config{})
		rounds(t, e, 1)
		runsOn(t, e, st, "t.1", []int{0})
	})
	t.Run("not on a card whose room is smaller", func(t *testing.T) {
		// Rooms of 21.6 and 20.7 GiB at 10%: 21.3 GiB fits card 0 alone.
		cards := []gpu.Card{{Index: 0, Total: 24 * gib, Used: idle}, {Index: 1, Total: 23 * gib, Used: idle}}
		doc := strings.Replace(big, "memory: 22.7GiB", "memory: 21.3GiB", 1)
		e, st := engine(t, doc, &cards, nil, Config{Headroom: plans.Headroom{Percent: 10}})
		rounds(t, e, 1)
		runsOn(t, e, st, "t.1", []int{0})
		waits(t, st, "t.2", "card 1's room is less than its estimate")
	})
	t.Run("half the headroom kept", func(t *testing.T) {
		// A foreign process come since the card was read idle: 1.2 GiB in use.
		cards := []gpu.Card{{Index: 0, Total: 24 * gib, Used: idle}}
		e, st := engine(t, "name: w\ncommand: [train]\nmatrix: {seed: [1]}\nmemory: 1GiB\n", &cards, state.Limit{5: 1}, Config{})
		rounds(t, e, 1)
		cards[0].Processes, cards[0].Used = []gpu.Process{{PID: 900, Used: idle}}, 2*idle
		submit(t, e, big, nil)
		rounds(t, e, 2)
		waits(t, st, "t.1", "a foreign process leaves 0.1 GiB of the 1 GiB headroom")
		// 5 GiB in use that no process is listed for (another container's): an 18.6 GiB
		// job would leave 0.4 GiB of the 1 GiB headroom.
		cards = []gpu.Card{{Index: 0, Total: 24 * gib, Used: idle + 5*gib}}
		e, st = engine(t, strings.Replace(big, "memory: 22.7GiB", "memory: 18.6GiB", 1), &cards, nil, Config{})
		rounds(t, e, 2)
		waits(t, st, "t.1", "it would leave 0.4 GiB of the 1 GiB headroom")
	})
	t.Run("more in use idle than half the headroom", func(t *testing.T) {
		// 23 GiB of room, 22.5 GiB free idle: a 22.95 GiB job fits neither the card
		// busy nor idle. It waits, too large, and the card is not kept for it while
		// x's jobs run there, to empty for nothing.
		cards := []gpu.Card{{Index: 0, Total: 24 * gib, Used: idle}}
		e, st := engine(t, "name: x\ncommand: [train]\nmatrix: {seed: [1, 2, 3, 4, 5, 6]}\nmemory: 10GiB\n", &cards, nil, Config{Slots: []int{2}})
		rounds(t, e, 1)
		submit(t, e, "name: t\ncommand: [train]\nmatrix: {seed: [1]}\nmemory: 22.95GiB\npriority: 5\n", nil)
		cards[0].Processes, cards[0].Used = []gpu.Process{{PID: 102, Used: 10 * gib}, {PID: 103, Used: 10 * gib}}, idle+20*gib
		rounds(t, e, 1)
		if d, _, err := e.Preview(); err != nil || d.Reservation != nil && d.Reservation.Job == "t.1" {
			t.Errorf("the card is kept for %+v (%v), want not for t.1", d.Reservation, err)
		}
		if r, d, _ := e.why("t.1"); r != "too-large" || !strings.Contains(d, "no card could ever offer that") || !strings.Contains(d, "in use idle") {
			t.Errorf("why t.1: %s: %s, want too large, saying what the card has in use idle", r, d)
		}
		cards[0].Processes, cards[0].Used = nil, idle
		e.clock.(*fakeClock).now = e.clock.Now().Add(time.Minute)
		must(t, e.round([]Exit{{Attempt: "x.1/1", Outcome: plans.Success}, {Attempt: "x.2/1", Outcome: plans.Success}}))
		waits(t, st, "t.1", "it fits no card")
		runsOn(t, e, st, "x.3", []int{0})
	})
	t.Run("a shape above every room on a card that keeps less", func(t *testing.T) {
		// Card 1, 24.5 GiB, read idle at 0.6 GiB; card 0, never read idle. t.1 ran at
		// 23.8 GiB on card 1, above every room; with a foreign 0.5 GiB come, card 1 has
		// 23.4 GiB free: not enough for t.2.
		cards := []gpu.Card{
			{Index: 0, Total: 24 * gib, Used: idle + 50<<20, Processes: []gpu.Process{{PID: 900, Used: 50 << 20}}},
			{Index: 1, Total: 24*gib + gib/2, Used: idle},
		}
		doc := strings.Replace(big, "memory: 22.7GiB", "memory: 10GiB", 1)
		e, st := engine(t, doc, &cards, state.Limit{1: 1}, Config{LearnAfter: time.Minute})
		rounds(t, e, 1)
		peak := 23*gib + 8*gib/10
		cards[1].Processes, cards[1].Used = []gpu.Process{{PID: 101, Used: peak}}, peak+idle
		rounds(t, e, 2)
		cards[1].Processes, cards[1].Used = []gpu.Process{{PID: 901, Used: gib / 2}}, idle+gib/2
		e.clock.(*fakeClock).now = e.clock.Now().Add(time.Minute)
		must(t, e.round([]Exit{{Attempt: "t.1/1", Outcome: plans.Success}}))
		rounds(t, e, 1)
		waits(t, st, "t.2", "card 1 has 23.4 GiB free, less than its 23.8")
		cards[1].Processes, cards[1].Used = nil, idle
		rounds(t, e, 1)
		runsOn(t, e, st, "t.2", []int{1})
	})
	t.Run("memory freed late", func(t *testing.T) {
		// Read idle at 0.6 GiB, then for a round 12.6 GiB with no process listed as two
		// trainers end: the card's idle use stays the least it read, and the two jobs
		// that share it start together once it reads 0.6 again.
		cards := []gpu.Card{{Index: 0, Total: 24 * gib, Used: idle}}
		e, st := engine(t, "name: t\ncommand: [train]\nmatrix: {seed: [1, 2, 3, 4]}\nmemory: 11GiB\n", &cards, nil, Config{Slots: []int{2}, Settle: time.Nanosecond})
		rounds(t, e, 1)
		cards[0].Used = idle + 12*gib
		e.clock.(*fakeClock).now = e.clock.Now().Add(time.Minute)
		must(t, e.round([]Exit{{Attempt: "t.1/1", Outcome: plans.Success}, {Attempt: "t.2/1", Outcome: plans.Success}}))
		waits(t, st, "t.3", "the card reads 12.6 GiB in use")
		cards[0].Used = idle
		rounds(t, e, 1)
		runsOn(t, e, st, "t.3", []int{0})
		runsOn(t, e, st, "t.4", []int{0})
	})
}

// idleUsesWritten is a journal's file that counts the records that put what was
// learned of cards' idle use.
type idleUsesWritten struct {
	state.JournalFile
	n *int
}

func (f idleUsesWritten) Write(b []byte) (int, error) {
	if strings.Contains(string(b), `"idle_uses":`) {
		*f.n++
	}
	return f.JournalFile.Write(b)
}

// TestIdleUseIsKeptAcrossARestart: what a card uses idle, learned before a restart,
// counts after it at once, though every card is busy then and none has been read idle
// since: a 12.7 GiB job starts beside a 10 GiB one on a 24 GiB card with 1 GiB of
// headroom, which it fits only with the card's 0.6 GiB idle use counted within the
// headroom (12.9 GiB free, not 12.4). It is written when first learned and when it is
// less, not at each round. Another card in its place (another UUID, or the same with
// other memory) is not counted so until it is read idle itself, and what was learned
// of the card it replaced is forgotten.
func TestIdleUseIsKeptAcrossARestart(t *testing.T) {
	const idle = 600 << 20
	card := gpu.Card{Index: 0, UUID: "GPU-5a3e", Total: 24 * gib, Used: idle}
	busy := func(c gpu.Card) gpu.Card {
		c.Processes, c.Used = []gpu.Process{{PID: 101, Used: 10 * gib}}, idle+10*gib
		return c
	}
	engine := func(st *state.Store, cards *[]gpu.Card) *Engine {
		return NewEngine(st, cardsInventory{cards}, &fakeRunner{script: func(Launch) Exit { return Exit{} }, owners: map[int]string{101: "x.1/1"}},
			newFakeClock(), Config{Slots: []int{2}, Headroom: plans.Headroom{Bytes: gib}, UtilTarget: memoryAlone}, nil)
	}
	submit := func(t *testing.T, st *state.Store, doc string, limit state.Limit) {
		t.Helper()
		sw, err := plans.DecodeSweep("m.yaml", []byte(doc), plans.Overrides{})
		must(t, err)
		must(t, st.Submit(&state.Submission{Sweep: sw, Limit: limit}))
	}
	// ranBefore is the state of a daemon that read card idle, started x.1 on it, and
	// stopped; written is how many of its records put idle uses.
	ranBefore := func(t *testing.T) (dir string, written int) {
		t.Helper()
		dir = t.TempDir()
		st := journaled(t, dir)
		st.WrapJournal(func(f state.JournalFile) state.JournalFile { return idleUsesWritten{f, &written} })
		cards := []gpu.Card{card}
		e := engine(st, &cards)
		submit(t, st, "name: x\ncommand: [train]\nmatrix: {seed: [1, 2]}\nmemory: 10GiB\nmax_running: 1\n", nil)
		round(t, e)
		cards[0] = busy(card)
		for range 3 {
			round(t, e)
		}
		if j := st.View().Job("x.1"); j.State != state.JobRunning {
			t.Fatalf("x.1 is %s, want running", j.State)
		}
		must(t, st.Close())
		return dir, written
	}
	big := "name: y\ncommand: [train]\nmatrix: {seed: [1]}\nmemory: 12.7GiB\n"

	t.Run("the same card", func(t *testing.T) {
		dir, written := ranBefore(t)
		if written != 1 {
			t.Errorf("%d records put idle uses, want the one that learned it", written)
		}
		st := journaled(t, dir)
		if u := st.View().IdleUses()[plans.CardID{Index: 0}]; u == nil || *u != (state.IdleUse{GPU: 0, UUID: card.UUID, Total: card.Total, Used: idle, Seen: newFakeClock().Now()}) {
			t.Fatalf("the idle use kept: %+v", u)
		}
		cards := []gpu.Card{busy(card)}
		e := engine(st, &cards)
		submit(t, st, big, nil)
		round(t, e)
		if j := st.View().Job("y.1"); j.State != state.JobRunning {
			r, d, _ := e.why("y.1")
			t.Errorf("y.1 is %s, want running beside x.1 (why: %s: %s)", j.State, r, d)
		}
		// Read idle at less, it is learned again, and kept.
		cards[0] = card
		cards[0].Used = idle / 2
		submit(t, st, "name: z\ncommand: [train]\nmatrix: {seed: [1]}\nmemory: 1GiB\n", state.Limit{5: 1}) // waits for card 5: rounds pack
		e.apply(Exit{Attempt: "x.1/1", Outcome: plans.Success})
		e.apply(Exit{Attempt: "y.1/1", Outcome: plans.Success})
		e.cfg.Settle = time.Nanosecond
		e.clock.(*fakeClock).now = e.clock.Now().Add(time.Minute)
		round(t, e)
		round(t, e)
		if j := st.View().Job("z.1"); j.State != state.JobQueued {
			t.Fatalf("z.1 is %s, want queued for card 5", j.State)
		}
		if u := st.View().IdleUses()[plans.CardID{Index: 0}]; u == nil || u.Used != idle/2 {
			t.Errorf("the idle use kept once read less: %+v, want %d", u, idle/2)
		}
	})
	for _, other := range []gpu.Card{
		{Index: 0, UUID: "GPU-77c1", Total: card.Total},
		{Index: 0, UUID: card.UUID, Total: card.Total + 256<<20}, // 12.65 GiB free without its idle use counted
	} {
		t.Run(fmt.Sprintf("another card %s of %s", other.UUID, plans.FormatSize(other.Total)), func(t *testing.T) {
			dir, _ := ranBefore(t)
			st := journaled(t, dir)
			cards := []gpu.Card{busy(other)}
			e := engine(st, &cards)
			submit(t, st, big, nil)
			round(t, e)
			if j := st.View().Job("y.1"); j.State != state.JobQueued {
				t.Errorf("y.1 is %s, want queued: the card in card 0's place was never read idle", j.State)
			}
			if u := st.View().IdleUses()[plans.CardID{Index: 0}]; u != nil {
				t.Errorf("the idle use of the card replaced is kept: %+v", u)
			}
		})
	}
}

// TestIdleUsesOfCardsAwayAreFew: the store keeps the idle use of the cards in the
// engine's reading, and of idleAwayKept of the cards away from it (their workers gone),
// those seen last: when a card left the reading, or else when its idle use was learned
// (never, in a state written before that was kept). It forgets the rest as a card joins
// the reading, once the engine has run long enough for the workers of a daemon
// started again to have linked again; a card read in another's place makes it forget
// the other's at once.
func TestIdleUsesOfCardsAwayAreFew(t *testing.T) {
	defer func(n int) { idleAwayKept = n }(idleAwayKept)
	idleAwayKept = 2
	clock := newFakeClock()
	began := clock.Now()
	card := func(worker string) gpu.Card {
		return gpu.Card{Worker: worker, UUID: "GPU-" + worker, Total: 24 * gib}
	}
	row := func(worker string, seen time.Time) *state.IdleUse {
		return &state.IdleUse{Worker: worker, UUID: "GPU-" + worker, Total: 24 * gib, Used: 600 << 20, Seen: seen}
	}
	dir := t.TempDir()
	st := journaled(t, dir)
	must(t, st.Put(state.Change{IdleUses: []*state.IdleUse{
		row("", began.Add(-30*24*time.Hour)), // this machine's card, seen longest ago but there throughout
		row("a", time.Time{}),                // of a state written before it was seen
		row("b", began.Add(-3*24*time.Hour)),
		row("c", began.Add(-2*24*time.Hour)),
		row("d", began.Add(-4*24*time.Hour)), // learned before b and c, there until later
	}}))
	cards := []gpu.Card{card(""), card("d")}
	e := NewEngine(st, &fakeCluster{cards: &cards}, &fakeRunner{script: func(Launch) Exit { return Exit{} }}, clock,
		Config{Headroom: plans.Headroom{Bytes: gib}, UtilTarget: memoryAlone}, nil)
	kept := func(st *state.Store, when string, want ...string) {
		t.Helper()
		var got []string
		for id := range st.View().IdleUses() {
			got = append(got, id.Worker)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s: the idle uses of %q are kept, want of %q", when, got, want)
		}
	}

	round(t, e) // a, b and c are away, one too many, but the engine has just begun
	kept(st, "as the engine begins", "", "a", "b", "c", "d")
	clock.now = began.Add(idlePruneAfter)
	cards = []gpu.Card{card("")} // d leaves: seen now
	round(t, e)
	if u := st.View().IdleUses()[plans.CardID{Worker: "d"}]; u == nil || !u.Seen.Equal(clock.now) {
		t.Errorf("d left at %s; its idle use is kept as %+v", clock.now, u)
	}
	kept(st, "as d leaves", "", "a", "b", "c", "d")
	cards = []gpu.Card{card(""), card("e")} // e joins
	round(t, e)
	kept(st, "as e joins", "", "c", "d")
	replaced := card("c")
	replaced.UUID = "GPU-77c1"
	cards = append(cards, replaced)
	round(t, e)
	kept(st, "as c comes back with another card", "", "d")
	st.Close()
	kept(journaled(t, dir), "after a restart", "", "d")
}

// TestAnotherGPUQsTrainerEnds: memory another gpuq's trainer holds on a card (the
// daemon's, seen by gpuq plan) keeps a job off the card now, as any process's does,
// but not for ever: the job waits for memory, not as too large for every card; a
// process that is no trainer's leaves it too large, as before.
func TestAnotherGPUQsTrainerEnds(t *testing.T) {
	for _, tc := range []struct {
		name    string
		trainer func(int) bool
		want    pack.Reason
	}{
		{"another gpuq's trainer", func(pid int) bool { return pid == 4100 }, pack.NoMemory},
		{"someone else's process", func(int) bool { return false }, pack.TooLarge},
		{"nothing tells trainers", nil, pack.TooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cards := []gpu.Card{{Index: 0, Total: 24 * gib, Used: 15 * gib, Processes: []gpu.Process{{PID: 4100, Used: 15 * gib}}}}
			e, _, fr, _ := cardsEngine(t, "name: m\ncommand: [train]\nmatrix: {seed: [1]}\nmemory: 12GiB\n", &cards, map[int]string{}, Config{UtilTarget: memoryAlone, Trainer: tc.trainer})
			round(t, e)
			if len(fr.starts) != 0 {
				t.Errorf("%d started beside 15 GiB of 24 in use", len(fr.starts))
			}
			if reason, _, err := e.why("m.1"); err != nil || reason != tc.want {
				t.Errorf("why m.1: %s, %v; want %s", reason, err, tc.want)
			}
		})
	}
}

// TestAJobThatWaitsForAnotherGPUQKeepsNoCard: a job that fits a card only once another
// gpuq's trainers there end keeps no card waiting for it: that gpuq starts trainers of
// its own there as its end, so a reservation could come due and hold the card from
// every job behind it for good. The jobs behind it go on starting there.
func TestAJobThatWaitsForAnotherGPUQKeepsNoCard(t *testing.T) {
	cards := []gpu.Card{{Index: 0, Total: 24 * gib, Used: 10 * gib, Processes: []gpu.Process{{PID: 4100, Used: 10 * gib}}}}
	e, st, fr, _ := cardsEngine(t, "name: big\ncommand: [train]\nmatrix: {seed: [1]}\nmemory: 20GiB\n", &cards, map[int]string{},
		Config{UtilTarget: memoryAlone, Slots: []int{4}, Trainer: func(pid int) bool { return pid == 4100 }})
	seeds := make([]string, 300)
	for i := range seeds {
		seeds[i] = fmt.Sprint(i + 1)
	}
	small, err := plans.DecodeSweep("s.yaml", []byte("name: small\ncommand: [train]\nmatrix: {seed: ["+strings.Join(seeds, ", ")+"]}\nmemory: 1GiB\n"), plans.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	must(t, st.Submit(&state.Submission{Sweep: small}))
	clock := e.clock.(*fakeClock)
	var late int // started past the 10 minutes after which a reservation with no known end comes due
	for minute := range 30 {
		from := len(fr.starts)
		round(t, e)
		for _, l := range fr.starts[from:] {
			e.apply(Exit{Attempt: l.Attempt.ID, Outcome: plans.Success})
			if minute > 12 {
				late++
			}
		}
		clock.now = clock.now.Add(time.Minute)
	}
	if reason, _, err := e.why("big.1"); err != nil || reason != pack.NoMemory {
		t.Errorf("why big.1: %s, %v; want %s", reason, err, pack.NoMemory)
	}
	if late == 0 {
		t.Errorf("no small job started after minute 12 of %d in all: the card is kept for big.1, which fits it only once the other gpuq's trainer ends", len(fr.starts))
	}
}
