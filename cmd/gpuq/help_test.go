package main

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestHelpFits80Columns: every command's help, piped, fits 80 columns: prose filled
// again, flags and commands wrapped under their descriptions, examples continued after
// a backslash.
func TestHelpFits80Columns(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		args := append(strings.Fields(strings.TrimPrefix(c.CommandPath(), "gpuq")), "--help")
		out, errOut, code := gpuq(t, args...)
		if code != exitOK {
			t.Fatalf("%v: exit %d: %s", args, code, errOut)
		}
		fitsWidth(t, out, 80)
	}
	walk(newRootCmd(ioStreams{}))
}

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
