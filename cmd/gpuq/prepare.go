package main

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/gpuq/gpuq/launcher"
	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler"
	"github.com/gpuq/gpuq/scheduler/gpu"
	"github.com/gpuq/gpuq/scheduler/gpu/nvidia"
	"github.com/gpuq/gpuq/scheduler/state"
)

// prepared is a validated sweep with the cards it will run on, admitted on them.
type prepared struct {
	sweep *plans.Sweep
	inv   sweepCards
	cards []gpu.Card // the sweep's
	limit state.Limit
	// machine is the machine's own plan on cards, in their order.
	machine []int
}

// prepare loads and validates a sweep against the machine, as the daemon admits one:
// the machine is what GPUQ_* and the config file say (every card, no slot limit, by
// default), the sweep is its file under the flags given here, and its jobs run within
// both. What of one hides the other is a warning. The caller closes p.inv.
func prepare(path string, st *settings, io ioStreams) (*prepared, error) {
	sw, err := plans.LoadSweep(path, st.runOverrides())
	if err != nil {
		return nil, err
	}
	return prepareSweep(sw, st, io)
}

// prepareSweep is prepare of a sweep loaded already (a one-off's).
func prepareSweep(sw *plans.Sweep, st *settings, io ioStreams) (*prepared, error) {
	warn := func(w string) { fmt.Fprintln(io.Err, "gpuq: warning:", w) }
	for _, w := range sw.Warnings() {
		warn(w)
	}
	for _, w := range st.machineHides(sw) {
		warn(w)
	}
	mo := st.machineOverrides()
	spec, source, err := machineSpec(sw, mo)
	if err != nil {
		return nil, err
	}
	inv, err := st.openInventory(spec, source, io)
	if err != nil {
		return nil, err
	}
	p, err := admitOn(sw, inv, mo)
	if err != nil {
		why := st.whyNoCards(sw, inv, mo, io)
		inv.Close()
		return nil, cmp.Or(why, err)
	}
	if w := p.machinePlan(mo).Capped(sw, p.limit); w != "" {
		warn(w)
	}
	return p, nil
}

// machineSpec is the machine gpuq run and gpuq plan open for a sweep, and where it was
// named: the machine's gpus; a simulated machine the sweep names when the machine names
// none (or "all"), as gpuq submit starts a daemon on it; else every card. A sweep for
// another simulated machine than the one named is refused, as the daemon refuses it.
func machineSpec(sw *plans.Sweep, mo plans.Overrides) (plans.GPUSpec, string, error) {
	spec, err := plans.ParseGPUs(mo.GPUs.Value)
	if err != nil {
		return spec, "", badInput("%s: %v", mo.GPUs.Source, err)
	}
	if !sw.GPUs.IsSimulated() {
		return spec, mo.GPUs.Source, nil
	}
	if !spec.IsSimulated() && spec.Indices == nil {
		return sw.GPUs, gpusWhere(sw), nil
	}
	if spec.String() != sw.GPUs.String() {
		return spec, "", plans.Problems{{File: gpusWhere(sw), Msg: fmt.Sprintf("the sweep is for %s, but the machine is %s (%s): %s",
			sw.GPUs, spec, mo.GPUs.Source, otherMachineHint(sw.GPUs, spec, mo.GPUs.Source, mo.Plan))}}
	}
	return spec, mo.GPUs.Source, nil
}

