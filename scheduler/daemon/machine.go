package daemon

import (
	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/gpu"
)

// machine is the daemon's cards and their settings.
type machine struct {
	inv      *gpu.Inventory
	spec     plans.GPUSpec
	cards    []gpu.Card
	slots    []int
	headroom plans.Headroom
}

// openMachine opens the cards the daemon schedules on, with the machine's plan and
// headroom: the daemon's own settings, never a sweep's.
func openMachine(cfg Config) (*machine, error) {
	ov := cfg.Machine
	spec, err := plans.ParseGPUs(ov.GPUs.Value)
	if err != nil {
		return nil, badSetting(ov.GPUs, err)
	}
	m := &machine{spec: spec, headroom: plans.DefaultHeadroom}
	if ov.Headroom.Value != "" {
		if m.headroom, err = plans.ParseHeadroom(ov.Headroom.Value); err != nil {
			return nil, badSetting(ov.Headroom, err)
		}
	}
	plan := plans.GPUPlan{plans.NoSlotLimit}
	if ov.Plan.Value != "" {
		if plan, err = plans.ParsePlan(ov.Plan.Value); err != nil {
			return nil, badSetting(ov.Plan, err)
		}
	}
	if m.inv, err = gpu.Open(spec, cfg.Inventory); err != nil {
		return nil, err
	}
	if m.cards, err = m.inv.Snapshot(); err != nil {
		m.inv.Close()
		return nil, err
	}
	if m.slots, err = plan.For(len(m.cards)); err != nil {
		m.inv.Close()
		return nil, badSetting(ov.Plan, err)
	}
	return m, nil
}

// badSetting is a machine setting that cannot be used: bad input, named by its source.
func badSetting(o plans.Override, err error) error {
	return plans.Problems{{File: o.Source, Msg: err.Error()}}
}
