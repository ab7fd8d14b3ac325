package simulate

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/state"
)

func mustDecode(t *testing.T, doc string) *Trace {
	t.Helper()
	tr, err := Decode("t.yaml", []byte(doc), plans.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// TestMachineOOM: the trainer that allocates second on a full card loses, and its
// message tells its true peak (held plus tried) and what the other held.
func TestMachineOOM(t *testing.T) {
	m := newMachine(plans.GPUSpec{Simulated: []plans.SimulatedCards{{Count: 1, Bytes: 24 * gib}}})
	var outcomes []plans.Outcome
	var facts *plans.OOMFacts
	record := func(o plans.Outcome, f *plans.OOMFacts) {
		outcomes = append(outcomes, o)
		if f != nil {
			facts = f
		}
	}
	first := m.start([]int{0}, 14*gib, time.Hour, 0, record)
	m.advance(time.Second) // the second starts a second later, and allocates a second later
	m.start([]int{0}, 12*gib, time.Hour, 0, record)
	m.run()
	if !reflect.DeepEqual(outcomes, []plans.Outcome{plans.GPUOOM, plans.Success}) {
		t.Fatalf("outcomes %v", outcomes)
	}
	if facts.ProcessBytes+facts.TriedBytes != 12*gib || facts.TotalBytes != 24*gib ||
		len(facts.Others) != 1 || facts.Others[0].PID != first || facts.Others[0].Bytes != 14*gib {
		t.Errorf("facts %+v", facts)
	}
	if m.ooms != 1 || m.last != time.Hour {
		t.Errorf("ooms %d, last end %v", m.ooms, m.last)
	}
	// 14 GiB held from 60 s to 1 h on a 24 GiB card, over a makespan of 1 h.
	want := 14.0 / 24 * (3600 - 60) / 3600
	if u := m.utilization(); u < want-1e-9 || u > want+1e-9 {
		t.Errorf("utilization %v, want %v", u, want)
	}
}

const smallTrace = `
gpus: "sim:2x24GiB"
gpu_plan: "2"
headroom: 1GiB
jobs:
  - {name: fits, estimate: 10GiB, base: 3GiB, activations: 6GiB, duration: 30m, count: 6}
  - {name: short, estimate: 8GiB, base: 3GiB, activations: 11GiB, duration: 40m, count: 3}
  - {name: never, estimate: 20GiB, base: 30GiB, activations: 1GiB, duration: 1h}
`

// TestPolicies: on a trace whose estimates are short for one shape, gpuq completes
// every job that fits at some rung and fails the one that fits at none; the tmux way
// loses the short ones whenever they meet another job; one job per card loses only the
// job larger than a card; the oracle loses no attempt. Every policy is deterministic.
func TestPolicies(t *testing.T) {
	tr := mustDecode(t, smallTrace)
	if u := Unfit(tr); !reflect.DeepEqual(u, []int{9}) {
		t.Fatalf("unfit %v, want [9]", u)
	}
	results := map[Policy]Result{}
	for _, p := range Policies {
		r, err := Run(tr, p)
		if err != nil {
			t.Fatal(err)
		}
		again, _ := Run(tr, p)
		r.SimWall, again.SimWall = 0, 0
		if r != again {
			t.Errorf("%s: not deterministic:\n%+v\n%+v", p, r, again)
		}
		if r.Completed+r.Failed != 10 || r.Makespan < r.LowerBound || r.Attempts < r.Completed {
			t.Errorf("%s: %+v", p, r)
		}
		results[p] = r
	}
	if g := results[GPUQ]; g.Completed != 9 || g.OOMEvents == 0 || g.Attempts <= 10 {
		t.Errorf("gpuq: %+v; want 9 completed after OOMs and retries", g)
	}
	if s := results[Static]; s.Attempts != 10 || s.Completed >= 9 {
		t.Errorf("static: %+v; want OOMs lost", s)
	}
	// Alone on a card every job fits but the one larger than any card.
	if o := results[OnePerGPU]; o.Completed != 9 || o.Failed != 1 || o.OOMEvents != 1 {
		t.Errorf("one-per-gpu: %+v", o)
	}
	// Knowing every peak, the oracle never runs out of memory, and fails the job that
	// fits at no rung without trying it: no later than gpuq, which learns the peaks.
	if o := results[Oracle]; o.Completed != 9 || o.Failed != 1 || o.OOMEvents != 0 || o.Attempts != 9 || o.Makespan > results[GPUQ].Makespan {
		t.Errorf("oracle: %+v; gpuq %v s", o, results[GPUQ].Makespan)
	}
}

// TestLowerBound on a trace small enough to work out by hand: two 1-slot cards of
// 24 GiB; jobs of 12 GiB (3 + 9) for 1 h, checkpointing would make them 6.15 GiB for
// 1.08 h. Slots: 4 jobs x 1 h / 2 slots = 2 h, the largest term.
func TestLowerBound(t *testing.T) {
	tr := mustDecode(t, `
gpus: "sim:2x24GiB"
gpu_plan: "1"
jobs: [{name: a, estimate: 12GiB, base: 3GiB, activations: 9GiB, duration: 1h, count: 4}]
`)
	if got := LowerBound(tr); got != 2*time.Hour {
		t.Errorf("bound %v, want 2h", got)
	}
	// With memory alone deciding and many jobs, the memory term binds. The leanest
	// tier is checkpointing with the batch quartered: (3 + 0.35 x 9 / 4) GiB for
	// 1.08 x 1.15^2 h, less than both halved (0.35 x 9 / 2, 1.15) and an eighth.
	tr = mustDecode(t, `
gpus: "sim:2x24GiB"
jobs: [{name: a, estimate: 12GiB, base: 3GiB, activations: 9GiB, duration: 1h, count: 40}]
`)
	want := 40 * (3 + 0.35*9/4) * 1.08 * 1.15 * 1.15 / 48 * 3600
	if got := LowerBound(tr).Seconds(); got < want*0.999 || got > want*1.001 {
		t.Errorf("bound %.0f s, want %.0f s", got, want)
	}
	// Jobs that keep a card 80% busy: 10 x 0.8 x 1 h of compute on two cards is 4 h,
	// however many share a card.
	tr = mustDecode(t, `
gpus: "sim:2x80GiB"
jobs: [{name: a, estimate: 2GiB, base: 1GiB, activations: 1GiB, duration: 1h, gpu_util: 0.8, count: 10}]
`)
	if got := LowerBound(tr); got != 4*time.Hour {
		t.Errorf("compute bound %v, want 4h", got)
	}
}

// TestTimeoutInVirtualTime: a hung job is stopped at its timeout, in virtual time, and
// the card goes to the job behind it; a retried one is stopped again.
func TestTimeoutInVirtualTime(t *testing.T) {
	tr := mustDecode(t, `
gpus: "sim:1x24GiB"
gpu_plan: "1"
timeout: 2h
jobs:
  - {name: hung, base: 3GiB, duration: 100h}
  - {name: next, base: 3GiB, duration: 1h}
  - {name: retried, base: 3GiB, duration: 100h, timeout: {after: 30m, retries: 1}}
`)
	r, err := Run(tr, GPUQ)
	if err != nil {
		t.Fatal(err)
	}
	// hung 2h, next 1h, retried 30m twice: 4h in all, one after the other.
	if r.Makespan != 4*3600 || r.Completed != 1 || r.Failed != 2 || r.Attempts != 4 {
		t.Errorf("makespan %v s, completed %d, failed %d, attempts %d; want 14400, 1, 2, 4", r.Makespan, r.Completed, r.Failed, r.Attempts)
	}
}

// TestWeightsLargerThanTheCardFailAtOnce: as simtrain.py does, a trainer whose base
// alone outgrows its card runs out of memory loading its model, and gpuq fails its job
// after that one attempt, and the other of its shape without one; a job whose
// activations are what outgrows the card walks its ladder instead.
func TestWeightsLargerThanTheCardFailAtOnce(t *testing.T) {
	tr := mustDecode(t, `
gpus: "sim:1x12GiB"
gpu_plan: "1"
params: {batch_size: 16, gradient_accumulation_steps: 2, gradient_checkpointing: false, num_data_workers: 4}
jobs:
  - {name: llama-7b-full, estimate: 11GiB, base: 100GiB, activations: 4GiB, duration: 2h, count: 2}
  - {name: gpt2-medium, estimate: 8GiB, base: 3GiB, activations: 11GiB, duration: 40m}
`)
	r, store, err := History(tr)
	if err != nil {
		t.Fatal(err)
	}
	if r.Failed != 2 || r.Completed != 1 {
		t.Errorf("failed %d, completed %d; want 2, 1", r.Failed, r.Completed)
	}
	snap := store.View()
	for _, j := range snap.Jobs() {
		n := len(snap.Attempts(j.ID))
		switch big := j.Index <= 2; {
		case big && (j.State != state.JobFailed || n > 1 || !strings.Contains(j.Reason, "before any batch")):
			t.Errorf("%s: %s after %d attempts: %s", j.ID, j.State, n, j.Reason)
		case !big && (j.State != state.JobSucceeded || n < 2):
			t.Errorf("%s: %s after %d attempts, want success after an OOM", j.ID, j.State, n)
		}
	}
}

// TestAShapeThatRanNearlyFillingItsCardIsNotTooLarge: a shape measured at 23.5 GiB on a
// card of 24, above its room (22.8 after 5% headroom), succeeded there: the others of
// the shape run there too, one at a time, rather than fail without an attempt as
// larger than every card; and smaller jobs arriving behind them do not keep them off
// it for ever, as the head's reservation keeps any job's.
func TestAShapeThatRanNearlyFillingItsCardIsNotTooLarge(t *testing.T) {
	for _, small := range []string{"", `
  - {name: sa, estimate: 2GiB, base: 1GiB, activations: 0.5GiB, duration: 7m, count: 60}
  - {name: sb, estimate: 2GiB, base: 1GiB, activations: 0.5GiB, duration: 11m, count: 60}
  - {name: sc, estimate: 2GiB, base: 1GiB, activations: 0.5GiB, duration: 13m, count: 60}`} {
		tr := mustDecode(t, `
gpus: "sim:1x24GiB"
headroom: 5%
jobs:
  - {name: big, estimate: 20GiB, base: 3GiB, activations: 20.5GiB, duration: 10m, count: 3}`+small+"\n")
		r, store, err := History(tr)
		if err != nil {
			t.Fatal(err)
		}
		if r.Failed != 0 || r.OOMEvents != 0 || r.Completed != r.Jobs {
			t.Errorf("completed %d of %d, failed %d, OOMs %d; want all, 0, 0", r.Completed, r.Jobs, r.Failed, r.OOMEvents)
		}
		var first, last time.Time
		for _, j := range store.View().Jobs() {
			for _, a := range store.View().Attempts(j.ID) {
				if first.IsZero() || a.Started.Before(first) {
					first = a.Started
				}
				if strings.HasPrefix(j.Name, "big") && a.Started.After(last) {
					last = a.Started
				}
			}
		}
		if started := last.Sub(first); started > time.Hour {
			t.Errorf("the last big job started %s in, behind the small ones; want within the hour", started)
		}
	}
}
