package daemon

import (
	"net/http"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/gpu"
)

// Machine is the daemon's own cards as it last read them, with its plan and headroom:
// what gpuq gpus shows while a daemon runs, rather than the cards gpuq would open by
// itself. Workers' cards are not among them.
type Machine struct {
	// Simulated names the simulated machine, "" on real cards.
	Simulated string     `json:"simulated,omitempty"`
	Headroom  string     `json:"headroom"`
	Cards     []gpu.Card `json:"cards"`
	// Slots is the plan's limit on each card (-1: none), in the order of Cards.
	Slots []int `json:"slots"`
}

func (d *daemon) gpus(w http.ResponseWriter, r *http.Request) {
	out := Machine{Simulated: d.machine.simulated(), Headroom: d.machine.headroom.String(), Cards: []gpu.Card{}, Slots: []int{}}
	err := d.eng.Do(r.Context(), func() error {
		for _, v := range d.eng.CardViews() {
			if v.Worker != "" {
				continue
			}
			slots := v.Slots
			if slots == plans.NoSlotLimit {
				slots = -1
			}
			out.Cards, out.Slots = append(out.Cards, v.Card), append(out.Slots, slots)
		}
		return nil
	})
	if err != nil {
		failWith(w, err)
		return
	}
	reply(w, out)
}
