package daemon

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler"
)

// TestAFailureIsToldBeforeTheEnd: when a sweep's last two jobs end together (one
// transaction of the engine's) and the success comes first, the hooks still hear of
// the failure before the end it is part of.
func TestAFailureIsToldBeforeTheEnd(t *testing.T) {
	d, r, srv := testDaemon(t)
	dir := t.TempDir()
	notices := filepath.Join(dir, "notices.jsonl")
	sweep := "name: n\ncommand: [sh, -c, \"exit 0\"]\nmatrix: {seed: [1, 2]}\nmemory: 1GiB\n" +
		"notify: {command: [sh, -c, \"cat >> notices.jsonl; echo >> notices.jsonl\"], on: [end, failure]}\n"
	if _, err := clientOf(srv).Submit(SubmitRequest{File: filepath.Join(dir, "n.yaml"), Source: sweep}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "both jobs to run", func() bool { return len(d.store.Snapshot().Running()) == 2 })
	// Queued from inside the loop, both are applied by its next transaction.
	err := d.eng.Do(context.Background(), func() error {
		r.exits <- scheduler.Exit{Attempt: "n.1/1", Outcome: plans.Success}
		r.exits <- scheduler.Exit{Attempt: "n.2/1", Outcome: plans.Failed, Detail: "exited with status 1"}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	waitFor(t, "two notices", func() bool {
		data, _ := os.ReadFile(notices)
		got = nil
		for _, line := range strings.Split(string(data), "\n") {
			var n Notice
			if json.Unmarshal([]byte(line), &n) == nil {
				got = append(got, n.Event)
			}
		}
		return len(got) >= 2
	})
	if strings.Join(got, " ") != "failure end" {
		t.Errorf("notices %q, want the failure, then the end", got)
	}
}
