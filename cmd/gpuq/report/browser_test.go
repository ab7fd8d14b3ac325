package report

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"path/filepath"
	"testing"

	"github.com/gpuq/gpuq/cmd/gpuq/internal/browser"
)

// TestInChromium renders the sample sweep's page in a real browser: nothing it runs
// fails, it asks for nothing but itself, the Gantt chart has one bar per attempt and
// the memory chart one band per attempt, and it can be seen (a screenshot).
func TestInChromium(t *testing.T) {
	page := filepath.Join(t.TempDir(), "report.html")
	var buf bytes.Buffer
	if err := Write(&buf, sample()); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(page, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	shot := browser.Render(t, page, 1200, 900, func(ctx context.Context, p *browser.Page) {
		for sel, want := range map[string]int{"#gantt .bar": 7, "#memory .mem": 7, "#gantt .oom": 3, "#jobs tr.first": 5} {
			var n int
			if err := p.Eval(ctx, `document.querySelectorAll("`+sel+`").length`, &n); err != nil {
				t.Fatal(err)
			}
			if n != want {
				t.Errorf("%s: %d drawn, want %d", sel, n, want)
			}
		}
		// Pointing at a bar lights up its job's row.
		var lit bool
		err := p.Eval(ctx, `(() => {
			document.querySelector('#gantt .bar[data-job="gla-e1.2"]').dispatchEvent(new MouseEvent("mouseenter"));
			return document.getElementById("job-gla-e1.2").classList.contains("hl");
		})()`, &lit)
		if err != nil || !lit {
			t.Errorf("pointing at a bar did not light its job's row (%v)", err)
		}
	})
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatalf("the screenshot is not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() != 1200 || b.Dy() < 900 {
		t.Errorf("screenshot %dx%d, want the page's 1200 wide, whole", b.Dx(), b.Dy())
	}
}
