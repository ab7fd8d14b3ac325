package daemon

import (
	"io"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/gpuq/gpuq/launcher"
	"github.com/gpuq/gpuq/scheduler"
	"github.com/gpuq/gpuq/scheduler/alloc"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
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

// TestAllocListCountsTheWorkersConnectedNow: gpuq alloc list counts an allocation's
// workers that are connected now, beside the most it had: one that has left (away,
// then forgotten past its grace) is not counted. (It was: the list kept the most.)
func TestAllocListCountsTheWorkersConnectedNow(t *testing.T) {
	f, err := newFence(20*time.Second, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c, clock := testCluster(t, f)
	d := &daemon{cluster: c, alloc: alloc.New(alloc.Config{Clock: scheduler.RealClock{}})}
	daemonEnd, workerEnd := net.Pipe()
	go io.Copy(io.Discard, workerEnd) // the worker reads what it is sent
	t.Cleanup(func() { workerEnd.Close() })
	l, err := c.connect(api.Hello{Name: "node7-101", Instance: "i1", Allocation: "101"}, daemonEnd)
	if err != nil {
		t.Fatal(err)
	}
	q := &state.AllocQueue{ID: 1}
	allocs := []*state.Allocation{{ID: "101", Queue: 1, State: state.AllocRunning, Workers: 1}}
	connected := func() (int, int) {
		a := d.allocQueue(q, allocs).Allocations[0]
		return a.Connected, a.Workers
	}
	if now, most := connected(); now != 1 || most != 1 {
		t.Errorf("a worker linked: %d connected of the most %d, want 1 of 1", now, most)
	}
	c.away("node7-101", l, io.EOF)
	if now, most := connected(); now != 0 || most != 1 {
		t.Errorf("its worker away: %d connected of the most %d, want 0 of 1", now, most)
	}
	clock.add(f.grace + time.Second)
	c.tick()
	if _, kept := c.workers["node7-101"]; kept {
		t.Fatal("the worker is not forgotten past its grace")
	}
	if now, most := connected(); now != 0 || most != 1 {
		t.Errorf("its worker forgotten: %d connected of the most %d, want 0 of 1", now, most)
	}
}

// TestAllocListSaysWhenAnAllocationEnds: the list on the wire carries when Slurm ends
// each running allocation, from which gpuq alloc list says the time it has left, and
// none for one that waits.
func TestAllocListSaysWhenAnAllocationEnds(t *testing.T) {
	d := &daemon{alloc: alloc.New(alloc.Config{Clock: scheduler.RealClock{}})}
	end := time.Date(2026, 3, 1, 17, 0, 0, 0, time.UTC)
	allocs := []*state.Allocation{{ID: "101", Queue: 1, State: state.AllocRunning, Ends: end}, {ID: "102", Queue: 1, State: state.AllocQueued}}
	got := d.allocQueue(&state.AllocQueue{ID: 1}, allocs).Allocations
	if got[0].Ends == nil || !got[0].Ends.Equal(end) || got[1].Ends != nil {
		t.Errorf("ends: running %v, waiting %v; want %v and none", got[0].Ends, got[1].Ends, end)
	}
}
