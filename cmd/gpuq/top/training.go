package top

import (
	"strconv"
	"strings"

	"github.com/gpuq/gpuq/scheduler/daemon/api"
)

// shownMetrics is how many of a running job's latest metrics its row shows, its
// sweep's early_stop metric first: the rest of the row is its output's last line.
const shownMetrics = 3

// withLatest puts a running job's latest step and metrics before its output's last
// line: "@2000 eval_loss=0.91 loss=1.23 · 42%|████ ...".
func withLatest(r api.RunningJob, output string) string {
	if len(r.Metrics) == 0 {
		return output
	}
	parts := []string{"@" + strconv.FormatInt(r.Step, 10)}
	for _, m := range r.Metrics[:min(len(r.Metrics), shownMetrics)] {
		parts = append(parts, m.Name+"="+strconv.FormatFloat(m.Value, 'g', 4, 64))
	}
	latest := strings.Join(parts, " ")
	if output == "" {
		return latest
	}
	return latest + " · " + output
}
