package report

import (
	"bytes"
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gpuq/gpuq/plans"
)

//go:embed report.html.tmpl
var pageText string

// pageTemplate is parsed when a report is first written, not as gpuq starts: every
// gpuq process links this package, a daemon's supervisors too.
var pageTemplate = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("report").Funcs(template.FuncMap{
		"f":     func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) },
		"size":  sizeOrDash,
		"cards": cardsText,
		"class": outcomeClass,
		"dur": func(a Attempt, now time.Time) string {
			return plans.FormatDuration(a.end(now).Sub(a.Started))
		},
		"pct": func(part, whole float64) string {
			if whole <= 0 {
				return "-"
			}
			return fmt.Sprintf("%.0f%%", 100*part/whole)
		},
		"sec":     time.Duration.Seconds,
		"num":     threeFigures,
		"span":    plans.FormatDuration,
		"id":      attemptID,
		"add":     func(a, b float64) float64 { return a + b },
		"colour":  colourOf,
		"parts":   parts,
		"changes": changes,
		"util": func(u *float64) string {
			if u == nil {
				return "-"
			}
			return fmt.Sprintf("%.0f%%", 100**u)
		},
	}).Parse(pageText))
})

// parts writes a list of values (a job's name, a point: "learning_rate=1e-5,seed=1") so that a narrow column breaks it only after its
// commas: broken anywhere, "learning_rate=1e-" over "5,seed=1" reads as another value.
func parts(s string) template.HTML { return spans(strings.SplitAfter(s, ",")) }

// changes writes what a tier changed, or a job's name in the jobs table, as parts
// does, and lets a key break after its underscores too: the jobs table is dense, and
// its column, narrowed to fit the page, broke "gradient_checkpoint" over "ing=true";
// "gradient_" over "checkpointing=true" reads as the one word it is. A name broken
// only after its commas kept the column as wide as its longest key and value
// (warmup_proportion_of_total_steps=0.06), and the table wider than the page, each
// attempt's outcome out of sight. A value never breaks.
func changes(s string) template.HTML {
	var units []string
	for _, p := range strings.SplitAfter(s, ",") {
		key, val, ok := strings.Cut(p, "=")
		if !ok {
			units = append(units, p)
			continue
		}
		words := strings.SplitAfter(key, "_")
		words[len(words)-1] += "=" + val
		units = append(units, words...)
	}
	return spans(units)
}

// spans writes each unit as a span that does not break, so that a line breaks only
// between them.
func spans(units []string) template.HTML {
	var b strings.Builder
	for i, u := range units {
		if u == "" && i > 0 {
			continue
		}
		b.WriteString(`<span class="part">` + template.HTMLEscapeString(u) + `</span>`)
	}
	return template.HTML(b.String())
}

// threeFigures prints a positive number with about three significant figures.
func threeFigures(v float64) string {
	switch {
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case v >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

// page is what the template draws.
type page struct {
	Data
	Figures Figures
	Gantt   gantt
	Memory  []memPanel
	// MemoryHeight is the memory chart's height; its time axis is at MemoryAxisY.
	MemoryHeight, MemoryAxisY float64
	Outcomes                  []string
	When                      string
	// Charts are the curves of what the sweep found, a chart a group; Grouped says
	// there are groups.
	Charts  []curveChart
	Grouped bool
}

// outcomes are the classes the Gantt chart's legend explains, in its order.
var outcomes = []string{"success", "running", "gpu-oom", "host-oom", "failed", "timed-out", "cancelled", "lost", "stopped-early"}

// Write renders d as one self-contained HTML page.
func Write(w io.Writer, d Data) error {
	f := figures(d)
	tl := timeline{start: f.Start, span: f.Makespan}
	if tl.span <= 0 {
		tl.span = time.Second
	}
	cs := cards(d)
	p := page{Data: d, Figures: f, Gantt: newGantt(d, tl, cs), Outcomes: outcomes}
	p.Memory, p.MemoryHeight = newMemPanels(d, tl, cs)
	p.MemoryAxisY = p.MemoryHeight - axisHeight
	if d.Found != nil {
		p.Charts = d.Found.charts()
		p.Grouped = len(p.Charts) > 1 || len(p.Charts) == 1 && p.Charts[0].Group != ""
	}
	switch {
	case d.Virtual:
		p.When = "times are virtual, from the simulation's start"
	case !f.Start.IsZero():
		p.When = fmt.Sprintf("from %s to %s", f.Start.Format("2006-01-02 15:04:05"), f.End.Format("2006-01-02 15:04:05 MST"))
	}
	// Rendered whole before writing, so that a failure leaves no half page behind.
	var buf bytes.Buffer
	if err := pageTemplate().Execute(&buf, p); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	_, err := w.Write(buf.Bytes())
	return err
}
