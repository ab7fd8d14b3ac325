package scheduler

import (
	"fmt"
	"strings"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/gpu"
	"github.com/gpuq/gpuq/scheduler/state"
)

// MachinePlan is the machine's own plan on its cards, and where it was set, for what
// a sweep is told of it: a job runs within both its sweep's plan and the machine's.
type MachinePlan struct {
	Cards []gpu.Card
	Slots []int  // in the order of Cards; plans.NoSlotLimit where none
	Plan  string // as written
	From  string // where: "GPUQ_GPU_PLAN", "config.yaml: gpu_plan", "--gpu-plan"
}

// Capped says where the machine's plan lets fewer of a sweep's jobs run on a card than
// the sweep's own gpu_plan does: the machine's setting hides the sweep's there, and a
// person who wrote the sweep's would not know it. "" when it hides nothing, or the
// sweep writes no gpu_plan (its default gives way to the machine's without a word).
func (m MachinePlan) Capped(sw *plans.Sweep, limit state.Limit) string {
	if sw.Plan == nil {
		return ""
	}
	type pair struct{ machine, sweep int }
	var order []pair
	on := map[pair][]string{}
	for i, c := range m.Cards {
		want, ok := limit[c.Index]
		if !ok || want == 0 || m.Slots[i] >= want {
			continue
		}
		p := pair{m.Slots[i], want}
		if on[p] == nil {
			order = append(order, p)
		}
		on[p] = append(on[p], fmt.Sprint(c.Index))
	}
	if len(order) == 0 {
		return ""
	}
	var parts []string
	for _, p := range order {
		parts = append(parts, fmt.Sprintf("%s on GPU %s, not %d", plans.Count(p.machine, "job"), strings.Join(on[p], ","), p.sweep))
	}
	where := sw.File + ": gpu_plan"
	if src := sw.Overrides.Plan.Source; src != "" {
		where = src
	}
	return fmt.Sprintf("%s %s is capped by the machine's gpu_plan %s (%s): at most %s", where, sw.Plan, m.Plan, m.From,
		strings.Join(parts, "; "))
}
