package report

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpuq/gpuq/plans"
)

// Geometry of the charts, in SVG user units; the page scales them to its width.
const (
	chartWidth = 1100.0
	labelWidth = 70.0
	rightPad   = 30.0
	laneHeight = 18.0
	laneGap    = 3.0
	cardGap    = 10.0
	axisHeight = 22.0
	memHeight  = 80.0
	memGap     = 14.0
	// palette is how many job colours the page has (.c0 to .c9); jobs take them in turn.
	palette = 10
)

// timeline maps times onto the charts' x axis, shared by the Gantt chart and the memory
// panels so that they line up.
type timeline struct {
	start time.Time
	span  time.Duration
}

func (tl timeline) x(t time.Time) float64 {
	return labelWidth + float64(t.Sub(tl.start))/float64(tl.span)*(chartWidth-labelWidth-rightPad)
}

// tick is a mark on the time axis.
type tick struct {
	X     float64
	Label string
}

// ticks marks the axis at a round step that gives at most ten marks.
func (tl timeline) ticks() []tick {
	steps := []time.Duration{time.Second, 5 * time.Second, 15 * time.Second, 30 * time.Second, time.Minute,
		5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour,
		3 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour, 48 * time.Hour, 7 * 24 * time.Hour}
	step := steps[len(steps)-1]
	for _, s := range steps {
		if tl.span/s <= 10 {
			step = s
			break
		}
	}
	var out []tick
	for d := time.Duration(0); d <= tl.span; d += step {
		label := plans.FormatDuration(d)
		if d == 0 {
			label = "0"
		}
		out = append(out, tick{X: tl.x(tl.start.Add(d)), Label: label})
	}
	return out
}

// gantt is the chart of attempts on cards: a row per card, as many lanes in it as
// attempts overlapped there.
type gantt struct {
	Height float64
	Rows   []row
	Bars   []bar
	Ticks  []tick
	AxisY  float64
}

// row is a card's band of the chart.
type row struct {
	Label string
	Y, H  float64
}

// bar is one attempt: a rectangle on each of its cards.
type bar struct {
	Job     string
	Attempt string
	Class   string // its outcome, for its colour
	Rects   []rect
	Label   string // the attempt and its tier, where the bar is wide enough
	LabelX  float64
	LabelY  float64
	OOM     bool // marked with a cross at its end
	Title   string
}

type rect struct{ X, Y, W, H float64 }

// placed is an attempt put in a lane of a card.
type placed struct {
	job  *Job
	a    *Attempt
	lane map[plans.CardID]int // by card
}

func newGantt(d Data, tl timeline, cs []Card) gantt {
	var attempts []*placed
	for i := range d.Jobs {
		j := &d.Jobs[i]
		for k := range j.Attempts {
			attempts = append(attempts, &placed{job: j, a: &j.Attempts[k], lane: map[plans.CardID]int{}})
		}
	}
	slices.SortStableFunc(attempts, func(p, q *placed) int { return p.a.Started.Compare(q.a.Started) })
	lanes := map[plans.CardID]int{}
	for _, c := range cs {
		// Lanes are given first come, first served: the first lane free at its start.
		var ends []time.Time
		for _, p := range attempts {
			if !p.a.on(c.id()) {
				continue
			}
			l := slices.IndexFunc(ends, func(e time.Time) bool { return !e.After(p.a.Started) })
			if l < 0 {
				l = len(ends)
				ends = append(ends, time.Time{})
			}
			ends[l] = p.a.end(d.Now)
			p.lane[c.id()] = l
		}
		lanes[c.id()] = max(1, len(ends))
	}
	g := gantt{}
	top := map[plans.CardID]float64{}
	y := 4.0
	for _, c := range cs {
		h := float64(lanes[c.id()])*(laneHeight+laneGap) - laneGap
		g.Rows = append(g.Rows, row{Label: "GPU " + c.id().String(), Y: y, H: h})
		top[c.id()] = y
		y += h + cardGap
	}
	g.AxisY = y
	g.Height = y + axisHeight
	g.Ticks = tl.ticks()
	for _, p := range attempts {
		g.Bars = append(g.Bars, newBar(d, tl, p, top))
	}
	return g
}

