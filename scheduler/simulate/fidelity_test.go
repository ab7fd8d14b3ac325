package simulate

import (
	"os"
	"path/filepath"
	"testing"
)

// TestSpeedFitsLucidPairs: processor sharing predicts each job's speed in Lucid's 1,388
// measured pairs with a mean absolute error of 0.08 (the figure); a cost of 5%
// a neighbour, as traces use, costs the fit little.
func TestSpeedFitsLucidPairs(t *testing.T) {
	for _, c := range []struct {
		cost, most float64
	}{{0, 0.085}, {0.05, 0.10}} {
		f, err := os.Open(filepath.Join("testdata", filepath.Base(PairsFile)))
		if err != nil {
			t.Fatal(err)
		}
		mae, n, err := PairsError(f, c.cost)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("cost %.2f: mean absolute error %.3f over %d jobs", c.cost, mae, n)
		if n != 2*1388 || mae > c.most {
			t.Errorf("cost %.2f: error %.3f over %d jobs, want at most %.3f over %d", c.cost, mae, n, c.most, 2*1388)
		}
	}
}
