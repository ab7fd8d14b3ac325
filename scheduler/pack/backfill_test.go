package pack

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestLeastFirst: the k least of a slice come to its front in order, as a sort would
// put them, ties and all, for any k, one longer than the slice included.
func TestLeastFirst(t *testing.T) {
	type card struct{ at, i int }
	order := func(a, b card) int { return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.i, b.i)) }
	r := rand.New(rand.NewPCG(1, 2))
	for _, c := range []struct{ n, k int }{{0, 1}, {1, 1}, {5, 1}, {5, 2}, {5, 5}, {5, 6}, {200, 1}, {200, 8}} {
		s := make([]card, c.n)
		for i := range s {
			s[i] = card{at: r.IntN(4), i: i} // many ties of at
		}
		r.Shuffle(len(s), func(i, j int) { s[i], s[j] = s[j], s[i] })
		sorted := slices.SortedFunc(slices.Values(s), order)
		leastFirst(s, c.k, order)
		if k := min(c.k, c.n); !slices.Equal(s[:k], sorted[:k]) {
			t.Errorf("%d of %d: front %v, want %v", c.k, c.n, s[:k], sorted[:k])
		}
		if slices.SortFunc(s, order); !slices.Equal(s, sorted) {
			t.Errorf("%d of %d: lost or duplicated elements", c.k, c.n)
		}
	}
}
