package plans

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
)

// TestValueKeyIsSortedJSON: a value's key is its JSON with the keys of every mapping
// sorted, byte for byte as encoding/json writes it of Go maps (shape names are made of
// it and journaled, so it must not change), whatever the values: numbers, strings to
// escape, lists, nested mappings.
func TestValueKeyIsSortedJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		v := randomValue(r, 3)
		want, err := json.Marshal(unordered(v))
		if err != nil {
			t.Fatal(err)
		}
		if got := valueKey(v); got != string(want) {
			t.Fatalf("value %d: key %s, want %s", i, got, want)
		}
	}
}

// TestShapeOfLeavesTheIgnoredOut: a shape's name is its sweep's, a NUL, and the key of
// its parameters less those the sweep ignores, as a mapping of them alone has.
func TestShapeOfLeavesTheIgnoredOut(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 500 {
		params := NewMap()
		for range r.IntN(6) {
			params.Set(keyWords[r.IntN(len(keyWords))], randomValue(r, 2))
		}
		s := &Sweep{Name: "s", ShapeIgnores: []string{keyWords[r.IntN(len(keyWords))], "seed"}}
		kept := NewMap()
		for _, k := range params.Keys {
			if k != s.ShapeIgnores[0] && k != "seed" {
				kept.Set(k, params.Vals[k])
			}
		}
		if got, want := s.ShapeOf(params), "s\x00"+valueKey(kept); got != want {
			t.Fatalf("shape %q, want %q", got, want)
		}
	}
}

var keyWords = []string{"seed", "lr", "task", "a<b>", "x&y", "é", "\x00", "lr.warmup", "Z", "10", "9"}

func randomValue(r *rand.Rand, depth int) any {
	switch n := r.IntN(11); {
	case n == 0 && depth > 0:
		m := NewMap()
		for range r.IntN(5) {
			m.Set(keyWords[r.IntN(len(keyWords))], randomValue(r, depth-1))
		}
		return m
	case n == 1 && depth > 0:
		var l []any
		for range r.IntN(4) {
			l = append(l, randomValue(r, depth-1))
		}
		return l
	case n == 2:
		return r.Int64N(1<<40) - 1<<39
	case n == 3:
		return int(r.IntN(1000))
	case n == 4:
		return []float64{0.001, 1e-4, 3e21, 1e21, 2.5, -0.0, 1e-7, 100}[r.IntN(8)]
	case n == 5:
		return r.IntN(2) == 0
	case n == 6:
		return nil
	case n == 7:
		return (*Map)(nil)
	}
	return keyWords[r.IntN(len(keyWords))] + "\"\\\n\u2028"[:r.IntN(5)]
}

// unordered turns every Map within v into a Go map, whose JSON has its keys sorted:
// what a value's key was made of.
func unordered(v any) any {
	switch t := v.(type) {
	case *Map:
		if t == nil {
			return nil
		}
		m := make(map[string]any, len(t.Keys))
		for _, k := range t.Keys {
			m[k] = unordered(t.Vals[k])
		}
		return m
	case []any:
		c := make([]any, len(t))
		for i := range t {
			c[i] = unordered(t[i])
		}
		return c
	}
	return v
}
