package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuq/gpuq/cmd/gpuq/internal/browser"
	"github.com/gpuq/gpuq/scheduler/schedtest"
)

// TestSweepFoundInChromium: the report of the early-stopping trace, looked at in a
// real browser, draws each point's curve with its seeds' band, marks the points
// stopped early and where they were judged, and ranks the points in a table. With
// -update its "What the sweep found" becomes the README's picture.
func TestSweepFoundInChromium(t *testing.T) {
	page := filepath.Join(t.TempDir(), "es.html")
	if _, errOut, code := gpuq(t, "simulate", "../../examples/traces/early-stop.yaml", "--report", page); code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	shot := browser.Render(t, page, 1200, 700, func(ctx context.Context, p *browser.Page) {
		for sel, want := range map[string]int{"#found .curve": 9, "#found .curve .band": 9, "#found .curve.stopped": 5,
			"#found .curve .end": 5, "#found .rung": 2, "#ranking tbody tr": 9, "#ranking tr.stopped": 5, "#gantt .stopped-early": 12} {
			var n int
			if err := p.Eval(ctx, `document.querySelectorAll("`+sel+`").length`, &n); err != nil {
				t.Fatal(err)
			}
			if n != want {
				t.Errorf("%s: %d drawn, want %d", sel, n, want)
			}
		}
		var first string
		if err := p.Eval(ctx, `document.querySelector("#ranking tbody tr").innerText`, &first); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(first, "job=lr-3e-4") || !strings.Contains(first, "3 succeeded") {
			t.Errorf("the first point ranked: %q", first)
		}
		// The picture: the page's header and what the sweep found.
		if err := p.Eval(ctx, `(() => { document.body.replaceChildren(document.querySelector("header"), document.getElementById("found")); return 0 })()`, new(int)); err != nil {
			t.Fatal(err)
		}
	})
	if schedtest.Updating() {
		if err := os.WriteFile(filepath.Join(screenshots, "found.png"), shot, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
