package plans

import (
	"fmt"
	"testing"
)

func TestCount(t *testing.T) {
	for _, tt := range []struct {
		n          int
		noun, want string
	}{{1, "job", "1 job"}, {0, "job", "0 jobs"}, {2, "card", "2 cards"}, {1, "entry", "1 entry"}, {3, "entry", "3 entries"}} {
		if got := Count(tt.n, tt.noun); got != tt.want {
			t.Errorf("Count(%d, %q) = %q, want %q", tt.n, tt.noun, got, tt.want)
		}
	}
}

// TestSuggest: "did you mean" offers a name only where the word given is a likely slip
// of it: a letter wrong, put in or left out, two swapped, or the name cut short; not a
// name that shares a letter or two with it, as boom does nope.
func TestSuggest(t *testing.T) {
	sweeps := []string{"boom", "quickstart", "gla-e1", "glue-sst2-lr-sweep"}
	for _, tt := range []struct {
		word  string
		known []string
		want  string
	}{
		{"nope", sweeps, ""},
		{"nop", sweeps, ""},
		{"bomb", sweeps, ""},
		{"x", []string{"y"}, ""},
		{"qucikstart", sweeps, "quickstart"}, // a swap
		{"quickstrt", sweeps, "quickstart"},  // a letter left out
		{"quickstarts", sweeps, "quickstart"},
		{"gla-1e", sweeps, "gla-e1"},
		{"boon", sweeps, "boom"},
		{"Boom", sweeps, "boom"},
		{"quick", sweeps, "quickstart"}, // cut short, to half the name
		{"glue", sweeps, ""},            // a beginning too short to tell it
		{"qu", sweeps, ""},
		{"aa", []string{"a", "b"}, "a"},
		{"taks", []string{"task", "seed"}, "task"},
		{"sede", []string{"task", "seed"}, "seed"},
		{"memroy", []string{"memory", "gpus"}, "memory"},
		{"qwen3-4", []string{"qwen3-4b", "qwen3-8b"}, "qwen3-4b"},
		{"seed", []string{"seed"}, ""}, // itself is what was given
	} {
		want := ""
		if tt.want != "" {
			want = fmt.Sprintf(" (did you mean %q?)", tt.want)
		}
		if got := Suggest(tt.word, tt.known); got != want {
			t.Errorf("Suggest(%q, %v) = %q, want %q", tt.word, tt.known, got, want)
		}
	}
}
