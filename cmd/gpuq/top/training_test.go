package top

import (
	"bytes"
	"strings"
	"testing"

	"github.com/gpuq/gpuq/scheduler/daemon/api"
)

// TestRunningJobsLatestMetrics: a running job's row shows its trainer's latest step
// and first metrics before its output's last line.
func TestRunningJobsLatestMetrics(t *testing.T) {
	ov := sampleOverview(t)
	ov.Running[0].Step = 2000
	ov.Running[0].Metrics = []api.LatestValue{{Name: "eval_loss", Value: 0.91234}, {Name: "loss", Value: 1.2}, {Name: "lr", Value: 4e-5}, {Name: "epoch", Value: 1}}
	var buf bytes.Buffer
	if err := Print(&buf, ov, Options{Title: "the daemon on /state"}, 200); err != nil {
		t.Fatal(err)
	}
	row := ""
	for _, line := range strings.Split(buf.String(), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), ov.Running[0].Job+" ") {
			row = line
		}
	}
	if !strings.Contains(row, "@2000 eval_loss=0.9123 loss=1.2 lr=4e-05 · ") || strings.Contains(row, "epoch") {
		t.Errorf("its row: %q", row)
	}
}
