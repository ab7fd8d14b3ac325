package main

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
)

// daemonGPUs prints the running daemon's cards, with its plan and headroom, and
// reports whether one answered. A daemon schedules on the machine it was started with,
// whatever gpuq would open by itself now; --gpus or --gpu-plan given here (flag or
// environment) ask for this machine instead.
func daemonGPUs(opts *gpusOptions) (bool, error) {
	st := opts.settings
	for _, flag := range []string{"gpus", "gpu-plan"} {
		if st.flags.Changed(flag) {
			return false, nil
		}
	}
	if ov := st.overrides(); ov.GPUs.Source == "GPUQ_GPUS" || ov.Plan.Source == "GPUQ_GPU_PLAN" {
		return false, nil
	}
	c, err := st.dial()
	var none api.NoDaemonError
	if errors.As(err, &none) {
		return false, nil // the cards gpuq would use itself
	}
	if err != nil {
		return true, err
	}
	m, err := c.Machine()
	if err != nil {
		return true, err
	}
	var slots []int // nil: no plan, as without a daemon
	if slices.ContainsFunc(m.Slots, func(n int) bool { return n >= 0 }) {
		for _, n := range m.Slots {
			if n < 0 {
				n = plans.NoSlotLimit
			}
			slots = append(slots, n)
		}
	}
	where := "on " + c.Dir()
	if st.remote() {
		where = "at " + st.v.GetString(keyServer)
	}
	fmt.Fprintf(opts.io.Err, "gpuq: the cards of the daemon %s, headroom %s, util_target %s (--gpus shows others)\n", where, m.Headroom, cmp.Or(m.UtilTarget, "1"))
	return true, writeGPUs(opts.io, m.Cards, slots, m.Simulated, opts.json)
}
