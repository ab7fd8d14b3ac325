package report

// What the sweep found: its points ranked by a training metric, and each point's curve
// of it over the steps, its seeds drawn as a band around their mean.

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/gpuq/gpuq/cmd/gpuq/ranking"
	"github.com/gpuq/gpuq/plans"
)

// Found is what a sweep's trainers reported, ranked.
type Found struct {
	Metric string
	Mode   plans.Mode
	Rows   []ranking.Row
	// Curves are each job's curve of the metric, by job.
	Curves map[string][]ranking.Point
	// At are the steps early stopping judged the points at; none without early_stop.
	At []int64
}

// Geometry of a curve chart, in SVG user units.
const (
	curveHeight = 250.0
	curveTop    = 8.0
	curveLeft   = 70.0
	curveRight  = 20.0
	// grey is the colour of a point ranked past the palette.
	grey = palette
)

// curveChart is one group's points drawn. Its ticks' X is where they stand along
// their axis: a YTick's is its height.
type curveChart struct {
	Group          string
	Height, AxisY  float64
	XTicks, YTicks []tick
	Rungs          []tick
	Lines          []curveLine
}

// curveLine is one point: the mean of its seeds, their band, and where it was stopped
// (early, or by its seeds' failures).
type curveLine struct {
	Point, Title string
	Colour       int
	Mean, Band   string // polyline and polygon points
	Stopped      bool
	EndX, EndY   float64
	// Alone: one reading so far (a point whose seeds have just begun), a dot, where a
	// line of one point draws nothing.
	Alone bool
}

// colourOf gives each point of a group the palette's colours by rank, and those past
// it grey.
func colourOf(r ranking.Row) int {
	if r.Rank > palette {
		return grey
	}
	return r.Rank - 1
}

// charts draws each group's points.
func (f *Found) charts() []curveChart {
	var out []curveChart
	for start := 0; start < len(f.Rows); {
		end := start + 1
		for end < len(f.Rows) && f.Rows[end].Group == f.Rows[start].Group {
			end++
		}
		out = append(out, f.chart(f.Rows[start:end]))
		start = end
	}
	return out
}

// pointCurve is a point's seeds' curves combined: at each step one of them reported,
// their mean and range, over the seeds whose curve spans the step. The seeds are those
// its values in the ranking are of: a seed that crashed after a low reading, beside
// seeds that ran on, would otherwise bend a curve its point's values do not.
type pointCurve struct {
	steps          []int64
	mean, low, top []float64
}

func (f *Found) combine(r ranking.Row) pointCurve {
	var seeds [][]ranking.Point
	var steps []int64
	for _, id := range r.Of {
		if c := f.Curves[id]; len(c) > 0 {
			seeds = append(seeds, c)
			for _, p := range c {
				steps = append(steps, p.Step)
			}
		}
	}
	slices.Sort(steps)
	steps = slices.Compact(steps)
	pc := pointCurve{}
	for _, s := range steps {
		var vs []float64
		for _, c := range seeds {
			if v, ok := interpolate(c, s); ok {
				vs = append(vs, v)
			}
		}
		if len(vs) == 0 {
			continue
		}
		sum := 0.0
		for _, v := range vs {
			sum += v
		}
		pc.steps = append(pc.steps, s)
		pc.mean = append(pc.mean, sum/float64(len(vs)))
		pc.low = append(pc.low, slices.Min(vs))
		pc.top = append(pc.top, slices.Max(vs))
	}
	return pc
}

// interpolate is a curve's value at a step within its span, linearly between its
// readings.
func interpolate(c []ranking.Point, s int64) (float64, bool) {
	i, found := slices.BinarySearchFunc(c, s, func(p ranking.Point, s int64) int { return int(p.Step - s) })
	switch {
	case found:
		return c[i].Value, true
	case i == 0 || i == len(c):
		return 0, false
	}
	a, b := c[i-1], c[i]
	return a.Value + (b.Value-a.Value)*float64(s-a.Step)/float64(b.Step-a.Step), true
}

