package pack

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

// sharing is an 80 GiB card with the default sharing target; busy ones run jobs that
// ask util of its compute (blind of them not measured yet).
func sharing(i, running int, util float64, blind int) CardState {
	return CardState{Index: i, Total: 80 * gib, Reserved: int64(running) * 10 * gib, Running: running,
		Slots: NoLimit, Target: DefaultTarget, Util: util, Blind: blind, BlindUtil: float64(blind)}
}

// NoLimit is a plan that leaves memory (and compute) to decide.
const NoLimit = 1 << 20

// TestSharing: each rule of how jobs share a card, on a case whose right answer is clear.
func TestSharing(t *testing.T) {
	seven := func(u float64) []Request {
		var q []Request
		for _, j := range []string{"a", "b", "c", "d", "e", "f", "g"} {
			q = append(q, Request{Job: j, Memory: 10 * gib, Util: u})
		}
		return q
	}
	idle := func(n int) []CardState {
		var cs []CardState
		for i := range n {
			cs = append(cs, sharing(i, 0, 0, 0))
		}
		return cs
	}
	tests := []struct {
		name  string
		queue []Request
		cards []CardState
		want  string
	}{
		{
			// The new user: memory alone put two jobs each on GPUs 0 and 1 and
			// left 2-6 idle.
			name:  "spread before stack: seven jobs on seven idle cards take one each",
			queue: seven(0.3),
			cards: idle(7),
			want:  "a -> [0]\nb -> [1]\nc -> [2]\nd -> [3]\ne -> [4]\nf -> [5]\ng -> [6]",
		},
		{
			name:  "without a target memory alone decides, as before",
			queue: seven(0.3)[:3],
			cards: []CardState{card(0, 80*gib, NoLimit), card(1, 80*gib, NoLimit)},
			want:  "a -> [0]\nb -> [0]\nc -> [0]",
		},
		{
			name:  "then low-utilization jobs share while their sum stays within the target",
			queue: seven(0.3),
			cards: idle(2),
			want:  "a -> [0]\nb -> [1]\nc -> [0]\nd -> [1]\ne -> [0]\nf -> [1]\ng waits: would-slow\nreserved for g: GPU 0 in unknown",
		},
		{
			name:  "compute-bound jobs never share",
			queue: seven(1)[:3],
			cards: idle(2),
			want:  "a -> [0]\nb -> [1]\nc waits: would-slow\nreserved for c: GPU 0 in unknown",
		},
		{
			// Card 0 fits more tightly, but card 1 would be the less busy.
			name:  "among busy cards the least busy after, then the tightest fit",
			queue: []Request{{Job: "a", Memory: 10 * gib, Util: 0.3}, {Job: "b", Memory: 10 * gib, Util: 0.1}},
			cards: []CardState{sharing(0, 2, 0.5, 0), sharing(1, 1, 0.2, 0), {Index: 2, Total: 80 * gib, Reserved: 20 * gib,
				Running: 2, Slots: NoLimit, Target: DefaultTarget, Util: 0.5}},
			want: "a -> [1]\nb -> [0]",
		},
		{
			// GPU 1 runs none of gpuq's jobs, but another user's process keeps it all
			// busy: it is no idle card to spread to, and a 40% job beside that would
			// run at 71% of its speed, where beside a 10% one on GPU 0 it runs at full.
			name:  "a card another process keeps busy is not idle",
			queue: []Request{{Job: "a", Memory: 10 * gib, Util: 0.4}},
			cards: []CardState{sharing(0, 1, 0.1, 0), {Index: 1, Total: 80 * gib, Slots: NoLimit, Target: DefaultTarget, Util: 1}},
			want:  "a -> [0]",
		},
		{
			// Measured at 0% (NVML's reading of a job under 1%), each adds nothing to
			// its card's load: the loads tie, and the tightest fit, the card the last
			// one took, took them all, each job there costing every other some speed.
			name:  "light jobs spread over busy cards whose loads tie, fewest jobs first",
			queue: seven(0)[:6],
			cards: []CardState{sharing(0, 1, 0.5, 0), sharing(1, 1, 0.5, 0), sharing(2, 1, 0.5, 0)},
			want:  "a -> [0]\nb -> [1]\nc -> [2]\nd -> [0]\ne -> [1]\nf -> [2]",
		},
		{
			name:  "the fewest jobs, before the tightest fit",
			queue: seven(0)[:1],
			cards: []CardState{sharing(0, 3, 0.5, 0), sharing(1, 1, 0.5, 0)},
			want:  "a -> [1]",
		},
		{
			// Nothing measured there says that sharing costs anything: memory keeps
			// its holes for large jobs (mixed-80g ended 4.7% later spread by count).
			name:  "where nothing on the cards computes, the tightest fit",
			queue: seven(0)[:3],
			cards: []CardState{sharing(0, 1, 0, 0), sharing(1, 1, 0, 0)},
			want:  "a -> [0]\nb -> [0]\nc -> [0]",
		},
		{
			name:  "nor is a guess's load counted as compute that ties",
			queue: []Request{{Job: "a", Memory: 10 * gib, Util: 0}},
			cards: []CardState{sharing(0, 2, 1, 1), sharing(1, 1, 1, 1)},
			want:  "a -> [0]",
		},
		{
			name:  "a job not measured yet takes an idle card",
			queue: []Request{{Job: "new", Memory: 10 * gib, UtilUnknown: true}},
			cards: []CardState{sharing(0, 1, 0, 0), sharing(1, 0, 0, 0)},
			want:  "new -> [1]",
		},
		{
			name:  "where none is idle, it joins only jobs that use no compute",
			queue: []Request{{Job: "new", Memory: 10 * gib, UtilUnknown: true}, {Job: "new2", Memory: 10 * gib, UtilUnknown: true}},
			cards: []CardState{sharing(0, 1, 0.4, 0), sharing(1, 1, 0, 0)},
			// It waits for the job just placed to be measured (soon), not for it to end.
			want: "new -> [1]\nnew2 waits: unmeasured\nreserved for new2: GPU 1 in 0s, due",
		},
		{
			// Counted at their sweep's busiest measured shape, 10%, both would fit beside
			// the light job; a heavy shape's guess that far off would slow the card.
			name:  "a card takes one guess at a time",
			queue: []Request{{Job: "g1", Memory: 10 * gib, Util: 0.1, UtilUnknown: true}, {Job: "g2", Memory: 10 * gib, Util: 0.1, UtilUnknown: true}},
			cards: []CardState{sharing(0, 1, 0.1, 0)},
			want:  "g1 -> [0]\ng2 waits: unmeasured\nreserved for g2: GPU 0 in 0s, due",
		},
		{
			name:  "a measured job may join a guess that leaves room",
			queue: []Request{{Job: "g1", Memory: 10 * gib, Util: 0.1, UtilUnknown: true}, {Job: "m", Memory: 10 * gib, Util: 0.3}},
			cards: []CardState{sharing(0, 1, 0.1, 0)},
			want:  "g1 -> [0]\nm -> [0]",
		},
		{
			name:  "nor does a measured job join one that is not",
			queue: []Request{{Job: "a", Memory: 10 * gib, Util: 0.2}, {Job: "zero", Memory: 10 * gib}},
			cards: []CardState{sharing(0, 1, 1, 1)},
			want:  "zero -> [0]\na waits: would-slow\nreserved for a: GPU 0 in 0s, due",
		},
		{
			name:  "a higher target lets more share",
			queue: seven(1)[:3],
			cards: []CardState{{Index: 0, Total: 80 * gib, Slots: NoLimit, Target: 2}},
			want:  "a -> [0]\nb -> [0]\nc waits: would-slow\nreserved for c: GPU 0 in unknown",
		},
		{
			name:  "the plan stays a hard cap",
			queue: seven(0.1)[:3],
			cards: []CardState{{Index: 0, Total: 80 * gib, Slots: 2, Target: DefaultTarget}},
			want:  "a -> [0]\nb -> [0]\nc waits: no-slot\nreserved for c: GPU 0 in unknown",
		},
		{
			// The head, not measured yet, waits for card 0 to be idle in 10 min: a job
			// that would still run then may not start beside what runs there, one that
			// ends by then may.
			name: "a job that would keep the head from its idle card waits",
			queue: []Request{{Job: "head", Memory: 10 * gib, UtilUnknown: true}, {Job: "long", Memory: 10 * gib, Util: 0.2, Duration: time.Hour},
				{Job: "short", Memory: 10 * gib, Util: 0.2, Duration: 5 * time.Minute}},
			cards: []CardState{{Index: 0, Total: 80 * gib, Reserved: 10 * gib, Running: 1, Slots: NoLimit, Target: DefaultTarget, Util: 0.5,
				Ends: []Release{{In: 10 * time.Minute, Memory: 10 * gib, Util: 0.5}}}},
			want: "short -> [0]\nhead waits: unmeasured\nlong waits: reserved\nreserved for head: GPU 0 in 10m0s, due",
		},
	}
	for _, c := range tests {
		t.Run(c.name, func(t *testing.T) {
			if got := describe(Pack(c.queue, c.cards, nil)); got != c.want {
				t.Errorf("got\n%s\nwant\n%s", got, c.want)
			}
		})
	}
}

