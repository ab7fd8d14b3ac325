package main

import (
	"slices"
	"testing"

	"github.com/gpuq/gpuq/plans"
)

// TestSubmitOrder: sweeps given together are submitted each after those it waits for,
// else as given; a cycle is left as given, for the daemon to refuse.
func TestSubmitOrder(t *testing.T) {
	sweep := func(doc string) *plans.Sweep {
		s, err := plans.DecodeSweep("s.yaml", []byte(doc), plans.Overrides{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	post := sweep("name: post\ncommand: [train]\nafter: [pre]\njobs: [{}]\n")
	eval := sweep("name: eval\ncommand: [train]\njobs: [{after: [post.1]}]\n")
	pre := sweep("name: pre\ncommand: [train]\njobs: [{}]\n")
	other := sweep("name: prep\ncommand: [train]\njobs: [{}]\n")
	for _, tt := range []struct {
		sweeps []*plans.Sweep
		want   []int
	}{
		{[]*plans.Sweep{post, pre}, []int{1, 0}},
		{[]*plans.Sweep{eval, post, other, pre}, []int{2, 3, 1, 0}},
		{[]*plans.Sweep{pre, post, eval}, []int{0, 1, 2}},
	} {
		if got := submitOrder(tt.sweeps); !slices.Equal(got, tt.want) {
			t.Errorf("order %v, want %v", got, tt.want)
		}
	}
	a := sweep("name: a\ncommand: [train]\nafter: [b]\njobs: [{}]\n")
	b := sweep("name: b\ncommand: [train]\nafter: [a]\njobs: [{}]\n")
	if got := submitOrder([]*plans.Sweep{a, b}); !slices.Equal(got, []int{0, 1}) {
		t.Errorf("a cycle: %v, want as given", got)
	}
}