func newBar(d Data, tl timeline, p *placed, top map[plans.CardID]float64) bar {
	a := p.a
	x0, x1 := tl.x(a.Started), tl.x(a.end(d.Now))
	w := max(x1-x0, 1.5)
	b := bar{Job: p.job.ID, Attempt: attemptID(p.job.ID, a.N), Class: outcomeClass(a.Outcome), OOM: a.oom(),
		Title: attemptTitle(d, p.job, a)}
	for _, id := range a.cards() {
		if t, ok := top[id]; ok {
			b.Rects = append(b.Rects, rect{X: x0, Y: t + float64(p.lane[id])*(laneHeight+laneGap), W: w, H: laneHeight})
		}
	}
	if len(b.Rects) > 0 {
		label := fmt.Sprintf("%s #%d t%d", p.job.Name, a.N, a.Tier)
		if float64(len(label))*6.2+6 > w {
			label = fmt.Sprintf("t%d", a.Tier)
		}
		if float64(len(label))*6.2+6 <= w {
			b.Label, b.LabelX, b.LabelY = label, x0+3, b.Rects[0].Y+laneHeight-5
		}
	}
	return b
}

func attemptID(job string, n int) string { return job + "/" + strconv.Itoa(n) }

// outcomeClass names an outcome for CSS: "running" for one that has none yet.
func outcomeClass(o plans.Outcome) string {
	if o == "" {
		return "running"
	}
	return string(o)
}

func attemptTitle(d Data, j *Job, a *Attempt) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s), attempt %d on GPU %s, tier %d", j.ID, j.Name, a.N, cardsText(a), a.Tier)
	if a.Changed != "" {
		fmt.Fprintf(&b, " (%s)", a.Changed)
	}
	fmt.Fprintf(&b, "\n%s, %s", outcomeClass(a.Outcome), plans.FormatDuration(a.end(d.Now).Sub(a.Started)))
	fmt.Fprintf(&b, "\nestimate %s, peak %s", sizeOrDash(a.Estimate), sizeOrDash(a.Peak))
	if a.OOM != nil && a.OOM.TriedBytes > 0 {
		fmt.Fprintf(&b, "\nOOM: tried to allocate %s", plans.FormatSize(a.OOM.TriedBytes))
	}
	return b.String()
}

// cardsText names an attempt's cards: "0,1", or on a worker "node7:0,1".
func cardsText(a *Attempt) string { return plans.Cards(a.Worker, a.GPUs) }

func sizeOrDash(b int64) string {
	if b <= 0 {
		return "-"
	}
	return plans.FormatSize(b)
}

// memPanel is one card's memory over time: each attempt's samples stacked, what the
// packer reserved for them as a line, and the card's capacity.
type memPanel struct {
	Label    string
	Title    string // the card's name and size, for a pointer resting on it
	Y, H     float64
	Scale    string // the top of the y axis, as a size
	TotalY   float64
	HasTotal bool
	Areas    []area
	Reserved string // polyline points
}

// area is one attempt's band of a stacked memory panel.
type area struct {
	Job, Attempt string
	Colour       int // index into the page's palette, by job
	Points       string
	Title        string
}

// step is a piecewise-constant function of time: Value from At until the next step.
type step struct {
	At    time.Time
	Value int64
}

func newMemPanels(d Data, tl timeline, cs []Card) ([]memPanel, float64) {
	colour := map[string]int{}
	for i, j := range d.Jobs {
		colour[j.ID] = i % palette
	}
	var out []memPanel
	y := 4.0
	for _, c := range cs {
		out = append(out, newMemPanel(d, tl, c, colour, y))
		y += memHeight + memGap
	}
	return out, y + axisHeight
}

func newMemPanel(d Data, tl timeline, c Card, colour map[string]int, y float64) memPanel {
	type run struct {
		job   *Job
		a     *Attempt
		steps []step
	}
	var runs []run
	var reserved []step
	for i := range d.Jobs {
		j := &d.Jobs[i]
		for k := range j.Attempts {
			a := &j.Attempts[k]
			if !a.on(c.id()) {
				continue
			}
			runs = append(runs, run{job: j, a: a, steps: samples(a, d.Now)})
			reserved = append(reserved, step{a.Started, a.Estimate}, step{a.end(d.Now), -a.Estimate})
		}
	}
	slices.SortStableFunc(runs, func(p, q run) int { return p.a.Started.Compare(q.a.Started) })
	reserved = cumulative(reserved)
	// Each attempt's band lies on the ones that started before it.
	stacks := make([][]step, len(runs)+1)
	for i, r := range runs {
		stacks[i+1] = add(stacks[i], r.steps)
	}
	// The panel's scale: the card, or what was reserved or held on it if that is more
	// (a card the data does not describe, or a reading past its capacity).
	most := c.Total
	for _, s := range append(reserved, stacks[len(runs)]...) {
		most = max(most, s.Value)
	}
	p := memPanel{Label: "GPU " + c.id().String(), Title: strings.TrimSpace(fmt.Sprintf("GPU %s: %s %s", c.id(), c.Name, sizeOrDash(c.Total))),
		Y: y, H: memHeight, Scale: plans.FormatSize(most),
		HasTotal: c.Total > 0, TotalY: yOf(y, most, c.Total), Reserved: stepLine(tl, y, most, reserved)}
	for i, r := range runs {
		p.Areas = append(p.Areas, area{Job: r.job.ID, Attempt: attemptID(r.job.ID, r.a.N), Colour: colour[r.job.ID],
			Title:  attemptTitle(d, r.job, r.a),
			Points: band(tl, y, most, stacks[i], stacks[i+1], r.a.Started, r.a.end(d.Now))})
	}
	return p
}

