package daemon

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/schedtest"
)

// TestCleanGivesMemoryBack: once a clean has forgotten many jobs, the daemon holds
// the memory they took no longer: it is returned to the system, not kept for minutes
// (after a clean left no job, a daemon kept 777 MiB).
func TestCleanGivesMemoryBack(t *testing.T) {
	d, _ := testAPI(t)
	c := clientOf(t, d)
	const n = 10_000
	seeds := make([]string, n)
	for i := range seeds {
		seeds[i] = fmt.Sprint(i + 1)
	}
	sweep := "name: m\ncommand: [train]\nmemory: 10GiB\nmatrix: {seed: [" + strings.Join(seeds, ", ") + "]}\n"
	if _, err := c.Submit(api.SubmitRequest{File: "/s/m.yaml", Source: sweep}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Act(api.Cancel, api.SelectRequest{Sweep: "m"}); err != nil {
		t.Fatal(err)
	}
	schedtest.WaitFor(t, "every job to end", func() bool { return len(d.store.View().Running()) == 0 })
	d.background.Wait() // the cancel's giving back: an answer is whole once its handler has returned
	held := func() uint64 {
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapInuse + m.HeapIdle - m.HeapReleased
	}
	before := held()
	if _, err := c.Clean(api.CleanRequest{Sweep: "m"}); err != nil {
		t.Fatal(err)
	}
	d.background.Wait()
	after := held()
	if after+uint64(n)*512 > before {
		t.Errorf("the daemon holds %d MiB after a clean of %d jobs, %d MiB before", after>>20, n, before>>20)
	}
}
