package scheduler

import (
	"slices"
	"testing"
	"time"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/gpu"
	"github.com/gpuq/gpuq/scheduler/state"
)

// TestOwnersKeptWhileListed: a process the runner no longer knows keeps last round's
// owner while NVML lists it; once it is on no card, it is forgotten, and it is foreign
// if it comes back. A process of an attempt on a card not the attempt's is not foreign.
// The runner is asked once per process and round.
func TestOwnersKeptWhileListed(t *testing.T) {
	var cards []gpu.Card
	fr := &fakeRunner{owners: map[int]string{5: "a.1/1", 6: "b.1/1"}}
	st, _ := state.NewStore()
	e := NewEngine(st, cardsInventory{&cards}, fr, &fakeClock{now: time.Unix(0, 0)}, Config{Slots: []int{1, 1}}, nil)
	a := &state.Attempt{ID: "a.1/1", GPUs: []int{0}, Estimate: gib}
	b := &state.Attempt{ID: "b.1/1", GPUs: []int{1}, Estimate: gib}
	for _, tc := range []struct {
		name     string
		forget   int   // the runner no longer knows this pid
		on0, on1 []int // the pids NVML lists on each card, 1 GiB each
		// what a measures, and the foreign memory on each card, a and b running
		held, foreign0, foreign1 int64
	}{
		{name: "known", on0: []int{5}, on1: []int{6}, held: gib},
		{name: "no longer known, still listed", forget: 5, on0: []int{5}, on1: []int{6}, held: gib},
		{name: "listed again", on0: []int{5, 6}, held: gib}, // b's process on a card not its own
		{name: "on no card", on1: []int{6}},
		{name: "back, forgotten", on0: []int{5}, on1: []int{6}, foreign0: gib},
	} {
		delete(fr.owners, tc.forget)
		cards = []gpu.Card{{Index: 0, Total: 24 * gib, Processes: listed(tc.on0)}, {Index: 1, Total: 24 * gib, Processes: listed(tc.on1)}}
		calls := fr.ownerCalls
		must(t, e.readCards())
		e.resolveOwners()
		if n, want := fr.ownerCalls-calls, len(tc.on0)+len(tc.on1); n != want {
			t.Errorf("%s: %d owner lookups for %d processes", tc.name, n, want)
		}
		if held, _ := e.measure(a); held != tc.held {
			t.Errorf("%s: a holds %s, want %s", tc.name, plans.FormatSize(held), plans.FormatSize(tc.held))
		}
		states := e.cardStates(nil, []int{1, 1}, []*state.Attempt{a, b})
		if states[0].Foreign != tc.foreign0 || states[1].Foreign != tc.foreign1 {
			t.Errorf("%s: foreign %s and %s, want %s and %s", tc.name, plans.FormatSize(states[0].Foreign),
				plans.FormatSize(states[1].Foreign), plans.FormatSize(tc.foreign0), plans.FormatSize(tc.foreign1))
		}
	}
}

// TestOwnersOfCardsReadAgain: cards read again after the round (as Preview reads them)
// are told by pid with the round's owners, whatever their order: a process the round
// did not see is foreign.
func TestOwnersOfCardsReadAgain(t *testing.T) {
	cards := []gpu.Card{{Index: 0, Total: 24 * gib, Processes: []gpu.Process{{PID: 5, Used: 3 * gib}, {PID: 6, Used: 4 * gib}}}}
	fr := &fakeRunner{owners: map[int]string{5: "a.1/1", 6: "b.1/1", 7: "b.1/1"}}
	st, _ := state.NewStore()
	e := NewEngine(st, cardsInventory{&cards}, fr, &fakeClock{now: time.Unix(0, 0)}, Config{Slots: []int{2}}, nil)
	must(t, e.readCards())
	e.resolveOwners()
	cards = []gpu.Card{{Index: 0, Total: 24 * gib, Processes: []gpu.Process{{PID: 6, Used: 4 * gib}, {PID: 5, Used: 3 * gib}, {PID: 7, Used: gib}}}}
	must(t, e.readCards())
	a, b := &state.Attempt{ID: "a.1/1", GPUs: []int{0}}, &state.Attempt{ID: "b.1/1", GPUs: []int{0}}
	if held, _ := e.measure(a); held != 3*gib {
		t.Errorf("a holds %s, want 3 GiB", plans.FormatSize(held))
	}
	if held, _ := e.measure(b); held != 4*gib {
		t.Errorf("b holds %s, want 4 GiB", plans.FormatSize(held))
	}
	if f := e.cardStates(nil, []int{2}, []*state.Attempt{a, b})[0].Foreign; f != gib {
		t.Errorf("foreign %s, want the 1 GiB of the process the round did not see", plans.FormatSize(f))
	}
}

// listed is a card's process list: the pids given, 1 GiB each.
func listed(pids []int) []gpu.Process {
	var out []gpu.Process
	for _, pid := range pids {
		out = append(out, gpu.Process{PID: pid, Used: gib})
	}
	return out
}

