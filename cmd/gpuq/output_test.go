package main

import (
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
