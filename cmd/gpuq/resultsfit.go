package main

import (
	"io"
	"slices"
	"strings"

	"github.com/charmbracelet/x/ansi"

	"github.com/gpuq/gpuq/cmd/gpuq/top"
)

// The columns of gpuq results' table, as written: GROUP is hidden where the points
// are not grouped.
const (
	resGroup = iota
	resRank
	resPoint
	resSeeds
	resFinal
	resBest
	resStep
	resJobs
	resColumns
)

// leastJobs is the fewest cells the seeds' states (JOBS) keep rather than be left out:
// a count and two letters of a state, "3 st…", which tell each state apart (queued,
// running, succeeded, failed, cancelled, stopped early).
const leastJobs = 5

// leastText is the fewest cells a text value keeps of its end: "…" and three, as
// top's columns of names keep.
const leastText = top.LeastText

// resultsLayout is what of gpuq results' table a width leaves: the columns hidden, how
// the names are cut, and the cells JOBS and FINAL keep at most (0: whole).
type resultsLayout struct {
	hidden       [resColumns]bool
	group, point top.NameCut
	jobs, final  int
}

// resultsFit fits gpuq results' table (rows, the header first, each of resColumns
// cells) to width cells a line by a ladder of concessions, each taken only while the
// table does not fit, in this order (see printResultsTable):
//
//  1. BEST goes (--json and --csv have it);
//  2. the names lose their text values' keys (glue-sst2,lr=1e-4), then their other
//     keys' ends, to a letter and "…", every row alike;
//  3. JOBS is shortened, to minCut cells;
//  4. STEP, SEEDS and RANK go (the rows are in its order);
//  5. JOBS is shortened to leastJobs, "3 st…";
//  6. the groups' text values lose their starts, then the points', down to "…" and
//     three cells, while they still tell the rows apart;
//  7. the names lose their keys, every row alike, their values whole and in order.
//
// Where even that does not fit, JOBS is left out, and the table fitted again without
// it, from the start (what gave way for JOBS alone comes back); then a final deviation
// loses its end, its mean whole (see cutDeviation). What still does not fit (a point
// of more values than the terminal has room for) is cut as it must: the points, then
// the groups, lose values (see top.CutName), and FINAL its end.
func resultsFit(rows [][]string, width int, grouped bool) resultsLayout {
	var l resultsLayout
	l.hidden[resGroup] = !grouped
	if width <= 0 {
		return l
	}
	fits := func() bool { return l.width(rows) <= width }
	// shrink steps *v down by a cell a time from the widest of col's cells as l cuts
	// them (0 where none is cut), to no less than least, while the table does not fit
	// and ok allows.
	shrink := func(v *int, col, least int, ok func() bool) {
		if l.hidden[col] {
			return
		}
		if *v == 0 {
			*v = l.widest(rows, col) + 1
		}
		for !fits() && *v > least {
			*v--
			if ok != nil && !ok() {
				*v++
				return
			}
		}
	}
	keyShrink := func(c *top.NameCut, col int) {
		if l.hidden[col] {
			return
		}
		if c.Key == 0 {
			c.Key = longestKey(rows, col) + 1
		}
		for !fits() && c.Key > 2 {
			c.Key--
		}
	}
	apart := func(col int) func() bool { return func() bool { return l.apart(rows, col) } }
	ladder := func(steps ...func()) {
		for _, step := range steps {
			if fits() {
				return
			}
			step()
		}
	}
	steps := []func(){
		func() { l.hidden[resBest] = true },
		func() { l.group.TextKeys, l.point.TextKeys = true, true },
		func() { keyShrink(&l.point, resPoint) },
		func() { keyShrink(&l.group, resGroup) },
		func() { shrink(&l.jobs, resJobs, minCut, nil) },
		func() { l.hidden[resStep] = true },
		func() { l.hidden[resSeeds] = true },
		func() { l.hidden[resRank] = true },
		func() { shrink(&l.jobs, resJobs, leastJobs, nil) },
		func() { shrink(&l.group.Text, resGroup, leastText, apart(resGroup)) },
		func() { shrink(&l.point.Text, resPoint, leastText, apart(resPoint)) },
		func() { l.group.NoKeys, l.point.NoKeys = true, true },
	}
	// regrow gives back what a concession took where a later one left room for it:
	// JOBS, the last column, what is left of the line (it was shortened before the
	// columns after it went), then the text values' ends and the keys, the groups'
	// first. A cut of 0 is none.
	regrow := func() resultsLayout {
		for _, c := range []struct {
			v     *int
			most  int
			least int
		}{
			{&l.jobs, widestRaw(rows, resJobs), leastJobs},
			{&l.group.Text, widestRaw(rows, resGroup), leastText},
			{&l.point.Text, widestRaw(rows, resPoint), leastText},
			{&l.point.Key, longestKey(rows, resPoint), 2},
			{&l.group.Key, longestKey(rows, resGroup), 2},
		} {
			for *c.v > 0 && *c.v <= c.most && fits() {
				*c.v++
			}
			if *c.v > c.least && !fits() {
				*c.v--
			}
		}
		return l
	}
	ladder(steps...)
	if fits() {
		return regrow()
	}
	l = resultsLayout{}
	l.hidden[resGroup], l.hidden[resJobs] = !grouped, true
	ladder(append(steps,
		func() { shrink(&l.final, resFinal, finalLeast(rows), nil) },
		// Past every value whole.
		func() { shrink(&l.point.Width, resPoint, ansi.StringWidth(rows[0][resPoint]), nil) },
		func() { shrink(&l.group.Width, resGroup, ansi.StringWidth(rows[0][resGroup]), nil) },
		func() { shrink(&l.final, resFinal, 1, nil) },
	)...)
	return regrow()
}