// TestOursTellsTheRoundsAttemptsOnAnyCard: a process is ours if its attempt is held
// this round, on the card it is on or another, or ended and its memory may still show
// (a ghost); a process of no attempt, or of one not held, is not. Asked again in a
// later round, the set is the new round's.
func TestOursTellsTheRoundsAttemptsOnAnyCard(t *testing.T) {
	cards := []gpu.Card{{Index: 0, Total: 80 * gib}, {Index: 1, Total: 80 * gib}, {Index: 2, Total: 80 * gib}}
	st, _ := state.NewStore()
	e := NewEngine(st, cardsInventory{&cards}, &fakeRunner{}, &fakeClock{now: time.Unix(0, 0)}, Config{Slots: []int{2, 2, 2}}, nil)
	must(t, e.readCards())
	attempt := func(id string, gpus ...int) *state.Attempt { return &state.Attempt{ID: id, GPUs: gpus} }
	e.ghosts = []ghost{{attempt: attempt("g.1/1", 2)}}
	// a on card 0, b on cards 0 and 1 (two cards at once), c on card 2.
	held := e.holdings([]*state.Attempt{attempt("a.1/1", 0), attempt("b.1/1", 0, 1), attempt("c.1/1", 2)}, nil)
	for _, round := range []struct {
		name string
		held []holding
		want map[[2]string]bool // (card position, attempt) → ours
	}{
		{"three held and a ghost", held, map[[2]string]bool{
			{"0", "a.1/1"}: true, {"0", "b.1/1"}: true, {"1", "b.1/1"}: true, {"2", "c.1/1"}: true,
			{"1", "a.1/1"}: true, // on a card not its own: still ours
			{"2", "a.1/1"}: true,
			{"0", "g.1/1"}: true, // a ghost's
			// No attempt's, or one not held.
			{"0", ""}: false, {"1", ""}: false, {"2", "x.1/1"}: false, {"0", "c.1/1/"}: false,
		}},
		{"a later round holding c alone", held[2:], map[[2]string]bool{
			{"2", "c.1/1"}: true, {"0", "a.1/1"}: false, {"1", "b.1/1"}: false, {"2", "g.1/1"}: true,
		}},
	} {
		ours := e.ours(round.held)
		for k, want := range round.want {
			i := int(k[0][0] - '0')
			if got := ours.is(i, k[1]); got != want {
				t.Errorf("%s: a process of %q on card %d is ours: %v, want %v", round.name, k[1], i, got, want)
			}
		}
	}
}

// TestCardAtAcrossLayouts: a machine's card is found where it is among the round's
// cards however they are listed (one machine's in index order, a fleet's machine by
// machine, out of order, a machine's cards apart), and found again where it moved when
// the cards read differ from the round before's, not where it was; a card not listed
// is not found. The layouts are read one after another by one engine.
func TestCardAtAcrossLayouts(t *testing.T) {
	type id = plans.CardID
	c := func(worker string, idx int) id { return id{Worker: worker, Index: idx} }
	var cards []gpu.Card
	st, err := state.NewStore()
	must(t, err)
	e := NewEngine(st, cardsInventory{&cards}, &fakeRunner{}, &fakeClock{now: time.Unix(0, 0)}, Config{}, nil)
	for _, tc := range []struct {
		name  string
		cards []id
	}{
		{"one machine", []id{c("", 0), c("", 1), c("", 2)}},
		{"fleet", []id{c("w0", 0), c("w0", 1), c("w1", 0), c("w1", 1), c("w2", 0), c("w2", 1)}},
		{"same fleet again", []id{c("w0", 0), c("w0", 1), c("w1", 0), c("w1", 1), c("w2", 0), c("w2", 1)}},
		{"a machine gone", []id{c("w0", 0), c("w0", 1), c("w2", 0), c("w2", 1)}},
		{"out of order", []id{c("w2", 1), c("w2", 0), c("w0", 1), c("w0", 0)}},
		{"a machine's cards apart", []id{c("w0", 0), c("w2", 0), c("w0", 1), c("w2", 1)}},
		{"a card of a machine missing", []id{c("w0", 1), c("w2", 0), c("w2", 1)}},
		{"local cards after a fleet", []id{c("", 0), c("", 1)}},
	} {
		cards = nil
		for _, k := range tc.cards {
			cards = append(cards, gpu.Card{Worker: k.Worker, Index: k.Index, Total: 24 * gib})
		}
		must(t, e.readCards())
		for _, w := range []string{"", "w0", "w1", "w2", "w3"} {
			for idx := -1; idx <= 2; idx++ {
				want, wantOK := slices.Index(tc.cards, c(w, idx)), true
				if want < 0 {
					want, wantOK = 0, false
				}
				if got, ok := e.cardAt(w, idx); got != want && ok || ok != wantOK {
					t.Errorf("%s: card %s at %d (found %v), want %d (found %v)", tc.name, c(w, idx), got, ok, want, wantOK)
				}
			}
		}
	}
}

