package main

import (
	"fmt"
	"strings"
	"testing"
)

// TestWords: text breaks at spaces, and a word too long for a line after a comma.
func TestWords(t *testing.T) {
	for _, tt := range []struct {
		text  string
		width int
		want  []string
	}{
		{"a bb ccc dddd", 8, []string{"a bb ccc", "dddd"}},
		{"q_proj,k_proj,v_proj,o_proj or all", 15, []string{"q_proj,k_proj,", "v_proj,o_proj", "or all"}},
		{"abcdefghijklmnopqrstuvwxyz", 10, []string{"abcdefghij", "klmnopqrst", "uvwxyz"}},
	} {
		if got := words(tt.text, tt.width); strings.Join(got, "|") != strings.Join(tt.want, "|") {
			t.Errorf("words(%q, %d) = %q, want %q", tt.text, tt.width, got, tt.want)
		}
	}
}

// TestFirstOf: a message names at most ten jobs and says how many more there are.
func TestFirstOf(t *testing.T) {
	var ids []string
	for i := range 12 {
		ids = append(ids, fmt.Sprintf("s.%d", i+1))
	}
	for _, tc := range []struct {
		n    int
		want string
	}{
		{0, ""},
		{2, "s.1 s.2"},
		{10, "s.1 s.2 s.3 s.4 s.5 s.6 s.7 s.8 s.9 s.10"},
		{12, "s.1 s.2 s.3 s.4 s.5 s.6 s.7 s.8 s.9 s.10 ... and 2 more"},
	} {
		if got := firstOf(ids[:tc.n], " "); got != tc.want {
			t.Errorf("firstOf(%d ids) = %q, want %q", tc.n, got, tc.want)
		}
	}
}
