package daemon

import (
	"slices"
	"testing"
	"time"

	"github.com/gpuq/gpuq/launcher"
	"github.com/gpuq/gpuq/scheduler/state"
)

// TestWorkerCommandRunsGpuq: an allocation's nodes run gpuq worker, gpuq's own binary,
// even where the attempts' supervisors are gpuq-supervisor, which knows no worker verb.
func TestWorkerCommandRunsGpuq(t *testing.T) {
	cases := []struct {
		name       string
		supervisor []string
	}{
		{"gpuq its own supervisor", []string{"/opt/gpuq/bin/gpuq"}},
		{"gpuq-supervisor beside it", []string{"/opt/gpuq/bin/" + launcher.SupervisorBinary}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := &daemon{cfg: Config{StateDir: "/srv/gpuq", Self: "/opt/gpuq/bin/gpuq", Supervisor: c.supervisor}, listen: "10.0.0.1:7070"}
			argv, err := d.workerCommand(&state.AllocQueue{IdleTimeout: 10 * time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			if len(argv) < 2 || argv[0] != "/opt/gpuq/bin/gpuq" || argv[1] != "worker" {
				t.Errorf("an allocation's nodes run %q; want /opt/gpuq/bin/gpuq worker ...", argv)
			}
			if !slices.Contains(argv, "10.0.0.1:7070") {
				t.Errorf("the worker is not told the daemon's address: %q", argv)
			}
		})
	}
}
