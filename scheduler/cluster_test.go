package scheduler

import (
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/gpu"
	"github.com/gpuq/gpuq/scheduler/pack"
	"github.com/gpuq/gpuq/scheduler/state"
)

// fakeCluster is cards on several machines that a test changes between rounds, one
// slot each unless slots says otherwise.
type fakeCluster struct {
	cards *[]gpu.Card
	slots map[plans.CardID]int
	ram   map[string]int64 // each machine's free RAM of 64 GiB
	ends  map[string]time.Time
	away  map[plans.CardID]bool // cards of a worker away, kept (Keeper)
}

func (f *fakeCluster) Read() ([]gpu.Card, error) { return *f.cards, nil }

func (f *fakeCluster) Slots(c gpu.Card) int {
	if n, ok := f.slots[c.ID()]; ok {
		return n
	}
	return 1
}

func (f *fakeCluster) Host(worker string) (int64, int64, error) {
	if free, ok := f.ram[worker]; ok {
		return 64 * gib, free, nil
	}
	return 64 * gib, 64 * gib, nil
}

func (f *fakeCluster) Ends(worker string) time.Time { return f.ends[worker] }

func (f *fakeCluster) Keeps(card plans.CardID) bool { return f.away[card] }

func (f *fakeCluster) Away() []plans.CardID {
	return slices.SortedFunc(maps.Keys(f.away), func(a, b plans.CardID) int { return strings.Compare(a.String(), b.String()) })
}

