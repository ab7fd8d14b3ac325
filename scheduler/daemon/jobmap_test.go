package daemon

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/schedtest"
)

// TestJobMap: dcgm-exporter's mapping names each card's running jobs, follows them as
// they end and start, leaves an idle card without a file (dcgm-exporter would drop its
// metrics), and leaves alone files that are not a card's.
func TestJobMap(t *testing.T) {
	d, r, _ := testDaemon(t)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "1"), []byte("stale-job\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "notes"), []byte("mine\n"), 0o644)
	jm, err := newJobMap(dir, []int{0, 1})
	if err != nil {
		t.Fatal(err)
	}
	c := clientOf(t, d)
	// The engine's loop calls mapJobs; it is given the map in it.
	d.eng.Do(t.Context(), func(context.Context) error { d.jobMap = jm; d.mapJobs(); return nil })
	files := func() map[string]string {
		out := map[string]string{}
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			b, _ := os.ReadFile(filepath.Join(dir, e.Name()))
			out[e.Name()] = string(b)
		}
		return out
	}
	if got := files(); len(got) != 1 || got["notes"] != "mine\n" {
		t.Errorf("idle cards: %q", got)
	}
	if _, err := c.Submit(api.SubmitRequest{File: "/s/j.yaml", Source: "name: j\ncommand: [train]\nmatrix: {seed: [1, 2, 3]}\nmemory: 10GiB\ngpu_plan: \"1\"\n"}); err != nil {
		t.Fatal(err)
	}
	schedtest.WaitFor(t, "j.1 and j.2 on the cards", func() bool { got := files(); return got["0"] == "j.1\n" && got["1"] == "j.2\n" })
	r.exits <- scheduler.Exit{Attempt: "j.1/1", Outcome: plans.Success}
	schedtest.WaitFor(t, "j.3 on GPU 0", func() bool { return files()["0"] == "j.3\n" })
	if _, err := c.Act(api.Cancel, api.SelectRequest{Sweep: "j"}); err != nil {
		t.Fatal(err)
	}
	schedtest.WaitFor(t, "the cards idle again", func() bool { got := files(); return len(got) == 1 && got["notes"] == "mine\n" })
}
