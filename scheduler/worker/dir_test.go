package worker

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/gpu/nvidia"
)

// TestAWorkerKeepsToItsDirectorysRealPath: a worker directory reached through a link
// is used by its real path from the start (its attempts, its lease, what its Hello
// tells the daemon), so that pointing the link elsewhere later changes nothing.
func TestAWorkerKeepsToItsDirectorysRealPath(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	real := filepath.Join(base, "home")
	if err := os.Mkdir(real, 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(base, "link")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	w, err := open(Config{Name: "w1", Dir: filepath.Join(link, "workers", "w1"), GPUs: plans.Override{Value: "sim:1x24GiB", Source: "test"},
		Inventory: nvidia.Options{Ledger: filepath.Join(t.TempDir(), "ledger")}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	want := filepath.Join(real, "workers", "w1")
	for what, path := range map[string]string{"directory": w.cfg.Dir, "attempts": w.attempts, "lease": w.lease.path, "hello": w.helloMessage().Dir} {
		if !strings.HasPrefix(path, want+string(filepath.Separator)) && path != want {
			t.Errorf("its %s is %s, want it under %s", what, path, want)
		}
	}
}

// TestAWorkerSaysItsProtocol: a worker's Hello says which protocol of the link it
// speaks, and its gpuq, for the daemon to refuse it where the two would misread each
// other.
func TestAWorkerSaysItsProtocol(t *testing.T) {
	w, err := open(Config{Name: "w1", Dir: filepath.Join(t.TempDir(), "workers", "w1"), GPUs: plans.Override{Value: "sim:1x24GiB", Source: "test"},
		Inventory: nvidia.Options{Ledger: filepath.Join(t.TempDir(), "ledger")}, Version: "v0.4.0"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	if h := w.helloMessage(); h.Protocol != api.WorkerProtocol || h.Version != "v0.4.0" {
		t.Errorf("hello says protocol %d, gpuq %q; want %d, v0.4.0", h.Protocol, h.Version, api.WorkerProtocol)
	}
}

// TestAWorkerKeepsWhatItDidNotMake: of a worker that leaves, only the directory it made
// and never linked from goes; one it found, one it linked from, and any file in it not
// its own stay.
func TestAWorkerKeepsWhatItDidNotMake(t *testing.T) {
	// leave opens a worker on dir, does meanwhile what it is given, and leaves.
	leave := func(t *testing.T, dir string, linked bool, meanwhile ...func()) {
		t.Helper()
		w, err := open(Config{Name: "w1", Dir: dir, GPUs: plans.Override{Value: "sim:1x24GiB", Source: "test"},
			Inventory: nvidia.Options{Ledger: filepath.Join(t.TempDir(), "ledger")}})
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range meanwhile {
			f()
		}
		w.everLinked = linked
		w.forgetDir()
		w.close()
	}
	base := t.TempDir()
	dir := filepath.Join(base, "found")
	leave(t, dir, false) // made, then gone
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("a worker's own unused directory stays: %v", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "instance"), []byte("earlier\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	leave(t, dir, false)
	if id, err := os.ReadFile(filepath.Join(dir, "instance")); err != nil || string(id) != "earlier\n" {
		t.Errorf("the directory of an earlier worker of the name: instance %q, %v", id, err)
	}
	linked := filepath.Join(base, "linked")
	leave(t, linked, true)
	if _, err := os.Stat(filepath.Join(linked, "instance")); err != nil {
		t.Errorf("the directory of a worker that linked: %v", err)
	}
	// One it made, in which a file not its own was put while it ran: the file stays,
	// and the directory with it; the worker's own files go.
	other := filepath.Join(base, "other")
	leave(t, other, false, func() {
		if err := os.MkdirAll(filepath.Join(other, "attempts"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(other, "attempts", "a.1.log"), []byte("kept"), 0o600); err != nil {
			t.Fatal(err)
		}
	})
	if b, err := os.ReadFile(filepath.Join(other, "attempts", "a.1.log")); err != nil || string(b) != "kept" {
		t.Errorf("a file not the worker's own: %q, %v", b, err)
	}
	for _, own := range []string{"instance", "worker.lock"} {
		if _, err := os.Stat(filepath.Join(other, own)); !os.IsNotExist(err) {
			t.Errorf("the worker's own %s stays: %v", own, err)
		}
	}
}

// TestARefusedWorkerLeavesNoDirectory: a worker refused as it starts, for its cards or
// its plan, leaves no directory behind, whether it had made one or not.
func TestARefusedWorkerLeavesNoDirectory(t *testing.T) {
	for _, tc := range []struct{ gpus, plan string }{
		{"bogus", ""},          // refused before its directory is made
		{"sim:1x24GiB", "1,1"}, // after: a plan for two cards on one
	} {
		dir := filepath.Join(t.TempDir(), "workers", "w1")
		_, err := open(Config{Name: "w1", Dir: dir, GPUs: plans.Override{Value: tc.gpus, Source: "test"}, Plan: plans.Override{Value: tc.plan, Source: "test"},
			Inventory: nvidia.Options{Ledger: filepath.Join(t.TempDir(), "ledger")}})
		if err == nil {
			t.Fatalf("--gpus %s --gpu-plan %q: no refusal", tc.gpus, tc.plan)
		}
		if _, serr := os.Stat(dir); !os.IsNotExist(serr) {
			t.Errorf("--gpus %s --gpu-plan %q (%v): its directory stays: %v", tc.gpus, tc.plan, err, serr)
		}
	}
}
