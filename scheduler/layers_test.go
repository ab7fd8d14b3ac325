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

// hosts are the directories under scheduler/ whose packages run processes (the daemon
// and its API's client, a worker, the runners, Slurm allocations): the only ones that
// may import launcher.
var hosts = []string{"scheduler/daemon", "scheduler/worker", "scheduler/runner", "scheduler/alloc"}

// TestOnlyHostsImportLauncher: the dependency rule by directory. No package under
// scheduler/ outside the hosts reaches launcher through any path, and the daemon's
// clients (its API, gpuq worker, gpuq top) do not link its server.
func TestOnlyHostsImportLauncher(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	const module = "github.com/gpuq/gpuq/"
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Deps \" \"}}",
		module+"scheduler/...", module+"cmd/gpuq/top").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	clients := []string{"scheduler/daemon/api", "scheduler/worker", "cmd/gpuq/top"}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(fields[0], module)
		mayLaunch := !strings.HasPrefix(pkg, "scheduler") ||
			slices.ContainsFunc(hosts, func(h string) bool { return pkg == h || strings.HasPrefix(pkg, h+"/") })
		for _, dep := range fields[1:] {
			switch own := strings.TrimPrefix(dep, module); {
			case own == "launcher" && !mayLaunch:
				t.Errorf("%s imports launcher; under scheduler/, only the hosts (%v) may", pkg, hosts)
			case own == "scheduler/daemon" && slices.Contains(clients, pkg):
				t.Errorf("%s links the daemon's server; a client needs only scheduler/daemon/api", pkg)
			}
		}
	}
}
