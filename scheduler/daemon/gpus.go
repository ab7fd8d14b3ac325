package daemon

import (
	"net/http"
	"strings"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/gpu"
)

func (d *daemon) gpus(w http.ResponseWriter, r *http.Request) {
	out := api.Machine{Simulated: d.machine.simulated(), Headroom: d.machine.headroom.String(), UtilTarget: plans.UtilTargetText(d.machine.utilTarget),
		Cards: []gpu.Card{}, Slots: []int{}, Drained: []bool{}, Names: map[string]string{}}
	views, err := d.eng.CardViews(r.Context())
	if err != nil {
		failWith(w, err)
		return
	}
	view := d.store.View()
	for _, v := range views {
		if v.Worker != "" {
			continue
		}
		slots := v.Slots
		if slots == plans.NoSlotLimit {
			slots = -1
		}
		out.Cards, out.Slots, out.Drained = append(out.Cards, v.Card), append(out.Slots, slots), append(out.Drained, v.Drained)
		for _, p := range v.Processes {
			job, _, _ := strings.Cut(p.Attempt, "/")
			if j := view.Job(job); j != nil {
				out.Names[job] = j.Name
			}
		}
	}
	reply(w, out)
}
