package main

import (
	"debug/buildinfo"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gpuq/gpuq/launcher"
)

// TestReadmeTellsTheTruth: every verb is in the README's table of commands, every
// column of gpuq status in its words on --format, and every file the README links to
// exists.
func TestReadmeTellsTheTruth(t *testing.T) {
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(data)
	for _, c := range newRootCmd(ioStreams{}).Commands() {
		if c.Hidden || c.Name() == "help" {
			continue
		}
		if !strings.Contains(readme, "| `gpuq "+c.Name()) && !strings.Contains(readme, "\\|"+c.Name()) && !strings.Contains(readme, "/ `gpuq "+c.Name()) {
			t.Errorf("gpuq %s is not in the README's table of commands", c.Name())
		}
	}
	// gpuq status's columns, and those it shows without --format.
	for _, c := range statusColumns {
		if !strings.Contains(readme, "`"+c.name+"`") {
			t.Errorf("gpuq status's column %s is not in the README", c.name)
		}
	}
	if !strings.Contains(readme, "`"+defaultFormat+"`") {
		t.Errorf("the README does not say gpuq status's columns without --format are %s", defaultFormat)
	}
	for _, m := range regexp.MustCompile(`\]\(([^)#:]+)(#[^)]*)?\)`).FindAllStringSubmatch(readme, -1) {
		if _, err := os.Stat(filepath.Join("../..", m[1])); err != nil {
			t.Errorf("the README links to %s: %v", m[1], err)
		}
	}
}

// TestMakeInstall: make install puts a gpuq that runs under PREFIX/bin, and beside it
// the gpuq-supervisor of the same build, which that gpuq starts its supervisors with.
func TestMakeInstall(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	prefix := t.TempDir()
	if out, err := exec.Command("make", "-C", "../..", "install", "PREFIX="+prefix).CombinedOutput(); err != nil {
		t.Fatalf("make install: %v\n%s", err, out)
	}
	gpuq := filepath.Join(prefix, "bin", "gpuq")
	out, err := exec.Command(gpuq, "--version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "gpuq version") {
		t.Errorf("the installed gpuq: %v, %s", err, out)
	}
	info, err := buildinfo.ReadFile(gpuq)
	if err != nil {
		t.Fatal(err)
	}
	var stamp string
	for _, s := range info.Settings {
		if s.Key == "-ldflags" {
			for _, f := range strings.Fields(s.Value) {
				if v, ok := strings.CutPrefix(f, "main.build="); ok {
					stamp = v
				}
			}
		}
	}
	helper := filepath.Join(prefix, "bin", launcher.SupervisorBinary)
	if got := launcher.SupervisorCommand(gpuq, stamp); stamp == "" || len(got) != 1 || got[0] != helper {
		t.Errorf("the installed gpuq (stamp %q) starts its supervisors with %q, not %s", stamp, got, helper)
	}
}
