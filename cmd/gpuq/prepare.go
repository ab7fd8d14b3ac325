package main

import (
	"fmt"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/gpu"
)

// prepared is a validated sweep with the cards it will run on.
type prepared struct {
	sweep *plans.Sweep
	inv   *gpu.Inventory
	cards []gpu.Card
	slots []int
}

// prepare loads and validates a sweep against the machine. The caller closes p.inv.
func prepare(path string, st *settings, io ioStreams) (*prepared, error) {
	ov := st.overrides()
	sw, err := plans.LoadSweep(path, ov)
	if err != nil {
		return nil, err
	}
	for _, w := range sw.Warnings() {
		fmt.Fprintln(io.Err, "gpuq: warning:", w)
	}
	inv, err := st.openInventory(sw.GPUs, io)
	if err != nil {
		return nil, err
	}
	cards, err := inv.Snapshot()
	if err != nil {
		inv.Close()
		return nil, err
	}
	pc := make([]plans.Card, len(cards))
	for i, c := range cards {
		pc[i] = plans.Card{Index: c.Index, Name: c.Name, Total: c.Total}
	}
	if err := sw.CheckCards(pc, ov.Plan.Source); err != nil {
		inv.Close()
		return nil, err
	}
	plan := sw.Plan
	if plan == nil {
		plan = sw.DefaultPlan()
	}
	slots, _ := plan.For(len(cards)) // CheckCards has checked the length
	return &prepared{sweep: sw, inv: inv, cards: cards, slots: slots}, nil
}
