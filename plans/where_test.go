package plans

import (
	"strings"
	"testing"
)

// TestWhere: conditions are ANDed, a value's alternatives ORed; numbers match by value,
// text exactly; a malformed selection and an unknown key are errors that say what to
// write.
func TestWhere(t *testing.T) {
	params := NewMap()
	params.Set("task", "glue-sst2")
	params.Set("seed", int64(87))
	params.Set("lr", Float{Value: 0.0001, Text: "1e-4"})
	params.Set("ckpt", true)
	for _, tc := range []struct {
		where string
		match bool
	}{
		{"", true},
		{"task=glue-sst2", true},
		{"task=glue-sst2,seed=87", true},
		{"task=glue-sst2,seed=88", false},
		{"seed=88|87", true},
		{"task=sst2", false},
		{"lr=1e-4", true},
		{"lr=0.0001", true},
		{"seed=87.0", true},
		{"ckpt=true", true},
		{"missing=1", false},
	} {
		w, err := ParseWhere(tc.where)
		if err != nil {
			t.Fatalf("%q: %v", tc.where, err)
		}
		if got := w.Matches(params); got != tc.match {
			t.Errorf("%q matches %v, want %v", tc.where, got, tc.match)
		}
		if w.String() != tc.where {
			t.Errorf("%q written back as %q", tc.where, w.String())
		}
	}
	if _, err := ParseWhere("task=sst2,87"); err == nil || !strings.Contains(err.Error(), `"87" is not key=value`) {
		t.Errorf("a condition without =: %v", err)
	}
	w, _ := ParseWhere("sed=87")
	if err := w.Unknown(params.Keys); err == nil || err.Error() != `no job has a parameter "sed" (did you mean "seed"?)` {
		t.Errorf("an unknown key: %v", err)
	}
	other := NewMap()
	other.Set("task", "glue-rte")
	other.Set("seed", int64(88))
	jobs := []*Map{params, other}
	for _, tc := range []struct{ where, err string }{
		{"task=glue-rte", ""},
		{"seed=87.0|89", ""},
		{"task=glue-qnli", "no job has task=glue-qnli (its task: glue-rte, glue-sst2)"},
		{"task=glue-rte,seed=87", "no job has task=glue-rte,seed=87 together"},
	} {
		w, _ := ParseWhere(tc.where)
		if err := w.Unmet(jobs); tc.err == "" && err != nil || tc.err != "" && (err == nil || err.Error() != tc.err) {
			t.Errorf("%q: %v, want %q", tc.where, err, tc.err)
		}
	}
}
