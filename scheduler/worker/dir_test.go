package worker

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuq/gpuq/plans"
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
