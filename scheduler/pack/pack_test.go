package pack

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuq/gpuq/plans"
)

const gib = int64(1) << 30

func card(i int, total int64, slots int) CardState {
	return CardState{Index: i, Total: total, Slots: slots}
}

func describe(d Decision) string {
	var lines []string
	for _, p := range d.Placements {
		if p.Worker != "" {
			lines = append(lines, fmt.Sprintf("%s -> %s %v", p.Job, p.Worker, p.Cards))
		} else {
			lines = append(lines, fmt.Sprintf("%s -> %v", p.Job, p.Cards))
		}
	}
	for w := range d.Waiting.All() {
		lines = append(lines, fmt.Sprintf("%s waits: %s", w.Job, w.Reason))
	}
	if r := d.Reservation; r != nil {
		in := "unknown"
		if r.In != UnknownEnd {
			in = r.In.String()
		}
		line := fmt.Sprintf("reserved for %s: %s in %s", r.Job, plans.CardsOn(r.Worker, r.Cards), in)
		if r.Due {
			line += ", due"
		}
		lines = append(lines, line)
	}
	return strings.Join(lines, "\n")
}

func TestPack(t *testing.T) {
	tests := []struct {
		name  string
		queue []Request
		cards []CardState
		want  string
	}{
		{
			name:  "plan slots honoured",
			queue: []Request{{Job: "a", Memory: gib}, {Job: "b", Memory: gib}, {Job: "c", Memory: gib}, {Job: "d", Memory: gib}},
			cards: []CardState{card(0, 24*gib, 2), card(1, 24*gib, 1)},
			want:  "a -> [1]\nb -> [0]\nc -> [0]\nd waits: no-slot\nreserved for d: GPU 0 in unknown",
		},
		{
			// The seed sweep: 14 GiB jobs on the two-slot cards would strand their
			// second slot beside 8.52 GiB that no 10 GiB job can use.
			name:  "a large job goes where it strands no slot",
			queue: []Request{{Job: "qnli", Memory: 14 * gib}, {Job: "a", Memory: 10 * gib}, {Job: "b", Memory: 10 * gib}},
			cards: []CardState{{Index: 0, Total: 23 * gib, Headroom: gib / 2, Slots: 2}, {Index: 1, Total: 23 * gib, Headroom: gib / 2, Slots: 1}},
			want:  "qnli -> [1]\na -> [0]\nb -> [0]",
		},
		{
			name:  "best fit keeps the large hole for the large job",
			queue: []Request{{Job: "small", Memory: 10 * gib}, {Job: "big", Memory: 70 * gib}},
			cards: []CardState{card(0, 80*gib, 4), card(1, 24*gib, 4)},
			want:  "small -> [1]\nbig -> [0]",
		},
		{
			name:  "memory counts NVML use, reservations and foreign processes",
			queue: []Request{{Job: "a", Memory: 10 * gib}},
			cards: []CardState{
				{Index: 0, Total: 24 * gib, Used: 15 * gib, Slots: 4},                      // NVML sees a ghost
				{Index: 1, Total: 24 * gib, Reserved: 8 * gib, Foreign: 7 * gib, Slots: 4}, // ours + someone else's
				{Index: 2, Total: 24 * gib, Headroom: 14*gib + 1, Slots: 4},
			},
			want: "a waits: no-memory\nreserved for a: GPU 1 in unknown",
		},
		{
			name:  "multi-card job takes distinct cards at once or none",
			queue: []Request{{Job: "ddp", Memory: 20 * gib, GPUsPerJob: 2}, {Job: "one", Memory: 20 * gib}},
			cards: []CardState{card(0, 24*gib, 1), card(1, 24*gib, 1), card(2, 24*gib, 1)},
			want:  "ddp -> [0 1]\none -> [2]",
		},
		{
			// one would leave ddp only 2 GiB of the free card; two leaves it its 20 GiB.
			name: "multi-card job that cannot get all its cards waits and reserves",
			queue: []Request{{Job: "ddp", Memory: 20 * gib, GPUsPerJob: 2, Waited: DueAfter},
				{Job: "one", Memory: 6 * gib}, {Job: "two", Memory: 2 * gib}},
			cards: []CardState{{Index: 0, Total: 24 * gib, Reserved: 10 * gib, Running: 1, Slots: 2}, card(1, 24*gib, 2)},
			want:  "ddp waits: no-memory\none waits: reserved\ntwo -> [1]\nreserved for ddp: GPUs 0,1 in unknown, due",
		},
		{
			name:  "backfill past a blocked job onto cards it does not hold",
			queue: []Request{{Job: "big", Memory: 20 * gib, Waited: DueAfter}, {Job: "small", Memory: 4 * gib}},
			cards: []CardState{
				{Index: 0, Total: 24 * gib, Reserved: 10 * gib, Running: 1, Slots: 2},
				{Index: 1, Total: 12 * gib, Reserved: 2 * gib, Running: 1, Slots: 2},
			},
			want: "big waits: no-memory\nsmall -> [1]\nreserved for big: GPU 0 in unknown, due",
		},
		{
			name:  "exclusive job needs an idle card and keeps it",
			queue: []Request{{Job: "alone", Memory: gib, Exclusive: true}, {Job: "other", Memory: gib}},
			cards: []CardState{{Index: 0, Total: 24 * gib, Reserved: gib, Running: 1, Slots: 2}, card(1, 24*gib, 2)},
			want:  "alone -> [1]\nother -> [0]",
		},
		{
			name:  "too large for any card while a foreign process stays",
			queue: []Request{{Job: "huge", Memory: 20 * gib}, {Job: "ok", Memory: gib}},
			cards: []CardState{{Index: 0, Total: 24 * gib, Foreign: 10 * gib, Slots: 2}},
			want:  "ok -> [0]\nhuge waits: too-large",
		},
		{
			name:  "another gpuq's trainer ends: the job waits for memory there, not as too large, and keeps no card",
			queue: []Request{{Job: "big", Memory: 20 * gib}, {Job: "ok", Memory: gib}},
			cards: []CardState{{Index: 0, Total: 24 * gib, Used: 10 * gib, Foreign: 10 * gib, Passing: 10 * gib, Slots: 2}},
			want:  "ok -> [0]\nbig waits: no-memory",
		},
		{
			name:  "a zero slot keeps a card free",
			queue: []Request{{Job: "a", Memory: gib}, {Job: "b", Memory: gib}},
			cards: []CardState{card(0, 24*gib, 0), card(1, 24*gib, 1)},
			want:  "a -> [1]\nb waits: no-slot\nreserved for b: GPU 1 in unknown",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := describe(Pack(tt.queue, tt.cards, nil))
			// Placements print first; compare as sets of lines in that order.
			if !sameLines(got, tt.want) {
				t.Errorf("got:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
}

// TestPackBackfill: the first job that waits (head) gets the cards expected to have room
// for it soonest; a later job starts on them only if it ends before they are due, or
// leaves the head its room then; where nothing says when they are due, any job may,
// until the head has waited DueAfter.
func TestPackBackfill(t *testing.T) {
	// 16 GiB of a two-slot 24 GiB card taken by a job expected to end in an hour: 8 GiB
	// free now; the 20 GiB head fits in an hour, leaving 4 GiB and a slot beside it.
	busy := func(i int, in time.Duration, memory int64) CardState {
		return CardState{Index: i, Total: 24 * gib, Slots: 2, Running: 1, Reserved: memory, Used: memory,
			Ends: []Release{{In: in, Memory: memory}}}
	}
	head := Request{Job: "head", Memory: 20 * gib}
	tests := []struct {
		name  string
		queue []Request
		cards []CardState
		want  string
	}{
		{
			name:  "a job that ends before the reservation is due starts on its card",
			queue: []Request{head, {Job: "x", Memory: 6 * gib, Duration: 30 * time.Minute}},
			cards: []CardState{busy(0, time.Hour, 16*gib)},
			want:  "x -> [0]\nhead waits: no-memory\nreserved for head: GPU 0 in 1h0m0s, due",
		},
		{
			name:  "a job that would run past it waits",
			queue: []Request{head, {Job: "x", Memory: 6 * gib, Duration: 90 * time.Minute}},
			cards: []CardState{busy(0, time.Hour, 16*gib)},
			want:  "head waits: no-memory\nx waits: reserved\nreserved for head: GPU 0 in 1h0m0s, due",
		},
		{
			name:  "so does one whose duration is not known",
			queue: []Request{head, {Job: "x", Memory: 6 * gib}},
			cards: []CardState{busy(0, time.Hour, 16*gib)},
			want:  "head waits: no-memory\nx waits: reserved\nreserved for head: GPU 0 in 1h0m0s, due",
		},
		{
			// Three slots: after x, y still fits now, but not beside the head in an hour.
			name:  "a job that leaves the head its room starts, however long it runs",
			queue: []Request{head, {Job: "x", Memory: 4 * gib}, {Job: "y", Memory: 2 * gib}},
			cards: []CardState{{Index: 0, Total: 24 * gib, Slots: 3, Running: 1, Reserved: 16 * gib, Used: 16 * gib,
				Ends: []Release{{In: time.Hour, Memory: 16 * gib}}}},
			want: "x -> [0]\nhead waits: no-memory\ny waits: reserved\nreserved for head: GPU 0 in 1h0m0s, due",
		},
		{
			// Card 1 would fit x more tightly, but its job ends in 10 minutes.
			name:  "the reservation is on the card that frees first",
			queue: []Request{head, {Job: "x", Memory: 6 * gib, Duration: 30 * time.Minute}},
			cards: []CardState{busy(0, time.Hour, 16*gib), busy(1, 10*time.Minute, 17*gib)},
			want:  "x -> [0]\nhead waits: no-memory\nreserved for head: GPU 1 in 10m0s, due",
		},
		{
			// p takes the idle card for 20 minutes, so the head is due there then; x,
			// which takes 30, goes to the other.
			name: "a job started in the same round counts",
			queue: []Request{{Job: "p", Memory: 16 * gib, Duration: 20 * time.Minute}, head,
				{Job: "x", Memory: 6 * gib, Duration: 30 * time.Minute}},
			cards: []CardState{card(0, 24*gib, 2), busy(1, time.Hour, 16*gib)},
			want:  "p -> [0]\nx -> [1]\nhead waits: no-memory\nreserved for head: GPU 0 in 20m0s, due",
		},
		{
			name:  "where no end is known, jobs start on the head's cards until it has waited DueAfter",
			queue: []Request{{Job: "head", Memory: 20 * gib, Waited: DueAfter - time.Second}, {Job: "x", Memory: 6 * gib}},
			cards: []CardState{busy(0, UnknownEnd, 16*gib)},
			want:  "x -> [0]\nhead waits: no-memory\nreserved for head: GPU 0 in unknown",
		},
		{
			name:  "then the reservation is due",
			queue: []Request{{Job: "head", Memory: 20 * gib, Waited: DueAfter}, {Job: "x", Memory: 6 * gib, Duration: time.Minute}},
			cards: []CardState{busy(0, UnknownEnd, 16*gib)},
			want:  "head waits: no-memory\nx waits: reserved\nreserved for head: GPU 0 in unknown, due",
		},
		{
			// Which of the jobs there ends first cannot be told, so neither can what
			// the head leaves beside it.
			name:  "and no job counts on room beside the head",
			queue: []Request{{Job: "head", Memory: 20 * gib, Waited: DueAfter}, {Job: "x", Memory: 2 * gib}},
			cards: []CardState{{Index: 0, Total: 24 * gib, Slots: 3, Running: 2, Reserved: 20 * gib,
				Ends: []Release{{In: UnknownEnd, Memory: 4 * gib}, {In: UnknownEnd, Memory: 16 * gib}}}},
			want: "head waits: no-memory\nx waits: reserved\nreserved for head: GPU 0 in unknown, due",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := describe(Pack(tt.queue, tt.cards, nil)); !sameLines(got, tt.want) {
				t.Errorf("got:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
}

func sameLines(a, b string) bool {
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	if len(la) != len(lb) {
		return false
	}
	seen := map[string]int{}
	for _, l := range la {
		seen[l]++
	}
	for _, l := range lb {
		if seen[l] == 0 {
			return false
		}
		seen[l]--
	}
	return true
}

func TestPackDoesNotMutateInput(t *testing.T) {
	cards := []CardState{card(0, 24*gib, 2)}
	before := reflect.ValueOf(cards[0]).Interface()
	Pack([]Request{{Job: "a", Memory: gib}}, cards, nil)
	if !reflect.DeepEqual(before, cards[0]) {
		t.Error("Pack changed its input")
	}
}

// TestPackAlikeOnlyInMemory: a job that asks the memory of jobs that wait, but differs in
// what else decides whether it fits, is not answered as they were (by Pack's cache of
// the fits that wait, which the second of them fills).
func TestPackAlikeOnlyInMemory(t *testing.T) {
	full := &Quota{Slots: []int{4}, Free: []int{0}}
	tests := []struct {
		name  string
		cards []CardState
		hosts Hosts
		queue []Request
		want  string
	}{
		{
			name:  "cards",
			cards: []CardState{card(0, 24*gib, 2)},
			queue: []Request{{Job: "a", Memory: 4 * gib, GPUsPerJob: 2}, {Job: "a2", Memory: 4 * gib, GPUsPerJob: 2}, {Job: "b", Memory: 4 * gib, GPUsPerJob: 1}},
			want:  "b -> [0]\na waits: too-large\na2 waits: too-large",
		},
		{
			name:  "exclusive",
			cards: []CardState{{Index: 0, Total: 24 * gib, Reserved: 2 * gib, Running: 1, Slots: 4}},
			queue: []Request{{Job: "a", Memory: 4 * gib, Exclusive: true}, {Job: "a2", Memory: 4 * gib, Exclusive: true}, {Job: "b", Memory: 4 * gib}},
			want:  "b -> [0]\na waits: needs-idle\na2 waits: needs-idle\nreserved for a: GPU 0 in unknown",
		},
		{
			name:  "duration",
			cards: []CardState{{Index: 0, Total: 24 * gib, Slots: 4, Left: time.Hour}},
			queue: []Request{{Job: "a", Memory: 4 * gib, Duration: 2 * time.Hour}, {Job: "a2", Memory: 4 * gib, Duration: 2 * time.Hour}, {Job: "b", Memory: 4 * gib, Duration: time.Minute}},
			want:  "b -> [0]\na waits: too-large\na2 waits: too-large",
		},
		{
			name:  "quota",
			cards: []CardState{card(0, 24*gib, 4)},
			queue: []Request{{Job: "a", Memory: 4 * gib, Quota: full}, {Job: "a2", Memory: 4 * gib, Quota: full}, {Job: "b", Memory: 4 * gib}},
			want:  "b -> [0]\na waits: no-slot\na2 waits: no-slot",
		},
		{
			name:  "host memory",
			cards: []CardState{{Worker: "w1", Index: 0, Total: 24 * gib, Running: 1, Slots: 1}, {Worker: "w2", Index: 0, Total: 24 * gib, Slots: 4}},
			hosts: Hosts{"w1": {Total: 64 * gib}, "w2": {Total: 8 * gib}},
			queue: []Request{{Job: "a", Memory: 4 * gib, Host: 16 * gib}, {Job: "a2", Memory: 4 * gib, Host: 16 * gib}, {Job: "b", Memory: 4 * gib, Host: 4 * gib}},
			want:  "b -> w2 [0]\na waits: no-memory\na2 waits: no-memory\nreserved for a: GPU w2:0 in 0s, due",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := describe(Pack(tt.queue, tt.cards, tt.hosts)); got != tt.want {
				t.Errorf("got\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

// TestPackExplainsOncePerFit: jobs that wait alike share one explanation, built once,
// however their fits interleave in the queue (here three that differ only in duration).
func TestPackExplainsOncePerFit(t *testing.T) {
	cards := []CardState{{Index: 0, Total: 24 * gib, Reserved: 20 * gib, Running: 1, Slots: 4}}
	var q []Request
	for i := range 30 {
		q = append(q, Request{Job: fmt.Sprint("j", i), Memory: 8 * gib, Duration: time.Duration(1+i%3) * time.Minute})
	}
	d := Pack(q, cards, nil)
	if d.Waiting.Len() != len(q) {
		t.Fatalf("%d wait, want %d", d.Waiting.Len(), len(q))
	}
	for w := range d.Waiting.All() {
		if w.Reason != NoMemory {
			t.Fatalf("%s waits: %s, want %s", w.Job, w.Reason, NoMemory)
		}
	}
	// Besides the placed and no-slot answers every round has.
	if n := len(d.Waiting.whys) - 2; n != 3 {
		t.Errorf("%d explanations built for 3 fits", n)
	}
}

// TestPackManyExplanations: past 255 distinct explanations a round's waits are kept wider,
// and each job still reads its own; a placed job among them does not wait.
func TestPackManyExplanations(t *testing.T) {
	cards := []CardState{{Index: 0, Total: 1024 * gib, Used: 1023 * gib, Reserved: 1023 * gib, Running: 1, Slots: 2}}
	var q []Request
	for i := range 300 {
		q = append(q, Request{Job: fmt.Sprint("j", i), Memory: int64(2+i) * gib})
	}
	q = append(q, Request{Job: "small", Memory: gib})
	d := Pack(q, cards, nil)
	if len(d.Placements) != 1 || d.Placements[0].Job != "small" {
		t.Fatalf("placements %v, want small alone", d.Placements)
	}
	if d.Waiting.Len() != 300 {
		t.Fatalf("%d wait, want 300", d.Waiting.Len())
	}
	i := 0
	for w := range d.Waiting.All() {
		need := "needs " + plans.FormatSize(int64(2+i)*gib) + " per card"
		if w.Job != q[i].Job || w.Reason != NoMemory || !strings.HasPrefix(w.Detail, need) {
			t.Fatalf("wait %d: %s %s %q, want %s %s %q...", i, w.Job, w.Reason, w.Detail, q[i].Job, NoMemory, need)
		}
		i++
	}
}

// TestPackHostMemory: host RAM is packed like a card's memory: what the kernel says is
// used beyond gpuq's own processes counts, and a job that waits for RAM holds no card.
func TestPackHostMemory(t *testing.T) {
	cards := []CardState{{Index: 0, Total: 80 * gib, Slots: 1 << 30}}
	host := HostState{Total: 64 * gib, Used: 20 * gib, Ours: 8 * gib, Reserved: 10 * gib, Headroom: 6 * gib}
	// foreign 12 GiB + reserved 10 GiB = 22 GiB > used 20: free 64 - 22 - 6 = 36 GiB.
	if f := host.Free(); f != 36*gib {
		t.Fatalf("free %d, want 36 GiB", f)
	}
	q := []Request{{Job: "a", Memory: gib, Host: 20 * gib}, {Job: "b", Memory: gib, Host: 20 * gib}, {Job: "c", Memory: gib, Host: 10 * gib}}
	d := Pack(q, cards, Hosts{"": host})
	if got, want := describe(d), "a -> [0]\nc -> [0]\nb waits: no-host-memory"; got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if d.Reservation != nil {
		t.Errorf("a job waiting for RAM reserved cards for %s", d.Reservation.Job)
	}
	if w := Pack(q, cards, nil).Waiting; w.Len() != 0 {
		t.Errorf("with no host figure every job fits: %v", slices.Collect(w.All()))
	}
}

// TestPackAcrossWorkers: cards are known by their machine and index; a job's cards are on
// one machine, and each machine's RAM and time left are its own.
func TestPackAcrossWorkers(t *testing.T) {
	on := func(worker string, i int, slots int) CardState {
		c := card(i, 24*gib, slots)
		c.Worker = worker
		return c
	}
	busy := func(c CardState) CardState {
		c.Running, c.Reserved = 1, 20*gib
		c.Ends = []Release{{In: time.Hour, Memory: 20 * gib}}
		return c
	}
	ending := func(c CardState, left time.Duration) CardState {
		c.Left = left
		return c
	}
	tests := []struct {
		name  string
		queue []Request
		cards []CardState
		hosts Hosts
		want  string
	}{
		{
			name:  "the same index on two machines is two cards",
			queue: []Request{{Job: "a", Memory: 20 * gib}, {Job: "b", Memory: 20 * gib}, {Job: "c", Memory: 20 * gib}},
			cards: []CardState{on("n1", 0, 1), on("n2", 0, 1)},
			want:  "a -> n1 [0]\nb -> n2 [0]\nc waits: no-slot\nreserved for c: GPU n1:0 in unknown",
		},
		{
			name:  "two cards of one machine, never one of each",
			queue: []Request{{Job: "ddp", Memory: 10 * gib, GPUsPerJob: 2}},
			cards: []CardState{on("n1", 0, 1), busy(on("n1", 1, 1)), on("n2", 0, 1), on("n2", 1, 1)},
			want:  "ddp -> n2 [0 1]",
		},
		{
			// Two free cards, one on each machine: the job reserves one machine's
			// and a small job backfills the other's.
			name:  "no machine has two cards free: it waits for one that will",
			queue: []Request{{Job: "ddp", Memory: 10 * gib, GPUsPerJob: 2}, {Job: "small", Memory: gib}},
			cards: []CardState{on("n1", 0, 1), busy(on("n1", 1, 1)), busy(on("n2", 0, 1)), on("n2", 1, 1)},
			want:  "small -> n2 [1]\nddp waits: no-slot\nreserved for ddp: GPUs n1:0,1 in 1h0m0s, due",
		},
		{
			name:  "no machine has two cards at all",
			queue: []Request{{Job: "ddp", Memory: 10 * gib, GPUsPerJob: 2}},
			cards: []CardState{on("n1", 0, 1), on("n2", 0, 1)},
			want:  "ddp waits: too-large",
		},
		{
			name:  "each machine's RAM is its own",
			queue: []Request{{Job: "a", Memory: gib, Host: 20 * gib}, {Job: "b", Memory: gib, Host: 20 * gib}, {Job: "c", Memory: gib, Host: 40 * gib}},
			cards: []CardState{on("n1", 0, 4), on("n2", 0, 4)},
			hosts: Hosts{"n1": {Total: 64 * gib, Used: 50 * gib}, "n2": {Total: 64 * gib}},
			want:  "a -> n2 [0]\nb -> n2 [0]\nc waits: no-host-memory",
		},
		{
			name: "a machine near its end takes only what ends before it",
			queue: []Request{{Job: "long", Memory: gib, Duration: 2 * time.Hour}, {Job: "short", Memory: gib, Duration: 30 * time.Minute},
				{Job: "unknown", Memory: gib}, {Job: "longer", Memory: gib, Duration: 3 * time.Hour}},
			cards: []CardState{ending(on("n1", 0, 2), time.Hour), on("n2", 0, 1)},
			want:  "long -> n2 [0]\nshort -> n1 [0]\nunknown -> n1 [0]\nlonger waits: no-slot\nreserved for longer: GPU n2:0 in 2h0m0s, due",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := describe(Pack(tt.queue, tt.cards, tt.hosts)); !sameLines(got, tt.want) {
				t.Errorf("got:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
}

// TestNoCardSaysSo: with no card at all (a daemon of no cards of its own, no worker
// linked), a job waits for a card (no-card), not as too large, and its reason says no
// card is connected, not that "only 0" could take it.
func TestNoCardSaysSo(t *testing.T) {
	d := Pack([]Request{{Job: "j", Memory: 2 * gib}}, nil, nil)
	for w := range d.Waiting.All() {
		if w.Reason != NoCard || !strings.HasPrefix(w.Detail, "no card is connected") {
			t.Errorf("%s waits: %s %q", w.Job, w.Reason, w.Detail)
		}
	}
	if d.Waiting.Len() != 1 {
		t.Errorf("%d wait, want 1", d.Waiting.Len())
	}
}

// TestAJobOnlyDrainedCardsCouldTakeWaitsForThem: a job that only drained cards could
// take waits for a slot there, its reason naming them and how to undrain one, not as
// too large (nor keeping them reserved); one that no card could take, drained or not,
// is too large.
func TestAJobOnlyDrainedCardsCouldTakeWaitsForThem(t *testing.T) {
	cards := []CardState{
		{Worker: "w2", Index: 0, Total: 16 * gib, Drained: true},
		{Worker: "w2", Index: 1, Total: 16 * gib, Used: 14 * gib, Foreign: 14 * gib, Slots: 1},
	}
	d := Pack([]Request{{Job: "small", Memory: 3 * gib}, {Job: "huge", Memory: 20 * gib}}, cards, nil)
	why := map[string]Wait{}
	for w := range d.Waiting.All() {
		why[w.Job] = w
	}
	if w := why["small"]; w.Reason != NoSlot || w.Detail != "only drained cards could take it: GPU w2:0 (gpuq undrain w2:0 lets jobs start there again)" {
		t.Errorf("small waits: %s: %q", w.Reason, w.Detail)
	}
	if w := why["huge"]; w.Reason != TooLarge {
		t.Errorf("huge waits: %s: %q", w.Reason, w.Detail)
	}
	if d.Reservation != nil {
		t.Errorf("a reservation on drained cards: %+v", d.Reservation)
	}
}

// TestAJobHeldByMaxRunningSaysWhatItsSweepRuns: a job that its sweep's max_running
// holds says how many of the sweep's jobs run and what the limit is: four running
// under a max_running lowered to 1 are four, not the limit (which why once said as
// the count: "its sweep runs 1 job").
func TestAJobHeldByMaxRunningSaysWhatItsSweepRuns(t *testing.T) {
	for _, tc := range []struct {
		max, running int
		want         string
	}{
		{1, 4, "its sweep runs 4 jobs, at or past its max_running of 1 (gpuq update --max-running changes it)"},
		{2, 2, "its sweep runs 2 jobs, at or past its max_running of 2 (gpuq update --max-running changes it)"},
	} {
		left := tc.max - tc.running
		q := &Quota{Slots: []int{4}, Free: []int{4}, Max: tc.max, Left: &left}
		ws := slices.Collect(Pack([]Request{{Job: "s.5", Memory: gib, Quota: q}}, []CardState{{Index: 0, Total: 24 * gib, Slots: 8}}, nil).Waiting.All())
		if len(ws) != 1 || ws[0].Reason != NoSlot || ws[0].Detail != tc.want {
			t.Errorf("max_running %d, %d running: waits %+v; want %q", tc.max, tc.running, ws, tc.want)
		}
	}
}

// TestAJobHeldByMaxRunningTellsWhatRunsFromWhatStarts: the jobs one round places
// take the sweep's max_running, but run not yet: a job held behind them says how many
// run and how many start before it, not that the sweep runs them all.
func TestAJobHeldByMaxRunningTellsWhatRunsFromWhatStarts(t *testing.T) {
	for _, tc := range []struct {
		max, running int
		want         string
	}{
		{2, 0, "its sweep runs no job yet, and 2 jobs fit now and start before it, which reaches its max_running of 2 (gpuq update --max-running changes it)"},
		{3, 2, "its sweep runs 2 jobs, and 1 more fits now and starts before it, which reaches its max_running of 3 (gpuq update --max-running changes it)"},
		{3, 1, "its sweep runs 1 job, and 2 more fit now and start before it, which reaches its max_running of 3 (gpuq update --max-running changes it)"},
	} {
		left := tc.max - tc.running
		q := &Quota{Slots: []int{8}, Free: []int{8}, Max: tc.max, Left: &left}
		var queue []Request
		for i := range left + 1 {
			queue = append(queue, Request{Job: fmt.Sprintf("s.%d", i+1), Memory: gib, Quota: q})
		}
		d := Pack(queue, []CardState{{Index: 0, Total: 24 * gib, Slots: 8}}, nil)
		ws := slices.Collect(d.Waiting.All())
		if len(d.Placements) != tc.max-tc.running || len(ws) != 1 || ws[0].Reason != NoSlot || ws[0].Detail != tc.want {
			t.Errorf("max_running %d, %d running: %d placed, waits %+v; want %q", tc.max, tc.running, len(d.Placements), ws, tc.want)
		}
	}
}

// TestAJobThatFitsOnceAnotherGPUQsTrainersEnd: a job that no card could hold beside
// what other processes hold waits for memory where another gpuq's trainers hold the
// rest, and the reason names the cards it would fit once they end, not the card with
// the most free.
func TestAJobThatFitsOnceAnotherGPUQsTrainersEnd(t *testing.T) {
	cards := []CardState{
		{Index: 0, Total: 24 * gib, Used: 10 * gib, Foreign: 10 * gib, Passing: 10 * gib, Slots: 2},
		{Index: 1, Total: 24 * gib, Used: 8 * gib, Foreign: 8 * gib, Slots: 2},
	}
	waits := func() Wait {
		t.Helper()
		ws := slices.Collect(Pack([]Request{{Job: "big", Memory: 20 * gib}}, cards, nil).Waiting.All())
		if len(ws) != 1 {
			t.Fatalf("%d wait: %+v", len(ws), ws)
		}
		return ws[0]
	}
	if w := waits(); w.Reason != NoMemory || !strings.HasSuffix(w.Detail, "; it fits GPU 0 only once another gpuq's trainers there have ended") {
		t.Errorf("big waits: %s: %s", w.Reason, w.Detail)
	}
	cards[0].Passing = 0 // someone else's process: it stays
	if w := waits(); w.Reason != TooLarge {
		t.Errorf("big waits beside two other processes: %s: %s", w.Reason, w.Detail)
	}
}