func clusterEngine(t *testing.T, doc string, cl *fakeCluster, owners map[int]string) (*Engine, *state.Store, *fakeRunner) {
	t.Helper()
	sw, err := plans.DecodeSweep("w.yaml", []byte(doc), plans.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	fr := &fakeRunner{script: func(Launch) Exit { return Exit{} }, owners: owners}
	st, _ := state.NewStore()
	e := NewEngine(st, cl, fr, newFakeClock(), Config{Headroom: plans.Headroom{Bytes: gib}, Settle: time.Nanosecond, UtilTarget: memoryAlone}, nil)
	must(t, e.store.Submit(&state.Submission{Sweep: sw}))
	return e, st, fr
}

// TestEngineAcrossWorkers: the engine places jobs on cards of several machines, known
// by machine and index: an attempt runs on one machine, its processes are told by the
// machine's own pids (two machines may have the same), a card of a worker can be
// drained, and each machine's trainers share its own cores.
func TestEngineAcrossWorkers(t *testing.T) {
	cards := []gpu.Card{{Worker: "n1", Index: 0, Total: 24 * gib}, {Worker: "n2", Index: 0, Total: 24 * gib}}
	// The runner, this machine's, would claim pid 7 for an attempt of its own.
	e, st, fr := clusterEngine(t, "name: w\ncommand: [train]\nmatrix: {seed: [1, 2, 3]}\nmemory: 10GiB\n",
		&fakeCluster{cards: &cards}, map[int]string{7: "w.3/1"})
	round(t, e)
	if len(fr.starts) != 2 {
		t.Fatalf("%d started, want one per machine", len(fr.starts))
	}
	where := map[string]string{}
	for _, l := range fr.starts {
		a := l.Attempt
		if len(l.Cards) != 1 || l.Cards[0].Worker != a.Worker || a.GPUs[0] != 0 || l.Sharing != 1 {
			t.Errorf("%s started on %s with cards %+v, sharing %d", a.ID, a.Where(), l.Cards, l.Sharing)
		}
		where[a.Worker] = a.ID
	}
	if where["n1"] == "" || where["n2"] == "" {
		t.Fatalf("attempts on %v, want one on each machine", where)
	}
	// Both machines have a process 7; each machine says whose its own is.
	cards[0].Processes = []gpu.Process{{PID: 7, Used: 6 * gib, Attempt: where["n1"]}}
	cards[1].Processes = []gpu.Process{{PID: 7, Used: 9 * gib, Attempt: where["n2"]}}
	round(t, e)
	view := st.View()
	if p1, p2 := view.Attempt(where["n1"]).Peak, view.Attempt(where["n2"]).Peak; p1 != 6*gib || p2 != 9*gib {
		t.Errorf("peaks %s on n1 and %s on n2, want 6 GiB and 9 GiB", plans.FormatSize(p1), plans.FormatSize(p2))
	}
	must(t, e.drain(plans.CardID{Worker: "n2", Index: 0}, true))
	if err := e.drain(plans.CardID{Worker: "n3", Index: 0}, true); err == nil || !strings.Contains(err.Error(), "no GPU n3:0 here; gpuq schedules on GPUs n1:0 and n2:0 (gpuq gpus lists them)") {
		t.Errorf("drain of a card no machine has: %v", err)
	}
	cards[1].Processes = nil
	e.apply(Exit{Attempt: where["n2"], Outcome: plans.Success})
	round(t, e)
	if len(fr.starts) != 2 {
		t.Fatalf("the third job started on the drained card n2:0")
	}
	cards[0].Processes = nil
	e.apply(Exit{Attempt: where["n1"], Outcome: plans.Success})
	round(t, e)
	if len(fr.starts) != 3 || fr.starts[2].Attempt.Worker != "n1" {
		t.Fatalf("the third job did not start on n1: %d starts", len(fr.starts))
	}
}

// TestDrainOfACardAway: a card whose worker is away may be drained and undrained, as
// one read, and its drain is written as any; back, it takes jobs as last told. A card
// drained may be undrained once its worker is gone (past its grace, or not back since
// a restart); a card never seen is refused. (An undrain of a card away was refused, so
// that it stayed drained once its worker was back.)
func TestDrainOfACardAway(t *testing.T) {
	n1, n2 := gpu.Card{Worker: "n1", Index: 0, Total: 24 * gib}, gpu.Card{Worker: "n2", Index: 0, Total: 24 * gib}
	cards := []gpu.Card{n1, n2}
	cl := &fakeCluster{cards: &cards}
	e, st, fr := clusterEngine(t, "name: w\ncommand: [train]\nmatrix: {seed: [1, 2]}\nmemory: 10GiB\n", cl, nil)
	cl.slots = map[plans.CardID]int{n1.ID(): 0, n2.ID(): 0} // nothing starts yet
	round(t, e)
	must(t, e.drain(n1.ID(), true))
	must(t, e.drain(n2.ID(), true))
	cl.slots = nil
	// n2 goes away.
	cards = []gpu.Card{n1}
	cl.away = map[plans.CardID]bool{n2.ID(): true}
	round(t, e)
	if err := e.drain(n2.ID(), false); err != nil {
		t.Fatalf("undrain of n2:0, its worker away: %v", err)
	}
	if err := e.drain(plans.CardID{Worker: "n3", Index: 0}, true); err == nil ||
		!strings.Contains(err.Error(), "no GPU n3:0 here; gpuq schedules on GPUs n1:0 and n2:0 (its worker away) (gpuq gpus lists them)") {
		t.Errorf("drain of a card never seen, n2 away: %v", err)
	}
	if st.View().Drained()[n2.ID()] {
		t.Fatal("n2:0 is still drained once undrained")
	}
	must(t, e.drain(n2.ID(), true))
	must(t, e.drain(n2.ID(), false))
	// Back, it takes a job; n1, still drained, does not.
	cards = []gpu.Card{n1, n2}
	cl.away = nil
	round(t, e)
	if len(fr.starts) != 1 || fr.starts[0].Attempt.Worker != "n2" {
		t.Fatalf("%d starts, want one, on n2 once it is back undrained", len(fr.starts))
	}
	// n1 is gone, not away: drained, it may be undrained, and drained again while its
	// drain is written; once undrained, it is not known.
	cards = []gpu.Card{n2}
	round(t, e)
	must(t, e.drain(n1.ID(), true))
	must(t, e.drain(n1.ID(), false))
	if err := e.drain(n1.ID(), true); err == nil || !strings.Contains(err.Error(), "no GPU n1:0 here; gpuq schedules on GPU n2:0 (gpuq gpus lists them)") {
		t.Errorf("drain of n1:0, gone and undrained: %v", err)
	}
	for _, on := range []bool{true, false} {
		if err := e.drain(plans.CardID{Worker: "n3", Index: 0}, on); err == nil || !strings.Contains(err.Error(), "no GPU n3:0 here") {
			t.Errorf("drain (%v) of a card never seen: %v", on, err)
		}
	}
}

// TestClusterKeepsATooLargeJob: on a cluster a job larger than every card there is
// waits, since a worker with larger cards may come; it is not failed.
func TestClusterKeepsATooLargeJob(t *testing.T) {
	cards := []gpu.Card{{Worker: "n1", Index: 0, Total: 24 * gib}}
	e, st, fr := clusterEngine(t, "name: big\ncommand: [train]\njobs: [{}]\nmemory: 40GiB\n", &fakeCluster{cards: &cards}, nil)
	round(t, e)
	if j := st.View().Job("big.1"); j.State != state.JobQueued || len(fr.starts) != 0 {
		t.Fatalf("big.1 is %s after %d starts, want queued", j.State, len(fr.starts))
	}
	if reason, _, err := e.why("big.1"); err != nil || reason != pack.TooLarge {
		t.Errorf("why: %s %v", reason, err)
	}
	cards = append(cards, gpu.Card{Worker: "n2", Index: 0, Total: 80 * gib})
	round(t, e)
	if len(fr.starts) != 1 || fr.starts[0].Attempt.Worker != "n2" {
		t.Errorf("the job did not start on the larger worker's card")
	}
}

// TestClusterMachinesOwnRAMAndTime: each machine's RAM is its own, and a machine that
// ends within a job's expected duration (its shape's, as learned; Cluster.Ends) does
// not take it. n1's card fits the job more tightly; in each case n1 may not have it.
func TestClusterMachinesOwnRAMAndTime(t *testing.T) {
	for name, tweak := range map[string]func(*Engine, *fakeCluster){
		"n1 has 4 GiB of RAM free": func(_ *Engine, cl *fakeCluster) { cl.ram = map[string]int64{"n1": 4 * gib} },
		"n1 ends within the job": func(e *Engine, cl *fakeCluster) {
			cl.ends = map[string]time.Time{"n1": e.clock.Now().Add(time.Hour)}
			shape := e.store.View().Job("d.1").Shape
			must(t, e.store.Put(state.Change{Shapes: []*state.Shape{{Name: shape, Duration: 2 * time.Hour, Runs: 1}}}))
		},
	} {
		t.Run(name, func(t *testing.T) {
			cards := []gpu.Card{{Worker: "n1", Index: 0, Total: 24 * gib}, {Worker: "n2", Index: 0, Total: 80 * gib}}
			cl := &fakeCluster{cards: &cards}
			e, _, fr := clusterEngine(t, "name: d\ncommand: [train]\njobs: [{}]\nmemory: 10GiB\nhost_memory: 8GiB\n", cl, nil)
			tweak(e, cl)
			round(t, e)
			if len(fr.starts) != 1 || fr.starts[0].Attempt.Worker != "n2" {
				t.Fatalf("%d starts, want one on n2", len(fr.starts))
			}
		})
	}
}

// TestBacklog: the queued jobs no card can start now, with why; a held job is not
// work that more cards would start.
func TestBacklog(t *testing.T) {
	cards := []gpu.Card{{Worker: "n1", Index: 0, Total: 24 * gib}}
	e, _, fr := clusterEngine(t, "name: b\ncommand: [train]\nmatrix: {seed: [1, 2, 3]}\nmemory: 10GiB\njobs: [{seed: 9, gpus_per_job: 2}]\n",
		&fakeCluster{cards: &cards}, nil)
	round(t, e)
	if len(fr.starts) != 1 {
		t.Fatalf("%d started, want 1", len(fr.starts))
	}
	if _, err := e.hold(Selection{IDs: []string{"b.3"}}); err != nil {
		t.Fatal(err)
	}
	b, err := e.backlog()
	if err != nil {
		t.Fatal(err)
	}
	if b.Jobs != 2 || b.Reasons[pack.NoSlot] != 1 || b.Reasons[pack.TooLarge] != 1 || b.GPUsPerJob != 2 {
		t.Errorf("backlog %+v, want b.2 without a slot and b.4 (two cards) too large for n1", b)
	}
	for i := range 3 {
		cards = append(cards, gpu.Card{Worker: "n2", Index: i, Total: 24 * gib})
	}
	round(t, e)
	if b, _ := e.backlog(); b.Jobs != 0 {
		t.Errorf("backlog %+v once a worker with three cards came", b)
	}
}

// TestBacklogByLearnedDurations: a job whose shape has learned that it runs 3h waits
// for a machine with that long left, and the backlog, which an allocator sizes its
// requests by, says so: its cards and its duration.
func TestBacklogByLearnedDurations(t *testing.T) {
	cards := []gpu.Card{{Worker: "n1", Index: 0, Total: 24 * gib}}
	cl := &fakeCluster{cards: &cards}
	e, st, fr := clusterEngine(t, "name: l\ncommand: [train]\njobs: [{}]\nmemory: 10GiB\n", cl, nil)
	cl.ends = map[string]time.Time{"n1": e.clock.Now().Add(time.Hour)}
	must(t, st.Put(state.Change{Shapes: []*state.Shape{{Name: st.View().Job("l.1").Shape, Duration: 3 * time.Hour, Runs: 1}}}))
	round(t, e)
	if len(fr.starts) != 0 {
		t.Fatalf("the 3h job started on n1, which ends in 1h")
	}
	b, err := e.backlog()
	if err != nil {
		t.Fatal(err)
	}
	if want := []Need{{Cards: 1, Duration: 3 * time.Hour}}; b.Reasons[pack.TooLarge] != 1 || !reflect.DeepEqual(b.Needs, want) {
		t.Errorf("backlog %+v, want %v, too large for n1's time", b, want)
	}
	if _, detail, _ := e.why("l.1"); !strings.Contains(detail, "expected to run 3h") {
		t.Errorf("why: %s", detail)
	}
}

// TestRoundPackViewIsThisRounds: the machines' RAM and the cards' slots a round packs
// with, in arrays and a map a round fills again each time, are this round's alone: a
// machine gone since the round before is not in them, and one whose RAM or plan
// changed says what it has now, as a view of its own (Preview's) says.
func TestRoundPackViewIsThisRounds(t *testing.T) {
	cards := []gpu.Card{{Worker: "n1", Index: 0, Total: 24 * gib}, {Worker: "n2", Index: 0, Total: 24 * gib}}
	cl := &fakeCluster{cards: &cards, ram: map[string]int64{"n1": 60 * gib}, slots: map[plans.CardID]int{}}
	e, st, _ := clusterEngine(t, "name: w\ncommand: [train]\nmatrix: {seed: [1, 2, 3]}\nmemory: 10GiB\n", cl, nil)
	round(t, e)
	cards = cards[:1]
	cl.ram["n1"] = 20 * gib
	cl.slots[cards[0].ID()] = 3
	must(t, e.readCards())
	running := e.runningNow()
	got, err := e.packView(st.Latest(), running, &e.roundBufs)
	must(t, err)
	want, err := e.packView(st.Latest(), running, nil)
	must(t, err)
	if !reflect.DeepEqual(got.hosts, want.hosts) || len(got.hosts) != 1 || got.hosts["n1"].Used != 44*gib {
		t.Errorf("round's hosts %+v, want %+v: n1 alone, 44 GiB used", got.hosts, want.hosts)
	}
	if !reflect.DeepEqual(got.cards, want.cards) || len(got.cards) != 1 || got.cards[0].Slots != 3 {
		t.Errorf("round's cards %+v, want %+v: n1's alone, of 3 slots", got.cards, want.cards)
	}
}