// TestCardAtWhenTheInventoryRefillsItsArray: an inventory may hand the engine the same
// array every reading, filled again (the simulator's machine does: the engine keeps a
// reading only until its next). Cards listed in another order there, as many and the
// same ones, are found where they are now, not where the last reading had them: the
// round's check that the list is unchanged cannot compare the array with itself.
func TestCardAtWhenTheInventoryRefillsItsArray(t *testing.T) {
	cards := []gpu.Card{{Index: 2, Total: 24 * gib}, {Index: 5, Total: 24 * gib}}
	st, err := state.NewStore()
	must(t, err)
	e := NewEngine(st, cardsInventory{&cards}, &fakeRunner{}, &fakeClock{now: time.Unix(0, 0)}, Config{}, nil)
	must(t, e.readCards())
	cards[0], cards[1] = cards[1], cards[0] // in the same array
	must(t, e.readCards())
	for want, idx := range []int{5, 2} {
		if got, ok := e.cardAt("", idx); !ok || got != want {
			t.Errorf("card %d at %d (found %v), want %d: where the last reading had it", idx, got, ok, want)
		}
	}
}

// TestCardsReadOtherwise: a round notes which cards read otherwise than at the round
// before (their processes, whose they are, their memory, a fault), and every card
// when the list of cards changed; what a round measures of a followed attempt is
// measured again exactly when one of its cards did or the list changed (its card may
// be gone), and found as it was otherwise.
func TestCardsReadOtherwise(t *testing.T) {
	fr := &fakeRunner{owners: map[int]string{5: "a.1/1", 6: "b.1/1"}}
	card := func(i int, ps ...gpu.Process) gpu.Card { return gpu.Card{Index: i, Total: 24 * gib, Processes: ps} }
	cards := []gpu.Card{card(0, gpu.Process{PID: 5, Used: gib}), card(1, gpu.Process{PID: 6, Used: gib})}
	st, _ := state.NewStore()
	e := NewEngine(st, cardsInventory{&cards}, fr, &fakeClock{now: time.Unix(0, 0)}, Config{Slots: []int{1, 1}}, nil)
	a := &state.Attempt{ID: "a.1/1", GPUs: []int{0}}
	c := &crowd{id: a.ID, cards: []plans.CardID{{Index: 0}}}
	for _, tc := range []struct {
		name    string
		change  func()
		changed []bool // of cards 0 and 1
		held    int64  // what a measures on card 0
		unknown bool
	}{
		{name: "first reading", changed: []bool{true, true}, held: gib},
		{name: "the same", changed: []bool{false, false}, held: gib},
		{name: "b's memory grows", change: func() { cards[1].Processes[0].Used = 2 * gib }, changed: []bool{false, true}, held: gib},
		{name: "a's memory grows", change: func() { cards[0].Processes[0].Used = 3 * gib }, changed: []bool{true, false}, held: 3 * gib},
		{name: "another's process", change: func() {
			cards[0].Processes = append(cards[0].Processes, gpu.Process{PID: 7, Used: gib})
		}, changed: []bool{true, false}, held: 3 * gib},
		{name: "whose it is cannot be told", change: func() { cards[0].Processes[1].Hidden = true }, changed: []bool{true, false}, held: 3 * gib, unknown: true},
		{name: "it is told", change: func() { fr.owners[7] = "a.1/1"; cards[0].Processes[1].Hidden = false }, changed: []bool{true, false}, held: 4 * gib},
		{name: "the card faults", change: func() { cards[0].Fault = "NVML: unknown error" }, changed: []bool{true, false}, held: 4 * gib, unknown: true},
		{name: "it reads again", change: func() { cards[0].Fault = "" }, changed: []bool{true, false}, held: 4 * gib},
		{name: "a card more", change: func() { cards = append(cards, card(2)) }, changed: []bool{true, true, true}, held: 4 * gib},
		{name: "the same again", changed: []bool{false, false, false}, held: 4 * gib},
		{name: "its card gone", change: func() { cards = cards[1:] }, changed: []bool{true, true}},
	} {
		if tc.change != nil {
			tc.change()
		}
		was := e.resolved
		must(t, e.readCards())
		e.resolveOwners()
		for i, want := range tc.changed {
			if got := e.changedSince([]int{i}, was); got != want {
				t.Errorf("%s: card %d read otherwise %v, want %v", tc.name, i, got, want)
			}
		}
		at := e.appendCards(nil, a, c)
		if held, unknown := e.measureFollowed(a, at, c); held != tc.held || unknown != tc.unknown {
			t.Errorf("%s: a holds %s (unknown %v), want %s (unknown %v)", tc.name, plans.FormatSize(held), unknown, plans.FormatSize(tc.held), tc.unknown)
		}
	}
}
