package report

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuq/gpuq/cmd/gpuq/internal/browser"
	"github.com/gpuq/gpuq/cmd/gpuq/ranking"
	"github.com/gpuq/gpuq/plans"
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
		// The jobs table fits the page: no column, an attempt's exit status the last,
		// is scrolled out of sight.
		var fits bool
		if err := p.Eval(ctx, `(() => { const t = document.getElementById("jobs"); return t.scrollWidth <= t.parentElement.clientWidth; })()`, &fits); err != nil || !fits {
			t.Errorf("the jobs table is wider than the page at 1200 pixels (%v)", err)
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

// TestHostilePageRunsNothing: a summary is anyone's JSON (gpuq report s.json), and a
// sweep's names, parameters and failures are its author's text: whatever they hold
// (markup that ends the title, the SVG or the script, attributes, quotes) is shown as
// text, runs nothing and asks for nothing.
func TestHostilePageRunsNothing(t *testing.T) {
	const h = `</title></svg></script><script>pwn(1)</script><img src=x onerror=pwn(2)>` +
		`<svg onload=pwn(3)>"' onmouseover=pwn(4) x="` + "`${pwn(5)}`"
	d := sample()
	d.Sweep, d.Source = "s"+h, "from"+h
	d.Cards[0].Name = h
	for i := range d.Jobs {
		j := &d.Jobs[i]
		j.ID, j.Name, j.Reason = j.ID+h, h, h
		for k := range j.Attempts {
			j.Attempts[k].Changed = h
			j.Attempts[k].Outcome = plans.Outcome(h)
		}
	}
	page := filepath.Join(t.TempDir(), "report.html")
	var buf bytes.Buffer
	if err := Write(&buf, d); err != nil {
		t.Fatal(err)
	}
	// pwn is defined before the page's own elements, so that any of them that ran it
	// says so (a call of an undefined pwn would throw instead, and be reported too).
	html := strings.Replace(buf.String(), "<head>", `<head><script>window.pwned=[];function pwn(n){window.pwned.push(n)}</script>`, 1)
	if err := os.WriteFile(page, []byte(html), 0o644); err != nil {
		t.Fatal(err)
	}
	browser.Render(t, page, 1200, 900, func(ctx context.Context, p *browser.Page) {
		// Pointing at every bar, band and row.
		var pointed int
		err := p.Eval(ctx, `(() => {
			const els = document.querySelectorAll("[data-job]");
			for (const el of els) {
				el.dispatchEvent(new MouseEvent("mouseover"));
				el.dispatchEvent(new MouseEvent("mouseenter"));
			}
			return els.length;
		})()`, &pointed)
		if err != nil || pointed == 0 {
			t.Fatalf("pointed at %d elements: %v", pointed, err)
		}
		var ran []int
		var text string
		if err := p.Eval(ctx, `window.pwned`, &ran); err != nil {
			t.Fatal(err)
		}
		if err := p.Eval(ctx, `document.body.innerText`, &text); err != nil {
			t.Fatal(err)
		}
		if len(ran) > 0 {
			t.Errorf("the page ran the sweep's text: pwn%v", ran)
		}
		if !strings.Contains(text, "</script><script>pwn(1)</script>") {
			t.Errorf("the sweep's text is not shown as text:\n%s", text)
		}
	})
}

// TestNamesBreakOnlyAfterCommas: a job's name is a list of values; where a narrow
// column wraps one, it wraps after a comma, never inside a value ("learning_rate=1e-" over "5,seed=1" reads as another learning rate).
func TestNamesBreakOnlyAfterCommas(t *testing.T) {
	d := sample()
	for i := range d.Jobs {
		j := &d.Jobs[i]
		j.Name = "task=glue-tvt_qnli,learning_rate=1e-5,warmup_ratio=0.06,seed=8" + j.ID[len(j.ID)-1:]
	}
	breaksOnlyWhere(t, d, "#jobs td.name", func(before string) bool { return strings.HasSuffix(before, ",") })
}

// TestChangesBreakBetweenWords: what a tier changed is a list of values too, and its
// column, narrowed to fit the page, broke "gradient_checkpoint" over "ing=true"; it
// breaks after a comma, or after an underscore of a key, never inside a word or a
// value.
func TestChangesBreakBetweenWords(t *testing.T) {
	d := sample()
	for i := range d.Jobs {
		for k := range d.Jobs[i].Attempts {
			if a := &d.Jobs[i].Attempts[k]; a.Tier > 0 {
				a.Changed = "gradient_checkpointing=true,batch_size=4,gradient_accumulation_steps=8,num_data_workers=0"
			}
		}
	}
	breaksOnlyWhere(t, d, "#jobs td.changed", func(before string) bool {
		part := before[strings.LastIndex(before, ",")+1:]
		return strings.HasSuffix(before, ",") || strings.HasSuffix(part, "_") && !strings.Contains(part, "=")
	})
}

// breaksOnlyWhere renders d at 1200 pixels and checks that the cells sel finds wrap,
// and only where ok says they may: ok is given a cell's text up to a break.
func breaksOnlyWhere(t *testing.T, d Data, sel string, ok func(before string) bool) {
	t.Helper()
	browser.Render(t, writePage(t, d), 1200, 900, func(ctx context.Context, p *browser.Page) {
		// Each break between two lines of a cell: the text of the cell up to it.
		var breaks []string
		err := p.Eval(ctx, `(() => {
			const out = [];
			for (const td of document.querySelectorAll("`+sel+`")) {
				const text = td.textContent, r = document.createRange();
				const walker = document.createTreeWalker(td, NodeFilter.SHOW_TEXT);
				let top = null, seen = 0;
				for (let n = walker.nextNode(); n; n = walker.nextNode()) {
					for (let i = 0; i < n.length; i++, seen++) {
						r.setStart(n, i); r.setEnd(n, i + 1);
						const y = r.getBoundingClientRect().top;
						if (top !== null && y > top + 1) out.push(text.slice(0, seen));
						top = y;
					}
				}
			}
			return out;
		})()`, &breaks)
		if err != nil {
			t.Fatal(err)
		}
		wrapped := false
		for _, b := range breaks {
			wrapped = true
			if !ok(b) {
				t.Errorf("a cell of %s breaks inside a word or a value, after %q", sel, b)
			}
		}
		if !wrapped {
			t.Errorf("no cell of %s wrapped at 1200 pixels: the test shows nothing", sel)
		}
	})
}

// TestChartsReadableOnAPhone: on a phone's 420 pixels the charts keep a size their
// text can be read at, and scroll sideways in their own box, as the tables do: drawn
// to the page's width, their labels were three pixels high.
func TestChartsReadableOnAPhone(t *testing.T) {
	d := sample()
	d.Found = &Found{Metric: "eval_loss", Mode: plans.Min,
		Curves: map[string][]ranking.Point{"gla-e1.1": {{Step: 100, Value: 3}, {Step: 1000, Value: 2}}},
		Rows: []ranking.Row{{Rank: 1, Point: "task=qnli", Jobs: []string{"gla-e1.1"}, Of: []string{"gla-e1.1"},
			Final: &ranking.Stat{Mean: 2, N: 1}, Step: 1000}}}
	browser.Render(t, writePage(t, d), 420, 900, func(ctx context.Context, p *browser.Page) {
		var scales []float64
		if err := p.Eval(ctx, `[...document.querySelectorAll("svg")].map((s) => s.getBoundingClientRect().width / s.viewBox.baseVal.width)`, &scales); err != nil {
			t.Fatal(err)
		}
		if len(scales) != 3 {
			t.Fatalf("%d charts, want the curves, the Gantt chart and the memory chart", len(scales))
		}
		for i, s := range scales {
			if s < 0.75 {
				t.Errorf("chart %d is drawn at %.2f of its size: its 11-pixel text is %.1f pixels high", i+1, s, 11*s)
			}
		}
		var wide bool
		if err := p.Eval(ctx, `document.documentElement.scrollWidth > window.innerWidth`, &wide); err != nil || wide {
			t.Errorf("the page is wider than the phone, not its charts alone (%v)", err)
		}
	})
}

// TestSwatchStaysWithItsPoint: a point's colour, the key to its curve, starts the
// line its name does; the column wrapped between them, the swatch alone on a line
// above the name, on a phone and wherever a name was long.
func TestSwatchStaysWithItsPoint(t *testing.T) {
	d := sample()
	d.Found = &Found{Metric: "eval_loss", Mode: plans.Min, Curves: map[string][]ranking.Point{}}
	for i, p := range []string{"learning_rate=1e-3", "task=a-very-long-task-name-that-goes-on-and-on-and-on-forever-and-ever,model=meta-llama/Llama-3.1-8B-Instruct,lr=3e-4"} {
		d.Found.Rows = append(d.Found.Rows, ranking.Row{Rank: i + 1, Point: p})
	}
	for _, width := range []int{420, 1200} {
		browser.Render(t, writePage(t, d), width, 900, func(ctx context.Context, p *browser.Page) {
			// Where each name's first letter is: past the cell's left edge by the
			// swatch, and on the cell's first line.
			var at [][2]float64
			err := p.Eval(ctx, `[...document.querySelectorAll("#ranking td.name")].map((td) => {
				const r = document.createRange();
				r.selectNodeContents(td);
				const top = r.getBoundingClientRect().top;
				const left = td.getBoundingClientRect().left + parseFloat(getComputedStyle(td).paddingLeft);
				const first = document.createTreeWalker(td, NodeFilter.SHOW_TEXT).nextNode();
				r.setStart(first, 0); r.setEnd(first, 1);
				const b = r.getBoundingClientRect();
				return [b.left - left, b.top - top];
			})`, &at)
			if err != nil {
				t.Fatal(err)
			}
			for i, xy := range at {
				if xy[0] < 10 || xy[1] > 4 {
					t.Errorf("at %d pixels, point %d begins %.0f pixels right of its cell's edge and %.0f below its top: its swatch is on a line of its own", width, i+1, xy[0], xy[1])
				}
			}
		})
	}
}

// writePage writes d's page to a file of the test's and returns its path.
func writePage(t *testing.T, d Data) string {
	t.Helper()
	page := filepath.Join(t.TempDir(), "report.html")
	var buf bytes.Buffer
	if err := Write(&buf, d); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(page, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return page
}

// TestJobsTableFitsWithLongParameterNames: a sweep's names are as long as its
// parameters' (a Hugging Face Trainer's warmup_proportion_of_total_steps), and a
// name broke only after its commas: at 1200 pixels the jobs table was wider than the
// page, each attempt's outcome and exit status scrolled out of sight.
func TestJobsTableFitsWithLongParameterNames(t *testing.T) {
	d := sample()
	for i := range d.Jobs {
		j := &d.Jobs[i]
		j.Name = "glue-tvt_qnli,learning_rate_for_the_optimizer=1e-5,warmup_proportion_of_total_steps=0.06,seed=" + j.ID[len(j.ID)-1:]
	}
	d.Jobs[3].Attempts[0].Outcome, d.Jobs[3].Attempts[0].Exit = plans.StoppedEarly, "SIGTERM"
	browser.Render(t, writePage(t, d), 1200, 900, func(ctx context.Context, p *browser.Page) {
		var w [2]float64
		if err := p.Eval(ctx, `(() => { const t = document.getElementById("jobs"); return [t.scrollWidth, t.parentElement.clientWidth]; })()`, &w); err != nil {
			t.Fatal(err)
		}
		if w[0] > w[1] {
			t.Errorf("the jobs table is %.0f pixels wide, wider than the page's %.0f at 1200 pixels", w[0], w[1])
		}
	})
	// Where a name breaks, it is after a comma, or after an underscore of a key, as
	// what a tier changed does: never inside a value.
	breaksOnlyWhere(t, d, "#jobs td.name", func(before string) bool {
		part := before[strings.LastIndex(before, ",")+1:]
		return strings.HasSuffix(before, ",") || strings.HasSuffix(part, "_") && !strings.Contains(part, "=")
	})
}
