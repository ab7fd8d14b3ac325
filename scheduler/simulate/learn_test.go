package simulate

import (
	"fmt"
	"strings"
	"testing"
)

// learningPair is one trace twice: count jobs of one shape, which learn from each
// other, and the same jobs as count entries of their own, each a shape of its own, so
// that nothing measured of one applies to another.
func learningPair(t *testing.T, head, job string, count int) (shared, apart Result) {
	t.Helper()
	one := mustDecode(t, fmt.Sprintf("%s\njobs:\n  - {name: j, %s, count: %d}\n", head, job, count))
	var b strings.Builder
	fmt.Fprintf(&b, "%s\njobs:\n", head)
	for i := range count {
		fmt.Fprintf(&b, "  - {name: j%d, %s}\n", i, job)
	}
	many := mustDecode(t, b.String())
	var err error
	if shared, err = Run(one, GPUQ); err != nil {
		t.Fatal(err)
	}
	if apart, err = Run(many, GPUQ); err != nil {
		t.Fatal(err)
	}
	if shared.Completed != count || apart.Completed != count {
		t.Fatalf("completed %d and %d of %d", shared.Completed, apart.Completed, count)
	}
	return shared, apart
}

// TestLearningShrinksGenerousEstimates: declared estimates 40% above the true peak fit
// two jobs a card; once one job of the shape has been measured, the rest reserve their
// measured peak, three share a card, and the sweep ends sooner.
func TestLearningShrinksGenerousEstimates(t *testing.T) {
	// true peak 2 + 5 = 7 GiB, declared 9.8 GiB; 22.8 GiB of room a card.
	shared, apart := learningPair(t, `gpus: "sim:4x24GiB"
headroom: 5%`, "estimate: 9.8GiB, base: 2GiB, activations: 5GiB, duration: 30m", 40)
	t.Logf("learned: %+v", shared)
	t.Logf("unlearned: %+v", apart)
	if apart.MostPerCard != 2 || shared.MostPerCard != 3 {
		t.Errorf("most jobs on a card: %d learned, %d unlearned; want 3 and 2", shared.MostPerCard, apart.MostPerCard)
	}
	if shared.Makespan >= apart.Makespan {
		t.Errorf("makespan %v learned, not shorter than %v unlearned", shared.Makespan, apart.Makespan)
	}
	if shared.OOMEvents != 0 {
		t.Errorf("%d OOMs after shrinking to the measured peak", shared.OOMEvents)
	}
}

// TestLearningStopsRepeatedOOMs: declared estimates 40% below the true peak put three
// jobs on a card that holds two. The first wave runs out of memory together; after
// that, the shape's proven need keeps every later job of it from running out again.
// Jobs that cannot learn from each other keep crowding cards as they free.
func TestLearningStopsRepeatedOOMs(t *testing.T) {
	// true peak 3 + 7 = 10 GiB, declared 6 GiB: three of them fit 22.8 GiB of room.
	// Memory alone decides (util_target: off): jobs of shapes not measured yet would
	// otherwise share no card with each other, and crowd none out.
	shared, apart := learningPair(t, `gpus: "sim:4x24GiB"
headroom: 5%
util_target: "off"`, "estimate: 6GiB, base: 3GiB, activations: 7GiB, duration: 30m", 40)
	t.Logf("learned: %+v", shared)
	t.Logf("unlearned: %+v", apart)
	const firstWave = 4 // the third job to allocate on each of the 4 cards
	if shared.OOMEvents != firstWave {
		t.Errorf("%d OOMs with learning, want only the first wave's %d", shared.OOMEvents, firstWave)
	}
	if apart.OOMEvents <= shared.OOMEvents {
		t.Errorf("%d OOMs without learning, %d with: want more without", apart.OOMEvents, shared.OOMEvents)
	}
	if shared.Attempts != 40+firstWave {
		t.Errorf("%d attempts with learning, want each job once plus the first wave's retries", shared.Attempts)
	}
}