// otherMachineHint says how to plan or run a sweep for the simulated machine want on
// the machine named by source (GPUQ_GPUS or the config file's gpus), which is spec.
// There are two ways. One is the sweep's machine for this run: GPUQ_GPUS naming it,
// which comes before the config file (a --gpus flag cannot: under gpuq run and gpuq
// plan it speaks for the sweep, not the machine, and there is no empty config file to
// name, /dev/null being refused). The other is the machine's cards, as many as the
// sweep is for (its gpu_plan counts per card, so fewer would not do), by index: --gpus
// with the sweep; all of them where the machine has fewer. A plan of a count a card
// that the machine's settings give (plan, the config file's gpu_plan, say) is for their
// cards: the first way then needs GPUQ_GPU_PLAN too, a count for each of the sweep's.
func otherMachineHint(want, spec plans.GPUSpec, source string, plan plans.Override) string {
	n := want.Count()
	sweeps := fmt.Sprintf("for the sweep's machine, set GPUQ_GPUS=%s", want)
	if p, err := plans.ParsePlan(plan.Value); err == nil && len(p) > 1 && len(p) != n {
		sweeps += fmt.Sprintf(" and GPUQ_GPU_PLAN to %d counts, one a card (gpu_plan %s, from %s, is for %d)", n, plan.Value, plan.Source, len(p))
	}
	sweeps += " for this run"
	if source != "GPUQ_GPUS" {
		sweeps += " (it comes before the config file)"
	}
	cards := spec.Indices
	if cards == nil {
		cards = make([]int, spec.Count())
		for i := range cards {
			cards[i] = i
		}
	}
	if len(cards) == 0 {
		return sweeps
	}
	if n < len(cards) {
		return fmt.Sprintf("%s; for the machine's, give the sweep %d of its cards by index (--gpus %s)", sweeps, n, plans.GPUSpec{Indices: cards[:n]})
	}
	some := ""
	if n > len(cards) {
		some = fmt.Sprintf(": it has %d, not the %d the sweep is for", len(cards), n)
	}
	return fmt.Sprintf("%s; for the machine's, give the sweep its cards by index (--gpus %s%s)", sweeps, plans.GPUSpec{Indices: cards}, some)
}

// whyNoCards says why a sweep names cards the machine lacks (nil when it names none),
// where the inventory can tell more than their absence (CUDA_VISIBLE_DEVICES hides one, a card in MIG mode, the
// simulated machine that would have it), by opening them as named; nil where it cannot.
func (s *settings) whyNoCards(sw *plans.Sweep, machine *nvidia.Inventory, mo plans.Overrides, io ioStreams) error {
	cards, err := machine.Read()
	if err != nil || !slices.ContainsFunc(sw.GPUs.Indices, func(i int) bool {
		return !slices.ContainsFunc(cards, func(c gpu.Card) bool { return c.Index == i })
	}) {
		return nil
	}
	spec, _ := plans.ParseGPUs(mo.GPUs.Value)
	switch {
	case spec.Indices != nil:
		return plans.Problems{{File: gpusWhere(sw), Msg: fmt.Sprintf("names GPUs %s; the machine's are %s (%s): name some of those",
			sw.GPUs, spec, mo.GPUs.Source)}}
	case spec.IsSimulated():
		// The machine named, not the one opening the sweep's cards would simulate.
		more := plans.GPUSpec{Simulated: []plans.SimulatedCards{{Count: slices.Max(sw.GPUs.Indices) + 1,
			Bytes: cmp.Or(leastCards(sw), spec.Simulated[len(spec.Simulated)-1].Bytes)}}}
		return plans.Problems{{File: gpusWhere(sw), Msg: fmt.Sprintf("names GPUs %s; the machine is %s (%s), cards 0-%d: name some of those, or simulate one with more cards there (e.g. %s)",
			sw.GPUs, spec, mo.GPUs.Source, len(cards)-1, more)}}
	}
	opt := s.inventoryOptions(io)
	opt.Source, opt.Notice = gpusWhere(sw), nil // the machine's notices are said already
	opt.CardBytes = leastCards(sw)
	inv, err := nvidia.Open(sw.GPUs, opt)
	if err == nil {
		inv.Close()
	}
	return err
}

// leastCards is the memory of the least cards on which a sweep's gpu_plan means what
// it says, for the simulated machine gpuq suggests where the sweep names cards it
// lacks: each holds its plan's most jobs of the estimate most of its jobs have, and its
// largest job alone, with its headroom, in whole GiB; 0 where no job has an estimate.
// gpuq cannot know the sweep's real cards (gla.yaml's say 23.52 GiB in a comment), and
// its own simulated ones (24 GiB) are its guess; these are what the file itself needs.
func leastCards(sw *plans.Sweep) int64 {
	count := map[int64]int{}
	var usual, largest int64
	for _, j := range sw.Jobs {
		if j.Memory <= 0 {
			continue
		}
		count[j.Memory]++
		if n := count[j.Memory]; n > count[usual] || n == count[usual] && j.Memory > usual {
			usual = j.Memory
		}
		largest = max(largest, j.Memory)
	}
	if largest == 0 {
		return 0
	}
	slots := 1
	for _, n := range sw.Plan {
		if n != plans.NoSlotLimit {
			slots = max(slots, n)
		}
	}
	need := max(int64(slots)*usual, largest)
	total := need + sw.Headroom.Bytes
	if sw.Headroom.Bytes == 0 {
		total = int64(math.Ceil(float64(need) / (1 - sw.Headroom.Percent/100)))
	}
	const gib = 1 << 30
	return (total + gib - 1) / gib * gib
}

