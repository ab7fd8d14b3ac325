package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSystemdUnit: the systemd user unit the repo ships runs gpuq daemon in the
// foreground and stops the daemon alone (its trainers run on, as for gpuq daemon
// --stop); systemd reads it without a word where systemd-analyze is found; and the
// README says how to use it.
func TestSystemdUnit(t *testing.T) {
	const path = "../../examples/systemd/gpuq.service"
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	unit := string(data)
	for _, want := range []string{"\nExecStart=%h/.local/bin/gpuq daemon\n", "\nKillMode=process\n", "\nRestart=on-failure\n", "\nWantedBy=default.target\n"} {
		if !strings.Contains(unit, want) {
			t.Errorf("%s lacks %q", path, strings.TrimSpace(want))
		}
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"examples/systemd/gpuq.service", "systemctl --user enable --now gpuq", "loginctl enable-linger"} {
		if !strings.Contains(string(readme), want) {
			t.Errorf("the README does not say %q", want)
		}
	}
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("no systemd-analyze to read the unit")
	}
	// Its command must exist for systemd to accept it: the test's own binary.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	copied := filepath.Join(t.TempDir(), "gpuq.service")
	if err := os.WriteFile(copied, []byte(strings.ReplaceAll(unit, "%h/.local/bin/gpuq", self)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", copied).CombinedOutput()
	if err != nil || len(out) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}
