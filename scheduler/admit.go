package scheduler

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/gpu"
	"github.com/gpuq/gpuq/scheduler/state"
)

// Admit checks a sweep against the machine's cards and returns its limit on them: its
// own gpus (every card, for "all" or a simulated machine) with its plan (SlotPlan)
// fitted to those. gpuq run, gpuq plan and the daemon all admit a sweep here, on a
// machine whose own plan leaves it room, so that the engine places the same sweep on
// the same machine the same way under each.
func Admit(sw *plans.Sweep, cards []gpu.Card) (state.Limit, error) {
	mine := cards
	if sw.GPUs.Indices != nil {
		mine = nil
		for _, idx := range sw.GPUs.Indices {
			i := slices.IndexFunc(cards, func(c gpu.Card) bool { return c.Index == idx })
			if i < 0 {
				e := &plans.FieldError{File: sw.File, Field: "gpus"}
				if src := sw.Overrides.GPUs.Source; src != "" {
					e = &plans.FieldError{File: src}
				}
				e.Msg = fmt.Sprintf("names GPU %d, which this machine does not have (it has %s)", idx, indicesText(cards))
				return nil, plans.Problems{e}
			}
			mine = append(mine, cards[i])
		}
	}
	pc := make([]plans.Card, len(mine))
	for i, c := range mine {
		pc[i] = plans.Card{Index: c.Index, Name: c.Name, Total: c.Total}
	}
	if err := sw.CheckCards(pc, sw.Overrides.Plan.Source); err != nil {
		return nil, err
	}
	slots, err := sw.SlotPlan().For(len(mine))
	if err != nil {
		return nil, err // CheckCards has checked a written plan; the default has one entry
	}
	l := make(state.Limit, len(mine))
	for i, c := range mine {
		l[c.Index] = slots[i]
	}
	return l, nil
}

func indicesText(cards []gpu.Card) string {
	parts := make([]string, len(cards))
	for i, c := range cards {
		parts[i] = strconv.Itoa(c.Index)
	}
	return strings.Join(parts, ",")
}
