package state

import (
	"testing"

	"github.com/gpuq/gpuq/plans"
)

// TestAdmitAnywhere: on a cluster a sweep's plan applies by card index on every
// machine, whatever cards come.
func TestAdmitAnywhere(t *testing.T) {
	for _, tt := range []struct {
		doc  string
		want map[int]int // card index: slots
	}{
		{"gpu_plan: \"2\"\nmemory: 1GiB\n", map[int]int{0: 2, 7: 2}},
		{"memory: 1GiB\n", map[int]int{0: plans.NoSlotLimit, 5: plans.NoSlotLimit}},
		{"\n", map[int]int{0: 1, 3: 1}}, // no estimate: one job per card
		{"gpu_plan: \"2,1\"\nmemory: 1GiB\n", map[int]int{0: 2, 1: 1, 2: 0}},
		{"gpus: \"1,3\"\ngpu_plan: \"2,1\"\nmemory: 1GiB\n", map[int]int{0: 0, 1: 2, 3: 1}},
	} {
		sw, err := plans.DecodeSweep("a.yaml", []byte("name: a\ncommand: [train]\njobs: [{}]\n"+tt.doc), plans.Overrides{})
		if err != nil {
			t.Fatal(err)
		}
		l := AdmitAnywhere(sw)
		for idx, want := range tt.want {
			if got := l.On(idx); got != want {
				t.Errorf("%q: card %d takes %d, want %d", tt.doc, idx, got, want)
			}
		}
	}
}