func (f *Found) chart(rows []ranking.Row) curveChart {
	ch := curveChart{Group: rows[0].Group, Height: curveTop + curveHeight + axisHeight, AxisY: curveTop + curveHeight}
	curves := make([]pointCurve, len(rows))
	var most int64
	lo, hi := math.Inf(1), math.Inf(-1)
	for i, r := range rows {
		curves[i] = f.combine(r)
		pc := curves[i]
		if n := len(pc.steps); n > 0 {
			most = max(most, pc.steps[n-1])
			lo, hi = math.Min(lo, slices.Min(pc.low)), math.Max(hi, slices.Max(pc.top))
		}
	}
	if most == 0 || math.IsInf(lo, 0) {
		return ch
	}
	if hi == lo {
		lo, hi = lo-1, hi+1
	}
	pad := (hi - lo) * 0.05
	lo, hi = lo-pad, hi+pad
	x := func(s int64) float64 { return curveLeft + float64(s)/float64(most)*(chartWidth-curveLeft-curveRight) }
	y := func(v float64) float64 { return curveTop + (hi-v)/(hi-lo)*curveHeight }
	for _, s := range niceTicks(0, float64(most)) {
		ch.XTicks = append(ch.XTicks, tick{X: x(int64(s)), Label: stepLabel(s)})
	}
	for _, v := range niceTicks(lo, hi) {
		ch.YTicks = append(ch.YTicks, tick{X: y(v), Label: strconv.FormatFloat(v, 'g', 4, 64)})
	}
	for _, at := range f.At {
		if at <= most {
			ch.Rungs = append(ch.Rungs, tick{X: x(at), Label: "judged at " + stepLabel(float64(at))})
		}
	}
	// The worst first, so that the best lies on top.
	for i := len(rows) - 1; i >= 0; i-- {
		pc := curves[i]
		if len(pc.steps) == 0 {
			continue
		}
		r := rows[i]
		l := curveLine{Point: r.Point, Colour: colourOf(r), Stopped: r.Cut || r.Broke, Title: lineTitle(f, r)}
		var mean, top, low []string
		for k, s := range pc.steps {
			mean = append(mean, point(x(s), y(pc.mean[k])))
			top = append(top, point(x(s), y(pc.top[k])))
			low = append(low, point(x(s), y(pc.low[k])))
		}
		slices.Reverse(low)
		l.Mean = strings.Join(mean, " ")
		if len(r.Jobs) > 1 {
			l.Band = strings.Join(append(top, low...), " ")
		}
		n := len(pc.steps) - 1
		l.EndX, l.EndY, l.Alone = x(pc.steps[n]), y(pc.mean[n]), n == 0
		ch.Lines = append(ch.Lines, l)
	}
	return ch
}

// lineTitle is what a pointer resting on a point's curve says.
func lineTitle(f *Found, r ranking.Row) string {
	var b strings.Builder
	fmt.Fprintf(&b, "#%d %s: %s", r.Rank, r.Point, f.Metric)
	if r.Final != nil {
		fmt.Fprintf(&b, " %s at step %s", r.Final.Text(), r.StepText())
	}
	if r.Stopped > 0 {
		fmt.Fprintf(&b, "\n%d of its %d seeds stopped early", r.Stopped, len(r.Jobs))
	}
	if n := r.Broken(); n > 0 {
		fmt.Fprintf(&b, "\n%d of its %d seeds failed or were cancelled", n, len(r.Jobs))
	}
	return b.String()
}

// niceTicks are about five round values from lo to hi.
func niceTicks(lo, hi float64) []float64 {
	span := hi - lo
	if span <= 0 {
		return []float64{lo}
	}
	step := math.Pow(10, math.Floor(math.Log10(span/5)))
	for _, m := range []float64{1, 2, 5, 10} {
		if span/(step*m) <= 6 {
			step *= m
			break
		}
	}
	var out []float64
	for k := math.Ceil(lo / step); k*step <= hi+step*1e-9; k++ {
		// Through twelve figures, so that 3 × 0.2 is 0.6.
		v, _ := strconv.ParseFloat(strconv.FormatFloat(k*step, 'g', 12, 64), 64)
		if v == 0 {
			v = 0 // not -0, which k is where lo is just below 0: the axis read "-0"
		}
		out = append(out, v)
	}
	return out
}

// stepLabel writes a step count shortly: 2500, 10k, 1.5M.
func stepLabel(s float64) string {
	switch {
	case s >= 1e6:
		return strconv.FormatFloat(s/1e6, 'g', 3, 64) + "M"
	case s >= 1e4:
		return strconv.FormatFloat(s/1e3, 'g', 3, 64) + "k"
	}
	return strconv.FormatFloat(s, 'f', 0, 64)
}

// Ended labels the dashed curves in the legend: the points whose seeds were stopped
// early, or all failed or were cancelled, as the ranking has them; "" where none were.
func (f *Found) Ended() string {
	var cut, broke bool
	for _, r := range f.Rows {
		cut, broke = cut || r.Cut, broke || r.Broke
	}
	switch {
	case cut && broke:
		return "stopped early, or failed or cancelled (✕ where it ended)"
	case cut:
		return "stopped early (✕ where it stopped)"
	case broke:
		return "failed or cancelled (✕ where it ended)"
	}
	return ""
}

// better says which way the metric gets better, for people.
func (f *Found) Better() string {
	if f.Mode == plans.Max {
		return "higher is better"
	}
	return "lower is better"
}
