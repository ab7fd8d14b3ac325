// Package simulate runs a sweep's trace in virtual time: the real engine and packer of gpuq
// (or a baseline policy: the tmux way, one job per card) over simulated cards, with
// trainers whose memory and duration follow a documented model instead of processes.
// A day of seven GPUs takes seconds, so plans and policies can be compared before the
// day is spent.
package simulate

import (
	"math"
	"time"

	"github.com/gpuq/gpuq/plans"
)

// The physics of a simulated trainer under the default ladder's rungs. The examples'
// simulated trainer (examples/trainers/simtrain.py) follows the same model, and the
// README ("Simulated trainers") documents it once for both.
const (
	// CheckpointActivations is what gradient checkpointing leaves of the activations.
	CheckpointActivations = 0.35
	// CheckpointSlowdown is the cost of recomputing them.
	CheckpointSlowdown = 1.08
	// HalvingSlowdown is the cost of each halving of the micro-batch (accumulation
	// doubled): more, smaller steps.
	HalvingSlowdown = 1.15
	// NoWorkersSlowdown is the cost of loading data in the training process.
	NoWorkersSlowdown = 1.2
	// AllocateAfter is when a trainer reaches its peak: after loading, at its first
	// steps. A job shorter than twice this allocates half-way through.
	AllocateAfter = 60 * time.Second
)

// Truth is what a trace says a job really needs as written (tier 0): Base for
// weights, optimizer state and CUDA context, Activations on top, for Duration alone
// on a card, keeping Util of the card's compute busy (0: none, so that sharing a card
// costs it nothing).
type Truth struct {
	Base        int64
	Activations int64
	Duration    time.Duration
	Util        float64
}

// At returns the job's peak memory per card and its duration with params, where
// written are the parameters the truth was measured with.
func (t Truth) At(written, params *plans.Map) (peak int64, d time.Duration) {
	act, dur := float64(t.Activations), float64(t.Duration)
	if on(params, plans.KeyCheckpointing) && !on(written, plans.KeyCheckpointing) {
		act *= CheckpointActivations
		dur *= CheckpointSlowdown
	}
	b0, ok0 := number(written, plans.KeyBatch)
	b, ok := number(params, plans.KeyBatch)
	if ok0 && ok && b > 0 && b < b0 {
		act *= b / b0
		dur *= math.Pow(HalvingSlowdown, math.Log2(b0/b))
	}
	if w, ok := number(params, plans.KeyDataWorkers); ok && w == 0 {
		if w0, ok := number(written, plans.KeyDataWorkers); ok && w0 > 0 {
			dur *= NoWorkersSlowdown
		}
	}
	return t.Base + int64(math.Ceil(act)), time.Duration(dur)
}

func on(p *plans.Map, key string) bool {
	v, _ := p.Get(key)
	b, _ := v.(bool)
	return b
}

func number(p *plans.Map, key string) (float64, bool) {
	v, _ := p.Get(key)
	return plans.Number(v)
}
