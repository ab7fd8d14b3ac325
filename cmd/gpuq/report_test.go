package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuq/gpuq/cmd/gpuq/internal/browser"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/schedtest"
)

// screenshots are the README's pictures, made by the tests with -update.
const screenshots = "../../examples/screenshots"

// checkReport draws the report of a run's --json summary, as a person would (gpuq
// report summary.json), and renders it in Chromium: one bar per attempt, the memory
// the engine sampled, no error. With -update its screenshot becomes the README's.
func checkReport(t *testing.T, summary string, sum api.SweepSummary) {
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
	if schedtest.Updating() {
		if err := os.WriteFile(filepath.Join(screenshots, "report.png"), shot, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestReportFromDaemon: gpuq report SWEEP draws a sweep from the daemon's state, one
// bar per attempt; a name the daemon does not know is bad input.
func TestReportFromDaemon(t *testing.T) {
	daemonEnv(t)
	startDaemon(t)
	sweep := filepath.Join(t.TempDir(), "r.yaml")
	os.WriteFile(sweep, []byte("name: r\ncommand: [sh, -c, \"exit {code}\"]\nmatrix: {code: [0, 1, 2]}\nmemory: 1GiB\n"), 0o644)
	if _, errOut, code := cli(t, "submit", sweep); code != exitOK {
		t.Fatalf("submit: exit %d: %s", code, errOut)
	}
	cli(t, "wait", "--sweep", "r")
	page := filepath.Join(t.TempDir(), "r.html")
	if _, errOut, code := cli(t, "report", "r", "-o", page); code != exitOK || !strings.Contains(errOut, "(3 jobs, 3 attempts)") {
		t.Fatalf("report: exit %d: %s", code, errOut)
	}
	html, _ := os.ReadFile(page)
	if n := strings.Count(string(html), `<g class="bar `); n != 3 || !strings.Contains(string(html), "the daemon on ") ||
		!strings.Contains(string(html), "attempt 1 failed: exited with status 2") {
		t.Errorf("%d bars; the page:\n%.2000s", n, html)
	}
	if _, errOut, code := cli(t, "report", "nosuch"); code != exitBadInput || !strings.Contains(errOut, `no sweep "nosuch"`) {
		t.Errorf("an unknown sweep: exit %d: %s", code, errOut)
	}
}

// TestSimulateReport: gpuq simulate --report draws gpuq's run of a trace in virtual
// time, one bar per attempt ("what if two per card?"); it draws only gpuq's policy.
func TestSimulateReport(t *testing.T) {
	page := filepath.Join(t.TempDir(), "two.html")
	out, errOut, code := gpuq(t, "simulate", "../../examples/traces/gla.yaml", "--gpu-plan", "2", "--report", page)
	if code != exitOK || !strings.Contains(errOut, "wrote the report of gla (72 jobs, ") {
		t.Fatalf("exit %d: %s %s", code, out, errOut)
	}
	html, _ := os.ReadFile(page)
	var attempts int
	fmt.Sscanf(errOut[strings.Index(errOut, "(72 jobs, ")+len("(72 jobs, "):], "%d", &attempts)
	if n := strings.Count(string(html), `<g class="bar `); n != attempts || !strings.Contains(string(html), "times are virtual") ||
		!strings.Contains(string(html), "plan 2,2,2,2,2,2,2") {
		t.Errorf("%d bars for %d attempts", n, attempts)
	}
	if _, errOut, code := gpuq(t, "simulate", "../../examples/traces/gla.yaml", "--policy", "static", "--report", page); code != exitBadInput {
		t.Errorf("--report with the static policy: exit %d: %s", code, errOut)
	}
}

// TestADirectoryIsNoSummary: a directory named as a sweep (where its files are kept) is
// no summary file: the name is the sweep's.
func TestADirectoryIsNoSummary(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	if err := os.Mkdir("qs", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("s.json", []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	for arg, want := range map[string]bool{"qs": false, "s.json": true, "-": true, "gla-e1": false} {
		if got := isSummary(arg); got != want {
			t.Errorf("isSummary(%q) = %v, want %v", arg, got, want)
		}
	}
}
