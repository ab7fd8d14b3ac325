package main

import (
	"fmt"
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
	inv   *nvidia.Inventory
	cards []gpu.Card
	limit state.Limit
}

// prepare loads and validates a sweep against the machine. The caller closes p.inv.
func prepare(path string, st *settings, io ioStreams) (*prepared, error) {
	sw, err := plans.LoadSweep(path, st.overrides())
	if err != nil {
		return nil, err
	}
	for _, w := range sw.Warnings() {
		fmt.Fprintln(io.Err, "gpuq: warning:", w)
	}
	inv, err := st.openInventory(sw.GPUs, st.gpusSource(sw), io)
	if err != nil {
		return nil, err
	}
	cards, err := inv.Read()
	if err != nil {
		inv.Close()
		return nil, err
	}
	limit, err := scheduler.Admit(sw, cards)
	if err != nil {
		inv.Close()
		return nil, err
	}
	return &prepared{sweep: sw, inv: inv, cards: cards, limit: limit}, nil
}

// slots is the sweep's plan on each card.
func (p *prepared) slots() []int {
	out := make([]int, len(p.cards))
	for i, c := range p.cards {
		out[i] = p.limit[c.Index]
	}
	return out
}

// engine returns the engine of gpuq run and gpuq plan, with the sweep submitted: the
// machine's cards with no slot limit of their own and the sweep limited to its plan
// on them, as under the daemon, so that both place it as the daemon does. runner may be
// nil for an engine that only previews.
func (p *prepared) engine(st *settings, r scheduler.Runner, poll time.Duration, events func(scheduler.Event)) (*scheduler.Engine, *state.Store, error) {
	headroom, err := st.hostHeadroom()
	if err != nil {
		return nil, nil, err
	}
	store, err := state.NewStore()
	if err != nil {
		return nil, nil, err
	}
	if err := store.Submit(&state.Submission{Sweep: p.sweep, Limit: p.limit}); err != nil {
		return nil, nil, err
	}
	machine, _ := plans.GPUPlan{plans.NoSlotLimit}.For(len(p.cards))
	eng := scheduler.NewEngine(store, p.inv, r, scheduler.RealClock{},
		scheduler.Config{Slots: machine, Headroom: p.sweep.Headroom, Poll: poll, Host: launcher.HostMemory, HostHeadroom: headroom}, events)
	return eng, store, nil
}