// TestWouldSlowSays: the reason names the card, how slow its jobs would run, and why.
func TestWouldSlowSays(t *testing.T) {
	d := Pack([]Request{{Job: "a", Memory: 10 * gib, Util: 0.6}, {Job: "new", Memory: 10 * gib, UtilUnknown: true}},
		[]CardState{sharing(3, 1, 0.5, 0)}, nil)
	var details []string
	for w := range d.Waiting.All() {
		details = append(details, string(w.Reason)+": "+w.Detail)
	}
	want := []string{
		"would-slow: would slow the jobs on GPU 3 to 91% of their speed: it keeps 60% of a card busy, and with it the jobs there would ask 110% of the card, past the sharing target of 100%",
		"unmeasured: its shape's utilization is not measured yet, so it counts as compute-bound until it is; no card it fits is idle, and it would slow the jobs on GPU 3, the least busy with room for it, to 67% of their speed: with it the jobs there would ask 150% of the card, past the sharing target of 100%",
	}
	if strings.Join(details, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(details, "\n"), strings.Join(want, "\n"))
	}
	// A shape none of whose attempts could be measured counts as the whole card, which
	// its reason says as gpuq status's all? does, not as a measured 100%.
	d = Pack([]Request{{Job: "a", Memory: 10 * gib, Util: 1, UtilAssumed: true}}, []CardState{sharing(3, 1, 0.5, 0)}, nil)
	for w := range d.Waiting.All() {
		if got, want := w.Detail, "would slow the jobs on GPU 3 to 67% of their speed: its shape's utilization is not measured yet (none of its attempts could be), "+
			"so it counts as the whole card, and with it the jobs there would ask 150% of the card, past the sharing target of 100%"; got != want {
			t.Errorf("a shape taken as the whole card:\n%s\nwant\n%s", got, want)
		}
	}
	if d.Waiting.Len() != 1 {
		t.Errorf("a shape taken as the whole card did not wait: %s", describe(d))
	}
	// Below a target of the whole card, a job may wait where it would slow nobody: its
	// reason says the target holds it, not that the jobs would run at 100% of their
	// speed.
	below := sharing(0, 1, 0.5, 0)
	below.Target = 0.8
	d = Pack([]Request{{Job: "a", Memory: 10 * gib, Util: 0.4}, {Job: "new", Memory: 10 * gib, Util: 0.4, UtilUnknown: true}}, []CardState{below}, nil)
	details = details[:0]
	for w := range d.Waiting.All() {
		details = append(details, string(w.Reason)+": "+w.Detail)
	}
	want = []string{
		"would-slow: would pass the sharing target on GPU 0: it keeps 40% of a card busy, and with it the jobs there would ask 90% of the card, past the sharing target of 80%",
		"unmeasured: its shape's utilization is not measured yet, so it counts as 40% of a card until it is; no card it fits is idle, " +
			"and on GPU 0, the least busy with room for it, with it the jobs there would ask 90% of the card, past the sharing target of 80%",
	}
	if strings.Join(details, "\n") != strings.Join(want, "\n") {
		t.Errorf("below a target of the whole card, got\n%s\nwant\n%s", strings.Join(details, "\n"), strings.Join(want, "\n"))
	}
	// A second guess is told as such, not as a slowdown the guesses do not add up to.
	d = Pack([]Request{{Job: "g2", Memory: 10 * gib, Util: 0.1, UtilUnknown: true}}, []CardState{sharing(3, 2, 0.2, 1)}, nil)
	if d.Waiting.Len() != 1 {
		t.Fatalf("a second guess did not wait: %s", describe(d))
	}
	for w := range d.Waiting.All() {
		if got := string(w.Reason) + ": " + w.Detail; got != "unmeasured: its shape's utilization is not measured yet, so it counts as 10% of a card until it is; "+
			"no card it fits is idle, and GPU 3, the least busy with room for it, already runs a job not measured yet: a card takes one such guess at a time" {
			t.Errorf("a second guess: %s", got)
		}
	}
}

