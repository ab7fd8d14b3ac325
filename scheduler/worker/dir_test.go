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