// cell is row r's cell of column col, cut as l says (a header is never cut but by
// the last resort).
func (l *resultsLayout) cell(r []string, col int, header bool) string {
	c := r[col]
	switch col {
	case resGroup, resPoint:
		n := l.point
		if col == resGroup {
			n = l.group
		}
		if header {
			return c
		}
		return n.Cut(c)
	case resJobs:
		if l.jobs > 0 && ansi.StringWidth(c) > l.jobs {
			return ansi.Truncate(c, l.jobs, "…")
		}
	case resFinal:
		if l.final > 0 && ansi.StringWidth(c) > l.final {
			if d, ok := cutDeviation(c, l.final); ok && !header {
				return d
			}
			return ansi.Truncate(c, l.final, "…")
		}
	}
	return c
}

// widest is the widest of column col's cells as l cuts them, its header's included.
func (l *resultsLayout) widest(rows [][]string, col int) int {
	n := 0
	for i, r := range rows {
		n = max(n, ansi.StringWidth(l.cell(r, col, i == 0)))
	}
	return n
}

// width is the widest line of the table as l prints it: the columns shown, two cells
// apart, the last not padded.
func (l *resultsLayout) width(rows [][]string) int {
	n := -2
	for col := range resColumns {
		if !l.hidden[col] {
			n += l.widest(rows, col) + 2
		}
	}
	return n
}

// apart reports whether the cells of column col that differ still read differently
// as l cuts them.
func (l *resultsLayout) apart(rows [][]string, col int) bool {
	seen := map[string]string{}
	for _, r := range rows[1:] {
		c := l.cell(r, col, false)
		if was, ok := seen[c]; ok && was != r[col] {
			return false
		}
		seen[c] = r[col]
	}
	return true
}

// print writes the table as l cuts it, a line a row.
func (l *resultsLayout) print(w io.Writer, rows [][]string) error {
	cols := slices.DeleteFunc([]int{resGroup, resRank, resPoint, resSeeds, resFinal, resBest, resStep, resJobs}, func(c int) bool { return l.hidden[c] })
	widths := map[int]int{}
	for _, c := range cols {
		widths[c] = l.widest(rows, c)
	}
	var b strings.Builder
	for i, r := range rows {
		var line strings.Builder
		for _, c := range cols {
			cell := l.cell(r, c, i == 0)
			line.WriteString(cell + strings.Repeat(" ", widths[c]-ansi.StringWidth(cell)+2))
		}
		b.WriteString(strings.TrimRight(line.String(), " ") + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// widestRaw is the widest of column col's cells as written.
func widestRaw(rows [][]string, col int) int {
	n := 0
	for _, r := range rows {
		n = max(n, ansi.StringWidth(r[col]))
	}
	return n
}

// longestKey is the widest key of column col's names.
func longestKey(rows [][]string, col int) int {
	n := 0
	for _, r := range rows[1:] {
		for _, p := range strings.Split(r[col], ",") {
			if k, _, ok := strings.Cut(p, "="); ok {
				n = max(n, ansi.StringWidth(k))
			}
		}
	}
	return n
}

// finalLeast is the fewest cells FINAL is cut to with every mean whole: the widest
// mean and " ±…".
func finalLeast(rows [][]string) int {
	n := ansi.StringWidth(rows[0][resFinal])
	for _, r := range rows[1:] {
		mean, _, _ := strings.Cut(r[resFinal], " ± ")
		n = max(n, ansi.StringWidth(mean)+len(" ±")+1)
	}
	return n
}
