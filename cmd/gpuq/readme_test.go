package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeTellsTheTruth: every verb is in the README's table of commands, and every
// file the README links to exists.
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
	for _, m := range regexp.MustCompile(`\]\(([^)#:]+)(#[^)]*)?\)`).FindAllStringSubmatch(readme, -1) {
		if _, err := os.Stat(filepath.Join("../..", m[1])); err != nil {
			t.Errorf("the README links to %s: %v", m[1], err)
		}
	}
}

// TestMakeInstall: make install puts a gpuq that runs under PREFIX/bin.
func TestMakeInstall(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	prefix := t.TempDir()
	if out, err := exec.Command("make", "-C", "../..", "install", "PREFIX="+prefix).CombinedOutput(); err != nil {
		t.Fatalf("make install: %v\n%s", err, out)
	}
	out, err := exec.Command(filepath.Join(prefix, "bin", "gpuq"), "--version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "gpuq version") {
		t.Errorf("the installed gpuq: %v, %s", err, out)
	}
}