// TestSpeed: the model's hand-worked values.
func TestSpeed(t *testing.T) {
	for _, c := range []struct {
		util float64
		k    int
		cost float64
		want float64
	}{
		{0.5 + 0.5, 2, 0, 1},
		{1 + 1, 2, 0, 0.5},
		{1 + 1, 2, 0.05, 0.475},
		{0.3 + 0.3 + 0.3, 3, 0.05, 0.95 * 0.95},
		{0, 1, 0.05, 1},
	} {
		if got := Speed(c.util, c.k, c.cost); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("Speed(%v, %d, %v) = %v, want %v", c.util, c.k, c.cost, got, c.want)
		}
	}
}

// TestAGuessThatWaitsStopsNoMeasuredJobAlikeInAllElse: a job not measured yet that
// waits (its card already runs one) says nothing of a measured job of the same memory
// and utilization behind it, which Pack and Place both start.
func TestAGuessThatWaitsStopsNoMeasuredJobAlikeInAllElse(t *testing.T) {
	cards := []CardState{{Index: 0, Total: 80 * gib, Reserved: 10 * gib, Running: 1, Slots: NoLimit, Target: DefaultTarget,
		Util: 0.3, Blind: 1, BlindUtil: 0.3, Ends: []Release{{In: UnknownEnd, Memory: 10 * gib, Util: 0.3, Blind: true}}}}
	queue := []Request{{Job: "u", Memory: 10 * gib, Util: 0.3, UtilUnknown: true}, {Job: "m", Memory: 10 * gib, Util: 0.3}}
	want := "m -> [0]\nu waits: unmeasured\nreserved for u: GPU 0 in 0s, due"
	if got := describe(Pack(queue, cards, nil)); got != want {
		t.Errorf("Pack:\n%s\nwant\n%s", got, want)
	}
	if got := Place(&grouped{q: queue}, cards, nil, 10*gib); len(got.Placements) != 1 || got.Placements[0].Job != "m" {
		t.Errorf("Place: %+v, want m on GPU 0", got.Placements)
	}
}

