package scheduler

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestLayers: the packer, the state and the card types take nothing of gpuq but plans,
// and the engine over them nothing but those: no launcher, no NVML, no package that
// needs cgo, so that they build with CGO_ENABLED=0 on any machine.
func TestLayers(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	const module = "github.com/gpuq/gpuq/"
	for _, tt := range []struct {
		pkg  string
		gpuq []string // what it may import of gpuq, through any path
	}{
		{"scheduler/pack", []string{"plans"}},
		{"scheduler/state", []string{"plans"}},
		{"scheduler/gpu", []string{"plans"}},
		{"scheduler", []string{"plans", "scheduler/gpu", "scheduler/pack", "scheduler/state"}},
	} {
		out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}} {{.Standard}} {{len .CgoFiles}}", module+tt.pkg).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", tt.pkg, err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			fields := strings.Fields(line)
			path, std, cgo := fields[0], fields[1], fields[2]
			switch own, ok := strings.CutPrefix(path, module); {
			case std == "true":
			case ok && own != tt.pkg && !slices.Contains(tt.gpuq, own):
				t.Errorf("%s imports %s; of gpuq it may import %v", tt.pkg, own, tt.gpuq)
			case cgo != "0":
				t.Errorf("%s imports %s, which needs cgo", tt.pkg, path)
			}
		}
	}
}