// samples is an attempt's memory as steps in time: nothing before its first reading,
// nothing from its end (where the engine's last reading may be).
func samples(a *Attempt, now time.Time) []step {
	end := a.end(now)
	out := make([]step, 0, len(a.Memory)+1)
	for _, s := range a.Memory {
		if at := a.Started.Add(s.At); at.Before(end) {
			out = append(out, step{at, s.Bytes})
		}
	}
	return append(out, step{end, 0})
}

// cumulative turns changes (+n at a start, -n at an end) into the running sum.
func cumulative(changes []step) []step {
	slices.SortStableFunc(changes, func(p, q step) int { return p.At.Compare(q.At) })
	out := make([]step, 0, len(changes))
	var sum int64
	for _, c := range changes {
		sum += c.Value
		if n := len(out); n > 0 && out[n-1].At.Equal(c.At) {
			out[n-1].Value = sum
			continue
		}
		out = append(out, step{c.At, sum})
	}
	return out
}

// valueAt is a step function's value at t: 0 before its first step.
func valueAt(f []step, t time.Time) int64 {
	i, found := slices.BinarySearchFunc(f, t, func(s step, t time.Time) int { return s.At.Compare(t) })
	if !found {
		i--
	}
	if i < 0 {
		return 0
	}
	return f[i].Value
}

// add is the sum of two step functions.
func add(f, g []step) []step {
	times := make([]time.Time, 0, len(f)+len(g))
	for _, s := range f {
		times = append(times, s.At)
	}
	for _, s := range g {
		times = append(times, s.At)
	}
	slices.SortFunc(times, time.Time.Compare)
	times = slices.CompactFunc(times, time.Time.Equal)
	out := make([]step, len(times))
	for i, t := range times {
		out[i] = step{t, valueAt(f, t) + valueAt(g, t)}
	}
	return out
}

// band is the polygon between two stacked step functions from start to end.
func band(tl timeline, y0 float64, most int64, below, above []step, start, end time.Time) string {
	times := []time.Time{start}
	for _, s := range above {
		if s.At.After(start) && s.At.Before(end) {
			times = append(times, s.At)
		}
	}
	times = append(times, end)
	var top, bottom []string
	for i, t := range times[:len(times)-1] {
		x0, x1 := tl.x(t), tl.x(times[i+1])
		hi, lo := yOf(y0, most, valueAt(above, t)), yOf(y0, most, valueAt(below, t))
		top = append(top, point(x0, hi), point(x1, hi))
		bottom = append(bottom, point(x0, lo), point(x1, lo))
	}
	slices.Reverse(bottom)
	return strings.Join(append(top, bottom...), " ")
}

// stepLine draws a step function as a polyline across the chart.
func stepLine(tl timeline, y0 float64, most int64, f []step) string {
	var pts []string
	var last float64
	for i, s := range f {
		x, y := tl.x(s.At), yOf(y0, most, s.Value)
		if i > 0 {
			pts = append(pts, point(x, last))
		}
		pts = append(pts, point(x, y))
		last = y
	}
	return strings.Join(pts, " ")
}

func yOf(y0 float64, most, v int64) float64 {
	if most <= 0 {
		return y0 + memHeight
	}
	return y0 + memHeight - float64(v)/float64(most)*memHeight
}

func point(x, y float64) string {
	return strconv.FormatFloat(x, 'f', 1, 64) + "," + strconv.FormatFloat(y, 'f', 1, 64)
}
