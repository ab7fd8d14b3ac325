package scheduler

// What people look at (gpuq top, metrics): the cards as the engine last read them and
// who holds what on each, and why each queued job waits. Like everything that reads the
// engine's cards, these run in its loop (see CardViews and Waits in requests.go).

import (
	"slices"

	"github.com/gpuq/gpuq/scheduler/gpu"
	"github.com/gpuq/gpuq/scheduler/pack"
	"github.com/gpuq/gpuq/scheduler/state"
)

// CardView is a card as the engine last read it, with what the packer counts on it.
type CardView struct {
	gpu.Card
	// Slots is the plan's limit on the card (plans.NoSlotLimit: none); Running the
	// attempts on it.
	Slots, Running int
	Drained        bool
	// Reserved is what the packer holds for gpuq's attempts, Foreign what other
	// processes hold, Headroom what is kept free.
	Reserved, Foreign, Headroom int64
	// Util is what the jobs on it ask of its compute, as the packer counts it (see
	// pack.CardState), and Target the most they may together; 0: no target.
	Util, Target float64
	// Attempts are the running attempts on the card, in start order.
	Attempts []Holding
}

// Holding is a running attempt's part of a card.
type Holding struct {
	Attempt *state.Attempt
	// Reserved is what the packer holds for it; Held what its processes hold now.
	Reserved, Held int64
}

// cardViews returns every card as the last round read it, each process with the attempt
// it belongs to where the round could tell.
func (e *Engine) cardViews() []CardView {
	view := e.store.Latest()
	running := e.runningCopies()
	slots := e.slots()
	states := e.cardStates(nil, slots, running)
	slices.SortFunc(running, func(a, b *state.Attempt) int { return a.Started.Compare(b.Started) })
	drained := view.Drained()
	out := make([]CardView, len(e.cards))
	for i, c := range e.cards {
		s := states[i]
		out[i] = CardView{Card: c, Slots: slots[i], Running: s.Running, Drained: drained[c.ID()],
			Reserved: s.Reserved, Foreign: s.Foreign, Headroom: s.Headroom, Util: s.Util, Target: s.Target}
		out[i].Processes = slices.Clone(c.Processes) // the round's cards are not changed
		for j, o := range e.ownersOf(i) {
			if out[i].Processes[j].Attempt == "" {
				out[i].Processes[j].Attempt = o.attempt
			}
		}
		for _, a := range running {
			if a.On(c.ID()) {
				out[i].Attempts = append(out[i].Attempts, Holding{Attempt: a, Reserved: a.Holds(), Held: e.useOn(a.ID, i).bytes})
			}
		}
	}
	return out
}

// waits says why each queued job that is not held waits, by job.
func (e *Engine) waits() (map[string]pack.Wait, error) {
	view := e.store.Latest()
	d, probing, err := e.decide(view)
	if err != nil {
		return nil, err
	}
	out := make(map[string]pack.Wait, d.Waiting.Len()+len(probing))
	for w := range d.Waiting.All() {
		out[w.Job] = w
	}
	for _, j := range probing {
		out[j.ID] = pack.Wait{Job: j.ID, Detail: probeDetail(view, j)}
	}
	return out, nil
}

// decide is what the packer would decide now, and the queued jobs it was not offered
// because they wait for their shape's probe.
func (e *Engine) decide(view state.View) (pack.Decision, []*state.Job, error) {
	var probing []*state.Job
	v, err := e.packView(view, e.runningNow(), nil)
	if err != nil {
		return pack.Decision{}, nil, err
	}
	queue := e.queue(v, func(j *state.Job) { probing = append(probing, j) })
	return pack.Pack(queue, v.cards, v.hosts), probing, nil
}

// probeDetail says which job a job of memory: probe waits for.
func probeDetail(view state.View, j *state.Job) string {
	by := "the first queued job of its shape"
	if probe := probeOf(view, j.Shape); probe != "" {
		by = probe
	}
	return "memory: probe: it waits for " + by + " to measure its shape"
}
