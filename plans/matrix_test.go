package plans

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// The example from GitHub's documentation of matrix include.
func TestExpandMatrixGitHubSemantics(t *testing.T) {
	doc, err := Decode([]byte(`
fruit: [apple, pear]
animal: [cat, dog]
include:
  - {color: green}
  - {color: pink, animal: cat}
  - {fruit: apple, shape: circle}
  - {fruit: banana}
  - {fruit: banana, animal: cat}
exclude:
  - {fruit: pear, animal: dog}
`), YAML)
	if err != nil {
		t.Fatal(err)
	}
	c := &checker{file: "m.yaml"}
	var got []string
	for _, p := range expandMatrix(doc, c) {
		var kv []string
		for _, k := range p.vals.Keys {
			kv = append(kv, k+"="+FormatValue(p.vals.Vals[k]))
		}
		got = append(got, strings.Join(kv, ","))
	}
	if err := c.err(); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"fruit=apple,animal=cat,color=pink,shape=circle",
		"fruit=apple,animal=dog,color=green,shape=circle",
		"fruit=pear,animal=cat,color=pink",
		"fruit=banana",
		"fruit=banana,animal=cat",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// The matrix is counted before it is expanded: up to maxJobs combinations, no more.
func TestMatrixSizeCap(t *testing.T) {
	for _, tt := range []struct {
		sizes []int
		ok    bool
	}{
		{[]int{maxJobs}, true},
		{[]int{maxJobs + 1}, false},
		{[]int{1000, 100}, true},
		{[]int{1000, 101}, false},
		{slices.Repeat([]int{2}, 70), false}, // 2^70 overflows int64
	} {
		m, axes := NewMap(), []string{}
		for i, n := range tt.sizes {
			ax := fmt.Sprintf("a%d", i)
			m.Set(ax, make([]any, n))
			axes = append(axes, ax)
		}
		c := &checker{file: "m.yaml"}
		if got := c.matrixSize(m, axes); got != tt.ok || (len(c.errs) == 0) != tt.ok {
			t.Errorf("axes of %v: ok %v (%v), want %v", tt.sizes, got, c.err(), tt.ok)
		}
	}
}
