package simulate

import (
	"math"
	"testing"
	"time"

	"github.com/gpuq/gpuq/plans"
)

const gib = int64(1) << 30

func params(batch, accum int64, gc bool, workers int64) *plans.Map {
	m := plans.NewMap()
	m.Set(plans.KeyBatch, batch)
	m.Set(plans.KeyAccumulation, accum)
	m.Set(plans.KeyCheckpointing, gc)
	m.Set(plans.KeyDataWorkers, workers)
	return m
}

func TestTruthAt(t *testing.T) {
	truth := Truth{Base: 4 * gib, Activations: 8 * gib, Duration: 100 * time.Minute}
	written := params(32, 1, false, 4)
	for _, c := range []struct {
		name   string
		params *plans.Map
		peak   int64
		d      time.Duration
	}{
		{"as written", written, 12 * gib, 100 * time.Minute},
		{"checkpointing", params(32, 1, true, 4), 4*gib + ceil(0.35*float64(8*gib)), 108 * time.Minute},
		{"batch halved", params(16, 2, false, 4), 8 * gib, 115 * time.Minute},
		{"batch quartered", params(8, 4, false, 4), 6 * gib, time.Duration(100 * 1.15 * 1.15 * float64(time.Minute))},
		{"no data workers", params(32, 1, false, 0), 12 * gib, 120 * time.Minute},
		{"all of them", params(16, 2, true, 0), 4*gib + ceil(0.35*float64(4*gib)), time.Duration(100 * 1.08 * 1.15 * 1.2 * float64(time.Minute))},
	} {
		peak, d := truth.At(written, c.params)
		if peak != c.peak || (d-c.d).Abs() > time.Millisecond {
			t.Errorf("%s: At = %d, %v; want %d, %v", c.name, peak, d, c.peak, c.d)
		}
	}
	// A job written with checkpointing on gains nothing from the rung that sets it.
	on := params(32, 1, true, 4)
	if peak, d := truth.At(on, on); peak != 12*gib || d != 100*time.Minute {
		t.Errorf("as written with checkpointing: %d, %v", peak, d)
	}
}

func ceil(x float64) int64 { return int64(math.Ceil(x)) }
