package launcher

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeMPS writes a nvidia-cuda-mps-control that records how it was called, with its
// environment's MPS directories, into calls; exit, if not 0, is how it fails.
func fakeMPS(t *testing.T, exit string) (bin, calls string) {
	t.Helper()
	bin = t.TempDir()
	calls = filepath.Join(t.TempDir(), "calls")
	script := "#!/bin/sh\nin=$(cat 2>/dev/null)\necho \"$* [$in] pipe=$CUDA_MPS_PIPE_DIRECTORY log=$CUDA_MPS_LOG_DIRECTORY\" >> " + calls + "\n"
	if exit != "" {
		script += "echo 'An instance of this daemon is already running' >&2\nexit " + exit + "\n"
	}
	if err := os.WriteFile(filepath.Join(bin, MPSControl), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, calls
}

// TestMPSStartsAndStops: gpuq starts the control daemon with its own directories,
// gives trainers the environment that reaches it, and asks it to quit.
func TestMPSStartsAndStops(t *testing.T) {
	bin, calls := fakeMPS(t, "")
	dir := t.TempDir()
	m, err := StartMPS(dir, "/nonexistent:"+bin)
	if err != nil {
		t.Fatal(err)
	}
	env := strings.Join(m.Env(), " ")
	if env != "CUDA_MPS_PIPE_DIRECTORY="+filepath.Join(dir, "mps-pipe")+" CUDA_MPS_LOG_DIRECTORY="+filepath.Join(dir, "mps-log") {
		t.Errorf("env %s", env)
	}
	if fi, err := os.Stat(filepath.Join(dir, "mps-pipe")); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("pipe directory: %v %v", fi, err)
	}
	if err := m.Stop(); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(calls)
	want := "-d [] pipe=" + filepath.Join(dir, "mps-pipe") + " log=" + filepath.Join(dir, "mps-log") + "\n" +
		" [quit] pipe=" + filepath.Join(dir, "mps-pipe") + " log=" + filepath.Join(dir, "mps-log") + "\n"
	if string(data) != want {
		t.Errorf("calls:\n%s\nwant\n%s", data, want)
	}
}

// TestNoMPSSaysWhat: without the control program, or where it fails, the error says so
// and what to do.
func TestNoMPSSaysWhat(t *testing.T) {
	_, err := StartMPS(t.TempDir(), t.TempDir())
	if !errors.Is(err, ErrNoMPS) || !strings.Contains(err.Error(), "nvidia-cuda-mps-control is not on the PATH") ||
		!strings.Contains(err.Error(), "remove sharing: mps") {
		t.Errorf("without it: %v", err)
	}
	bin, _ := fakeMPS(t, "1")
	_, err = StartMPS(t.TempDir(), bin)
	if !errors.Is(err, ErrNoMPS) || !strings.Contains(err.Error(), "already running") {
		t.Errorf("failing: %v", err)
	}
}
