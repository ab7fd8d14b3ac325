package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuq/gpuq/cmd/gpuq/internal/browser"
)

// screenshots are the README's pictures, made by the tests with -update.
const screenshots = "../../examples/screenshots"

// checkReport draws the report of a run's --json summary, as a person would (gpuq
// report summary.json), and renders it in Chromium: one bar per attempt, the memory
// the engine sampled, no error. With -update its screenshot becomes the README's.
func checkReport(t *testing.T, summary string, sum runSummary) {
	t.Helper()
	dir := t.TempDir()
	in, page := filepath.Join(dir, "summary.json"), filepath.Join(dir, "report.html")
	if err := os.WriteFile(in, []byte(summary), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := gpuq(t, "report", in, "-o", page); code != exitOK || !strings.Contains(errOut, "wrote the report") {
		t.Fatalf("gpuq report: exit %d: %s", code, errOut)
	}
	attempts, sampled := 0, 0
	for _, j := range sum.Jobs {
		for _, a := range j.Attempts {
			attempts++
			if len(a.Memory) > 0 {
				sampled++
			}
		}
	}
	if sampled == 0 || len(sum.GPUs) == 0 {
		t.Errorf("the summary has %d cards and memory samples for %d of %d attempts: a report needs both", len(sum.GPUs), sampled, attempts)
	}
	shot := browser.Render(t, page, 1200, 800, func(ctx context.Context, p *browser.Page) {
		var bars, bands int
		if err := p.Eval(ctx, `document.querySelectorAll("#gantt .bar").length`, &bars); err != nil {
			t.Fatal(err)
		}
		if err := p.Eval(ctx, `document.querySelectorAll("#memory .mem").length`, &bands); err != nil {
			t.Fatal(err)
		}
		if bars != attempts || bands != attempts {
			t.Errorf("%d bars and %d memory bands for %d attempts: want one each per attempt", bars, bands, attempts)
		}
	})
	if *update {
		if err := os.WriteFile(filepath.Join(screenshots, "report.png"), shot, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
