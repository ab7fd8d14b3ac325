package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/gpuq/gpuq/plans"
)

// One precedence in every mode. A job runs within two sets of settings:
//   - its sweep's own gpus and gpu_plan: the flags given with the sweep (gpuq run, plan,
//     submit), then its file, then the defaults;
//   - the machine's gpus and gpu_plan: the flags given to gpuq daemon, then GPUQ_*,
//     then the user config file, then every card with no slot limit.
//
// A card keeps one headroom and one sharing target (util_target), the machine's: a
// flag, GPUQ_HEADROOM or GPUQ_UTIL_TARGET, the config file, then a sweep's own (the one
// gpuq run runs; the first a daemon that gpuq submit starts is for), then the default.
// Under gpuq run and gpuq plan the machine is GPUQ_* and the config file alone, as for
// the daemon that gpuq submit would start.

// sweepOverrides are the settings given on this command line with a sweep (--gpus,
// --gpu-plan, --headroom, --util-target, --order), and GPUQ_ORDER: they speak for the
// sweep, above its file. GPUQ_GPUS, GPUQ_GPU_PLAN, GPUQ_HEADROOM, GPUQ_UTIL_TARGET and
// the config file speak for the machine, not for each sweep.
func (s *settings) sweepOverrides() plans.Overrides {
	var ov plans.Overrides
	for _, f := range []struct {
		flag string
		to   *plans.Override
	}{{"gpus", &ov.GPUs}, {"gpu-plan", &ov.Plan}, {"headroom", &ov.Headroom}, {"util-target", &ov.UtilTarget}} {
		if s.flags.Changed(f.flag) {
			v, _ := s.flags.GetString(f.flag)
			*f.to = plans.Override{Value: v, Source: "--" + f.flag}
		}
	}
	ov.Order = s.override(keyOrder, "order")
	return ov
}

// runOverrides are the sweep's settings under gpuq run and gpuq plan: those given with
// it, with the machine's headroom and sharing target above its file's.
func (s *settings) runOverrides() plans.Overrides {
	ov := s.sweepOverrides()
	ov.Headroom = s.override(keyHeadroom, "headroom")
	ov.UtilTarget = s.override(keyUtilTarget, "util-target")
	return ov
}

// machineOverrides are the machine's gpus and gpu_plan under gpuq run and gpuq plan:
// GPUQ_GPUS and GPUQ_GPU_PLAN, then the config file; "" where neither says.
func (s *settings) machineOverrides() plans.Overrides {
	return plans.Overrides{GPUs: s.unflagged(keyGPUs), Plan: s.unflagged(keyPlan)}
}

// unflagged is a setting as the environment or the config file give it, whatever flag
// this command line has.
func (s *settings) unflagged(key string) plans.Override {
	env := "GPUQ_" + strings.ToUpper(key)
	if v := strings.TrimSpace(os.Getenv(env)); v != "" {
		return plans.Override{Value: v, Source: env}
	}
	if v, ok := s.file[key].(string); ok && strings.TrimSpace(v) != "" {
		return plans.Override{Value: strings.TrimSpace(v), Source: fmt.Sprintf("%s: %s", s.v.ConfigFileUsed(), key)}
	}
	return plans.Override{}
}

// machineHides says, under gpuq run and gpuq plan, where the machine's headroom or
// sharing target (GPUQ_HEADROOM, GPUQ_UTIL_TARGET, the config file) replaces one the
// sweep's file writes: a card keeps one of each.
func (s *settings) machineHides(sw *plans.Sweep) []string {
	doc, err := plans.Decode(sw.Source, plans.FormatOf(sw.File))
	if err != nil {
		return nil
	}
	sameTarget := func(a, b string) bool {
		x, errX := plans.ParseUtilTarget(a)
		y, errY := plans.ParseUtilTarget(b)
		return errX == nil && errY == nil && plans.SameUtilTarget(x, y)
	}
	var out []string
	for _, c := range []struct {
		key, flag, what string
		same            func(a, b string) bool
	}{
		{keyHeadroom, "headroom", "headroom", func(a, b string) bool { return a == b }},
		{keyUtilTarget, "util-target", "sharing target", sameTarget},
	} {
		o := s.override(c.key, c.flag)
		if o.Value == "" || s.flags.Changed(c.flag) {
			continue
		}
		if v, ok := doc.Get(c.key); ok && !c.same(plans.FormatValue(v), o.Value) {
			out = append(out, fmt.Sprintf("%s: %s %s is replaced by the machine's %s (%s): a card keeps one %s",
				sw.File, c.key, plans.FormatValue(v), o.Value, o.Source, c.what))
		}
	}
	return out
}
