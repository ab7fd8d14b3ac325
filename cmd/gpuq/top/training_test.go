package top

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/gpuq/gpuq/scheduler/daemon/api"
)

// TestRunningJobsLatestMetrics: a running job's row shows its trainer's latest step
// and first metrics before its output's last line; a metric whose latest reading was
// no number (a run that diverged) shows NaN, as the daemon sends it, not a number.
func TestRunningJobsLatestMetrics(t *testing.T) {
	ov := sampleOverview(t)
	ov.Running[0].Step = 2000
	ov.Running[0].Metrics = []api.LatestValue{{Name: "eval_loss", Value: 0.91234}, {Name: "loss", Value: 1.2}, {Name: "lr", Value: 4e-5}, {Name: "epoch", Value: 1}}
	if row := runningRow(t, ov); !strings.Contains(row, "@2000 eval_loss=0.9123 loss=1.2 lr=4e-05 · ") || strings.Contains(row, "epoch") {
		t.Errorf("its row: %q", row)
	}
	ov.Running[0].Step = 2100
	ov.Running[0].Metrics = []api.LatestValue{{Name: "eval_loss", Value: math.NaN()}, {Name: "loss", Value: 1.2}}
	data, err := json.Marshal(ov)
	if err != nil {
		t.Fatal(err)
	}
	var sent api.Overview
	if err := json.Unmarshal(data, &sent); err != nil {
		t.Fatal(err)
	}
	if row := runningRow(t, sent); !strings.Contains(row, "@2100 eval_loss=NaN loss=1.2 · ") {
		t.Errorf("its row once its eval_loss went NaN: %q", row)
	}
}

// runningRow is the row of the overview's first running job, as top prints it.
func runningRow(t *testing.T, ov api.Overview) string {
	t.Helper()
	var buf bytes.Buffer
	if err := Print(&buf, ov, Options{Title: "the daemon on /state"}, 200); err != nil {
		t.Fatal(err)
	}
	row := "" // the last line it begins: the card's memory bar names it first
	for _, line := range strings.Split(buf.String(), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), ov.Running[0].Job+" ") {
			row = line
		}
	}
	return row
}
