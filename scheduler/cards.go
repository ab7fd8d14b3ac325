package scheduler

import (
	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/gpu"
)

// CardStates combines what NVML reads, the plan, and gpuq's running attempts into the
// packer's view of each card. slots is the plan fitted to cards. ours tells whether a
// process belongs to an attempt; any other process on a card is foreign, and its memory
// counts against free.
func CardStates(cards []gpu.Card, slots []int, headroom plans.Headroom, running []*Attempt, ours func(pid int) bool) []CardState {
	pos := make(map[int]int, len(cards))
	out := make([]CardState, len(cards))
	for i, c := range cards {
		pos[c.Index] = i
		out[i] = CardState{Index: c.Index, Total: c.Total, Used: c.Used, Headroom: headroom.Of(c.Total), Slots: slots[i]}
	}
	for _, a := range running {
		for _, idx := range a.GPUs {
			if i, ok := pos[idx]; ok {
				out[i].Reserved += a.reserve()
				out[i].Running++
			}
		}
	}
	for i, c := range cards {
		for _, p := range c.Processes {
			if p.Used != gpu.Unknown && (ours == nil || !ours(p.PID)) {
				out[i].Foreign += p.Used
			}
		}
	}
	return out
}

// Requests turns queued jobs into the packer's requests, in queue order.
func Requests(queue []*Job) []Request {
	out := make([]Request, len(queue))
	for i, j := range queue {
		out[i] = requestOf(j)
	}
	return out
}

// requestOf is a queued job as the packer sees it. A job of memory: probe whose shape
// is not measured yet runs alone.
func requestOf(j *Job) Request {
	return Request{Job: j.ID, Memory: j.Estimate, GPUs: j.GPUs, Host: j.HostEstimate,
		Exclusive: j.Pos.Exclusive || j.Probe && j.Estimate == 0}
}