// gpusWhere names where a sweep's gpus were written: a flag given with it, or its file.
func gpusWhere(sw *plans.Sweep) string {
	if src := sw.Overrides.GPUs.Source; src != "" {
		return src
	}
	return sw.File + ": gpus"
}

// admitOn admits a sweep on the machine's cards (see scheduler.Admit): its limit, and
// the machine's plan on the cards it may use.
func admitOn(sw *plans.Sweep, inv *nvidia.Inventory, mo plans.Overrides) (*prepared, error) {
	all, err := inv.Read()
	if err != nil {
		return nil, err
	}
	slots := make([]int, len(all))
	for i := range slots {
		slots[i] = plans.NoSlotLimit
	}
	if mo.Plan.Value != "" {
		plan, err := plans.ParsePlan(mo.Plan.Value)
		if err == nil {
			slots, err = plan.For(len(all))
		}
		if err != nil {
			return nil, badInput("%s: %v", mo.Plan.Source, err)
		}
	}
	limit, err := scheduler.Admit(sw, all)
	if err != nil {
		return nil, err
	}
	p := &prepared{sweep: sw, inv: sweepCards{Inventory: inv, keep: map[int]bool{}}, limit: limit}
	for i, c := range all {
		if _, ok := limit[c.Index]; ok {
			p.inv.keep[c.Index] = true
			p.cards, p.machine = append(p.cards, c), append(p.machine, slots[i])
		}
	}
	return p, nil
}

// machinePlan is the machine's plan on the sweep's cards, as warnings name it.
func (p *prepared) machinePlan(mo plans.Overrides) scheduler.MachinePlan {
	return scheduler.MachinePlan{Cards: p.cards, Slots: p.machine, Plan: mo.Plan.Value, From: mo.Plan.Source}
}

// sweepCards is the machine's inventory as a sweep's engine reads it: the sweep's cards
// alone, so that gpuq run and gpuq plan show and use those.
type sweepCards struct {
	*nvidia.Inventory
	keep map[int]bool
}

func (s sweepCards) Read() ([]gpu.Card, error) {
	cards, err := s.Inventory.Read()
	return slices.DeleteFunc(cards, func(c gpu.Card) bool { return !s.keep[c.Index] }), err
}

// slots is the most of the sweep's jobs on each card: its plan, within the machine's.
func (p *prepared) slots() []int {
	out := make([]int, len(p.cards))
	for i, c := range p.cards {
		out[i] = min(p.limit[c.Index], p.machine[i])
	}
	return out
}

// engine returns the engine of gpuq run and gpuq plan, with the sweep submitted: the
// machine's cards with the machine's plan, and the sweep limited to its own on them,
// as under the daemon, so that all three place it alike. runner may be nil for an
// engine that only previews.
func (p *prepared) engine(st *settings, r scheduler.Runner, poll time.Duration, events func(scheduler.Event)) (*scheduler.Engine, *state.Store, error) {
	headroom, err := st.hostHeadroom()
	if err != nil {
		return nil, nil, err
	}
	store, err := state.NewStore()
	if err != nil {
		return nil, nil, err
	}
	// Submitted now, as the daemon's are as they come: a sweep's end notice says how
	// long it took from it.
	if err := store.Submit(&state.Submission{Sweep: p.sweep, Limit: p.limit, Submitted: time.Now()}); err != nil {
		return nil, nil, err
	}
	// Another gpuq's trainers on the cards (a daemon's, beside gpuq plan) hold their
	// memory only until they end.
	trainer := launcher.NewOwners("").Trainer
	if t, ok := r.(interface{ Trainer(pid int) bool }); ok {
		trainer = t.Trainer
	}
	eng := scheduler.NewEngine(store, p.inv, r, scheduler.RealClock{},
		scheduler.Config{Slots: p.machine, Headroom: p.sweep.Headroom, Poll: poll, Host: launcher.HostMemory, HostHeadroom: headroom,
			UtilTarget: p.sweep.UtilTarget, Trainer: trainer}, events)
	return eng, store, nil
}