// TestAPlanSpeaksForItsOwnSweepAlone: a job of a sweep with a gpu_plan, not measured
// yet, counts as nothing beside its own sweep's jobs (its plan's word on how many of
// them share a card), and beside another sweep's as any job not measured yet: at its
// guess (Planned), and as a guess, on either side.
func TestAPlanSpeaksForItsOwnSweepAlone(t *testing.T) {
	// on is a card running jobs of sweep a not measured yet, each counted at guess
	// beside another sweep's jobs.
	on := func(i, jobs int, guess float64) CardState {
		c := sharing(i, jobs, 0, 0)
		c.Sweep, c.Planned, c.PlannedJobs = "a", float64(jobs)*guess, jobs
		return c
	}
	// mine is a job of sweep a not measured yet, counted at guess beside others'.
	mine := func(job string, guess float64) Request {
		return Request{Job: job, Memory: 10 * gib, Sweep: "a", Util: guess, UtilPlanned: true}
	}
	x := Request{Job: "x", Memory: 10 * gib, UtilUnknown: true, Sweep: "x"}
	measured := func(u float64) Request { return Request{Job: "m", Memory: 10 * gib, Util: u, Sweep: "x"} }
	// xOn is a card running a job of sweep x of util, blind if not measured.
	xOn := func(util float64, blind int) CardState {
		c := sharing(0, 1, util, blind)
		c.Sweep = "x"
		return c
	}
	// reservedFor is a card running a job of sweep a measured at 5%, which holds 70 of
	// its 80 GiB and ends in ten minutes.
	reservedFor := func() CardState {
		c := sharing(0, 1, 0.05, 0)
		c.Sweep, c.Reserved = "a", 70*gib
		c.Ends = []Release{{In: 10 * time.Minute, Memory: 70 * gib, Util: 0.05}}
		return c
	}
	// both runs a job of x's, measured at 20%, and one of a's not measured yet, guessed
	// at 40%.
	both := xOn(0.2, 0)
	both.Running, both.Sweep, both.Mixed, both.Planned, both.PlannedJobs = 2, "", true, 0.4, 1
	tests := []struct {
		name  string
		queue []Request
		cards []CardState
		want  string
	}{
		{
			name:  "its own sweep's jobs fill the plan's slots as before",
			queue: []Request{mine("a2", 1), mine("a3", 1)},
			cards: []CardState{on(0, 1, 1)},
			want:  "a2 -> [0]\na3 -> [0]",
		},
		{
			// Another user's process keeping the card 50% busy is no job of sweep a.
			name:  "beside another user's busy process they count as guesses",
			queue: []Request{mine("a2", 1)},
			cards: []CardState{func() CardState { c := on(0, 1, 1); c.Util, c.Others = 0.5, true; return c }()},
			want:  "a2 waits: unmeasured\nreserved for a2: GPU 0 in unknown",
		},
		{
			// It will be measured within minutes: the card is reserved as for a guess.
			name:  "another sweep's job not measured yet counts it as compute-bound",
			queue: []Request{x},
			cards: []CardState{on(0, 1, 1)},
			want:  "x waits: unmeasured\nreserved for x: GPU 0 in 0s, due",
		},
		{
			name:  "and a measured job of another sweep counts it at its sweep's busiest",
			queue: []Request{measured(0.6)},
			cards: []CardState{on(0, 1, 0.4)},
			want:  "m -> [0]",
		},
		{
			name:  "which may leave no room",
			queue: []Request{measured(0.7)},
			cards: []CardState{on(0, 1, 0.4)},
			want:  "m waits: would-slow\nreserved for m: GPU 0 in 0s, due",
		},
		{
			// Alike in all but their sweeps, the one that waits says nothing of the other.
			name:  "a measured job of the planned sweep is no other sweep's",
			queue: []Request{measured(0.3), measured(0.3), {Job: "am", Memory: 10 * gib, Util: 0.3, Sweep: "a"}},
			cards: []CardState{on(0, 1, 1)},
			want:  "am -> [0]\nm waits: would-slow\nm waits: would-slow\nreserved for m: GPU 0 in 0s, due",
		},
		{
			name:  "a guess of another sweep does not join it even where the guesses leave room",
			queue: []Request{{Job: "x", Memory: 10 * gib, Util: 0.3, UtilUnknown: true, Sweep: "x"}},
			cards: []CardState{on(0, 1, 0.4)},
			want:  "x waits: unmeasured\nreserved for x: GPU 0 in 0s, due",
		},
		{
			name:  "beside another sweep's job it counts at its guess",
			queue: []Request{mine("a1", 1)},
			cards: []CardState{xOn(0.5, 0)},
			want:  "a1 waits: unmeasured\nreserved for a1: GPU 0 in unknown",
		},
		{
			name:  "which may leave room",
			queue: []Request{mine("a1", 0.4)},
			cards: []CardState{xOn(0.5, 0)},
			want:  "a1 -> [0]",
		},
		{
			name:  "and as a guess, which joins no other",
			queue: []Request{mine("a1", 0.4)},
			cards: []CardState{xOn(0.3, 1)},
			want:  "a1 waits: unmeasured\nreserved for a1: GPU 0 in 0s, due",
		},
		{
			// A job of a's joining it slows x's job too, of which a's plan says nothing.
			name:  "on a card another sweep's job shares, its own sweep's jobs count as guesses too",
			queue: []Request{mine("a2", 0.4)},
			cards: []CardState{both},
			want:  "a2 waits: unmeasured\nreserved for a2: GPU 0 in 0s, due",
		},
		{
			// The card is kept for a9, which counts as nothing beside a's own job there;
			// beside x's it counts at its guess: x taking it would keep a9 waiting as
			// long as x runs, a guess beside another sweep's job.
			name:  "a card reserved for a planned job takes no other sweep's job that would leave it no room",
			queue: []Request{{Job: "a9", Memory: 40 * gib, Sweep: "a", Util: 1, UtilPlanned: true}, {Job: "x", Memory: 5 * gib, Util: 0.9, Sweep: "x"}},
			cards: []CardState{reservedFor()},
			want:  "a9 waits: no-memory\nx waits: reserved\nreserved for a9: GPU 0 in 10m0s, due",
		},
		{
			// The red team's case: a, gpu_plan "1,1", submitted with x and b, all
			// compute-bound; counted as nothing, a's jobs took x's and b's cards, or they
			// took a's, two to a card, neither measurable there.
			name:  "a's jobs first, then x and b wait",
			queue: []Request{mine("a1", 1), mine("a2", 1), x, {Job: "b", Memory: 10 * gib, UtilUnknown: true, Sweep: "b"}},
			cards: []CardState{sharing(0, 0, 0, 0), sharing(1, 0, 0, 0)},
			want:  "a1 -> [0]\na2 -> [1]\nx waits: unmeasured\nb waits: unmeasured\nreserved for x: GPU 0 in 0s, due",
		},
		{
			name:  "x and b first, then a's jobs wait",
			queue: []Request{x, {Job: "b", Memory: 10 * gib, UtilUnknown: true, Sweep: "b"}, mine("a1", 1), mine("a2", 1)},
			cards: []CardState{sharing(0, 0, 0, 0), sharing(1, 0, 0, 0)},
			want:  "x -> [0]\nb -> [1]\na1 waits: unmeasured\na2 waits: unmeasured\nreserved for a1: GPU 0 in 0s, due",
		},
	}
	for _, c := range tests {
		t.Run(c.name, func(t *testing.T) {
			d := Pack(c.queue, c.cards, nil)
			if got := describe(d); got != c.want {
				t.Errorf("got\n%s\nwant\n%s", got, c.want)
			}
			// Place decides the same.
			if got, want := Place(&grouped{q: c.queue}, slices.Clone(c.cards), nil, 10*gib).Placements, d.Placements; !slices.EqualFunc(got, want,
				func(a, b Placement) bool { return a.Job == b.Job && slices.Equal(a.Cards, b.Cards) }) {
				t.Errorf("Place: %+v, Pack: %+v", got, want)
			}
		})
	}
	// Why another sweep's job waits names the planned sweep's job it would join.
	for _, c := range []struct {
		r    Request
		card CardState
		want string
	}{{x, on(3, 1, 1), "unmeasured: its shape's utilization is not measured yet, so it counts as compute-bound until it is; no card it fits is idle, " +
		"and it would slow the jobs on GPU 3, the least busy with room for it, to 50% of their speed: with it the jobs there would ask 200% of the card, " +
		"past the sharing target of 100%; GPU 3 runs a job of sweep a not measured yet, which counts as compute-bound beside another sweep's: " +
		"its gpu_plan speaks only for its own jobs"},
		{measured(0.7), on(3, 2, 0.2), "would-slow: would slow the jobs on GPU 3 to 91% of their speed: it keeps 70% of a card busy, and with it the jobs there would ask 110% of the card, " +
			"past the sharing target of 100%; GPU 3 runs 2 jobs of sweep a not measured yet, which count as 40% of a card beside another sweep's: " +
			"its gpu_plan speaks only for its own jobs"},
		{Request{Job: "x", Memory: 10 * gib, Util: 0.3, UtilUnknown: true, Sweep: "x"}, on(3, 1, 0.4),
			"unmeasured: its shape's utilization is not measured yet, so it counts as 30% of a card until it is; no card it fits is idle, " +
				"and GPU 3, the least busy with room for it, already runs a job of sweep a not measured yet, which counts as 40% of a card beside another sweep's: " +
				"its gpu_plan speaks only for its own jobs: a card takes one such guess at a time"},
		// On a card of its own sweep's jobs, only another process can hold it back.
		{mine("a2", 1), func() CardState { c := on(3, 1, 1); c.Util = 1.2; return c }(), "would-slow: would slow the jobs on GPU 3 to 83% of their speed: " +
			"its shape's utilization is not measured yet, and its sweep's gpu_plan has it count as nothing beside its own jobs, " +
			"and with it the jobs there would ask 120% of the card, past the sharing target of 100%"},
		{Request{Job: "x", Memory: 10 * gib, Util: 0.1, Sweep: "x"}, func() CardState { c := both; c.Index, c.Planned, c.Util = 3, 0.8, 0.2; return c }(),
			"would-slow: would slow the jobs on GPU 3 to 91% of their speed: it keeps 10% of a card busy, and with it the jobs there would ask 110% of the card, " +
				"past the sharing target of 100%; GPU 3 runs jobs of several sweeps, among them a job not measured yet of a sweep with a gpu_plan, " +
				"which counts as 80% of a card there: a gpu_plan speaks only for its own sweep's jobs"},
		{mine("a1", 1), xOn(0.5, 0), "unmeasured: its shape's utilization is not measured yet, and its sweep's gpu_plan speaks only for its own jobs: " +
			"beside another sweep's it counts as compute-bound until it is; no card it fits is idle, and it would slow the jobs on GPU 0, " +
			"the least busy with room for it, to 67% of their speed: with it the jobs there would ask 150% of the card, past the sharing target of 100%"},
	} {
		d := Pack([]Request{c.r}, []CardState{c.card}, nil)
		if d.Waiting.Len() != 1 {
			t.Errorf("%s does not wait: %s", c.r.Job, describe(d))
		}
		for w := range d.Waiting.All() {
			if got := string(w.Reason) + ": " + w.Detail; got != c.want {
				t.Errorf("why %s:\n%s\nwant\n%s", c.r.Job, got, c.want)
			}
		}
	}
}
