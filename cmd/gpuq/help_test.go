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
