package main

import (
	"os"
	"path/filepath"
	"regexp"
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

// TestWhyNamesEveryReason: gpuq why --help and the README name every reason the packer
// gives a waiting job (each Reason constant of scheduler/pack), so that a reason added
// there is told here too.
func TestWhyNamesEveryReason(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "..", "scheduler", "pack", "explain.go"))
	if err != nil {
		t.Fatal(err)
	}
	reasons := regexp.MustCompile(`(?m)^\s*\w+ Reason = "([a-z-]+)"`).FindAllStringSubmatch(string(src), -1)
	if len(reasons) < 8 {
		t.Fatalf("found %d reasons in explain.go, want the 8 or more it declares", len(reasons))
	}
	help, _, _ := gpuq(t, "why", "--help")
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range reasons {
		if !strings.Contains(help, r[1]) {
			t.Errorf("gpuq why --help does not name %s", r[1])
		}
		if !strings.Contains(string(readme), "`"+r[1]+"`") {
			t.Errorf("the README does not name %s", r[1])
		}
	}
}
