package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/charmbracelet/x/ansi"
	"golang.org/x/sys/unix"

	"github.com/gpuq/gpuq/cmd/gpuq/top"
	"github.com/gpuq/gpuq/plans"
)

// newTable returns a writer that aligns tab-separated columns.
func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
}

// bar draws used/total as a bar of width cells.
func bar(used, total int64, width int) string {
	if total <= 0 {
		return strings.Repeat("░", width)
	}
	n := int((used*int64(width) + total/2) / total)
	n = min(max(n, 0), width)
	return strings.Repeat("█", n) + strings.Repeat("░", width-n)
}

// gib prints bytes as GiB with two decimals, without the unit, for columns that name it.
func gib(b int64) string {
	return strconv.FormatFloat(float64(b)/(1<<30), 'f', 2, 64)
}

func slotsText(n int) string {
	if n == plans.NoSlotLimit {
		return "-"
	}
	return strconv.Itoa(n)
}

// namedAtMost is how many jobs a message names; past it, it says how many more.
const namedAtMost = 10

// firstOf joins the first namedAtMost items with sep and says how many more there
// are: "a.1, a.2, ... and 990 more".
func firstOf(items []string, sep string) string {
	if len(items) <= namedAtMost {
		return strings.Join(items, sep)
	}
	return fmt.Sprintf("%s%s... and %d more", strings.Join(items[:namedAtMost], sep), sep, len(items)-namedAtMost)
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// indentJobs copies a listing of jobs as the daemon sends it ({"jobs":[...]}) to w as
// writeJSON prints one, a job at a time: 100,000 jobs are 30 MB, which decoding whole
// and encoding again took longer than the daemon took to send. A listing cut short
// (the daemon stopped) is an error, not a shorter list.
func indentJobs(w io.Writer, r io.Reader) error {
	dec := json.NewDecoder(r)
	expect := func(want any) error {
		tok, err := dec.Token()
		if err == nil && tok != want {
			err = fmt.Errorf("%v where %v belongs", tok, want)
		}
		if err != nil {
			return fmt.Errorf("the daemon's listing of jobs: %w", err)
		}
		return nil
	}
	for _, want := range []any{json.Delim('{'), "jobs", json.Delim('[')} {
		if err := expect(want); err != nil {
			return err
		}
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	bw.WriteString("{\n  \"jobs\": [")
	var job bytes.Buffer
	for n := 0; dec.More(); n++ {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return fmt.Errorf("the daemon's listing of jobs: %w", err)
		}
		job.Reset()
		if err := json.Indent(&job, raw, "    ", "  "); err != nil {
			return err
		}
		if n > 0 {
			bw.WriteByte(',')
		}
		bw.WriteString("\n    ")
		bw.Write(job.Bytes())
		if !dec.More() {
			bw.WriteString("\n  ")
		}
	}
	if err := expect(json.Delim(']')); err != nil {
		return err
	}
	if err := expect(json.Delim('}')); err != nil {
		return err
	}
	bw.WriteString("]\n}\n")
	return bw.Flush()
}

// fitTable aligns tab-separated columns as newTable does and, given a width (a
// terminal's; 0 for none), fits each line to it: the cells of the columns named in cut
// are shortened with "…", in that order and to no less than their header or minCut,
// and a last cell still too long wraps onto lines of its own under its column, or, in
// a column that may be cut, is shortened, or left out where too little room is left
// to read it. Piped, every value stays whole, for grep and for scripts.
type fitTable struct {
	w      io.Writer
	width  int
	cut    []int
	starts []int // the columns of cut that lose their start, not their end: job ids
	// names are the columns of cut of job names and points, key=value,...: their keys
	// give way before their values (see top.CutName).
	names []int
	drop  []int // columns left out whole, in this order, where the table does not fit
	// squeeze are columns left out whole, in this order, after drop, where the table
	// does not fit even with the columns of cut at their least, names with their
	// values whole (valuesWhole, as fits asks).
	squeeze     []int
	valuesWhole bool
	// ends: names are squeezed for no further than their text values' ends
	// (top.EndsWidth), not their text values whole (top.ValuesWidth).
	ends bool
	buf  bytes.Buffer
	// What Flush left out: the columns dropped, and whether the last column had no
	// room (see leaveOut).
	dropped  []int
	leftLast bool
}

func newFitTable(w io.Writer, width int, cut ...int) *fitTable {
	return &fitTable{w: w, width: width, cut: cut}
}

// cutStarts makes the columns cut lose their start rather than their end, as job
// ids, whose number tells them apart, must: "…long-name.12".
func (t *fitTable) cutStarts(cols ...int) *fitTable {
	t.starts = cols
	return t
}

// cutNames makes the columns cut lose their keys' ends, then their text values' starts,
// then their keys, then their middles: job names and points, told apart by their
// values (see top.CutName).
func (t *fitTable) cutNames(cols ...int) *fitTable {
	t.names = cols
	return t
}

// dropping makes the columns cols left out whole, one by one in this order, while the
// table does not fit with every value whole: short values worth less than the room
// they would take from the long ones (a job's point). Column numbers stay those of the
// table as written.
func (t *fitTable) dropping(cols ...int) *fitTable {
	t.drop = cols
	return t
}

// squeezing makes the columns cols left out whole, one by one in this order, after
// those of dropping, while the table does not fit even with the columns of cut at their
// least, its names cut no further than their keys: what a narrow terminal (60 columns,
// 40) has no room for beside the values that tell the rows apart. Column numbers stay
// those of the table as written.
func (t *fitTable) squeezing(cols ...int) *fitTable {
	t.squeeze = cols
	return t
}

// toEnds makes squeezing leave columns out only while the table does not fit with its
// names cut to their numbers and their text values' ends (…nli,l…=3e-4,s…=87), not
// their values whole: a listing of many columns (gpuq status), whose names may lose
// their starts on 80 columns, keeps its columns where the names can.
func (t *fitTable) toEnds() *fitTable {
	t.ends = true
	return t
}

// hid reports whether the last Flush left out column col (as written): dropped, or, as
// the last column, without room for its values.
func (t *fitTable) hid(col, last int) bool {
	return slices.Contains(t.dropped, col) || col == last && t.leftLast
}

func (t *fitTable) Write(p []byte) (int, error) { return t.buf.Write(p) }

// Flush prints the table.
func (t *fitTable) Flush() error {
	var rows [][]string
	for _, l := range strings.Split(strings.TrimSuffix(t.buf.String(), "\n"), "\n") {
		rows = append(rows, strings.Split(l, "\t"))
	}
	t.buf.Reset()
	t.dropped, t.leftLast = nil, false
	for _, c := range t.drop {
		if t.width <= 0 || t.fits(rows, false) {
			break
		}
		rows = t.without(rows, c)
	}
	for _, c := range t.squeeze {
		if t.width <= 0 || t.fits(rows, true) {
			break
		}
		rows = t.without(rows, c)
	}
	widths := t.widths(rows)
	t.leaveOut(rows, widths)
	names := t.cutNamesOf(rows, widths)
	var b strings.Builder
	for _, r := range rows {
		var line strings.Builder
		for i, c := range r[:len(r)-1] {
			if n, ok := names[i][c]; ok {
				c = n
			} else {
				c = t.shorten(i, c, widths[i])
			}
			line.WriteString(c + strings.Repeat(" ", widths[i]-ansi.StringWidth(c)+2))
		}
		col := ansi.StringWidth(line.String())
		b.WriteString(strings.TrimRight(line.String()+t.last(r, col), " ") + "\n")
	}
	_, err := io.WriteString(t.w, b.String())
	return err
}

// fits reports whether rows fit the width with every value whole, or, cut, with the
// columns of cut shortened to their least, names no further than their keys (their
// values whole, see top.ValuesWidth): a column of short values gives way before long
// ones are cut, and before names lose their values. A last cell may be left out where
// it may be cut, or wrap where not. A last cell that may be cut needs no room, nor the
// gap before it, as widths has it: where none is left it goes, and the line ends with
// the column before it (a table 70 cells wide fits 70 columns).
func (t *fitTable) fits(rows [][]string, cut bool) bool {
	whole := *t
	whole.valuesWhole = cut
	if !cut {
		whole.width = 0
	}
	widths := whole.widths(rows)
	for _, r := range rows {
		n := len(r) - 1
		need := sum(widths[:n]) + 2*n
		switch {
		case !slices.Contains(t.cut, n):
			need += min(ansi.StringWidth(r[n]), minCut)
		case n > 0:
			need -= 2
		}
		if need > t.width {
			return false
		}
	}
	return true
}

// without is rows less column col (as written), the columns after it renumbered in
// cut and starts.
func (t *fitTable) without(rows [][]string, col int) [][]string {
	at := col
	for _, d := range t.dropped {
		if d < col {
			at--
		}
	}
	t.dropped = append(t.dropped, col)
	for i, r := range rows {
		if at < len(r) {
			rows[i] = slices.Delete(slices.Clone(r), at, at+1)
		}
	}
	renumber := func(cols []int) []int {
		var out []int
		for _, c := range cols {
			switch {
			case c < at:
				out = append(out, c)
			case c > at:
				out = append(out, c-1)
			}
		}
		return out
	}
	t.cut, t.starts, t.names = renumber(t.cut), renumber(t.starts), renumber(t.names)
	return rows
}

// widths is each aligned column's width, the columns in cut shortened until the table
// fits (a line's last cell is not aligned, as with text/tabwriter).
func (t *fitTable) widths(rows [][]string) []int {
	var widths, lasts []int
	for _, r := range rows {
		for len(widths) < len(r) {
			widths, lasts = append(widths, 0), append(lasts, 0)
		}
		for i, c := range r {
			switch {
			case i < len(r)-1:
				widths[i] = max(widths[i], ansi.StringWidth(c))
			case !slices.Contains(t.cut, i): // a cut last cell takes the room left
				lasts[i] = max(lasts[i], ansi.StringWidth(c))
			}
		}
	}
	if t.width <= 0 {
		return widths
	}
	// A line ending at column i needs the columns before it, their gaps and its last
	// cell; a last cell that may be cut needs no room of its own (it takes what is left,
	// or goes), so neither does the gap before it.
	over := -t.width
	for i := range widths {
		gaps := 2 * i
		if slices.Contains(t.cut, i) {
			gaps = max(gaps-2, 0)
		}
		over = max(over, sum(widths[:i])+gaps+lasts[i]-t.width)
	}
	least := func(c int) int {
		l := max(ansi.StringWidth(rows[0][min(c, len(rows[0])-1)]), minCut)
		if t.valuesWhole && slices.Contains(t.names, c) {
			for _, r := range rows[1:] {
				if c < len(r) {
					if t.ends {
						l = max(l, top.EndsWidth(r[c]))
					} else {
						l = max(l, top.ValuesWidth(r[c]))
					}
				}
			}
		}
		return l
	}
	top.GiveWay(widths, t.cut, least, over)
	return widths
}

// leaveOut decides whether the last column, where it may be cut, is left out: on
// every line, its header's too, once one line has too little room for its value
// (minCut).
func (t *fitTable) leaveOut(rows [][]string, widths []int) {
	for _, r := range rows {
		n := len(r) - 1
		room := t.width - sum(widths[:n]) - 2*n
		if t.width > 0 && slices.Contains(t.cut, n) && room < minCut && ansi.StringWidth(r[n]) > room {
			t.leftLast = true
		}
	}
}

// last is a line's last cell, which begins at column col: whole if it fits, else
// shortened or left out if its column may be cut, else wrapped.
func (t *fitTable) last(r []string, col int) string {
	c := r[len(r)-1]
	room := t.width - col
	switch {
	case t.leftLast && slices.Contains(t.cut, len(r)-1):
		return ""
	case t.width <= 0 || ansi.StringWidth(c) <= room:
		return c
	case slices.Contains(t.cut, len(r)-1) || room < minCut:
		return t.shorten(len(r)-1, c, max(room, 1))
	}
	return wrap(c, room, strings.Repeat(" ", col))
}

// cutNamesOf is each aligned column of names' cells cut to its width, as one column
// (top.CutNames): two names that differ only where a cut would fall stay told apart.
func (t *fitTable) cutNamesOf(rows [][]string, widths []int) map[int]map[string]string {
	out := map[int]map[string]string{}
	for _, col := range t.names {
		var cells []string
		for _, r := range rows {
			if col < len(r)-1 && r[col] != "" {
				cells = append(cells, r[col])
			}
		}
		cut := top.CutNames(cells, widths[col])
		out[col] = map[string]string{}
		for i, c := range cells {
			out[col][c] = cut[i]
		}
	}
	return out
}

// shorten cuts cell c of column col to width cells, marking the cut with "…".
func (t *fitTable) shorten(col int, c string, width int) string {
	n := ansi.StringWidth(c)
	switch {
	case n <= width:
		return c
	case slices.Contains(t.starts, col):
		return ansi.TruncateLeft(c, n-width+1, "…")
	case slices.Contains(t.names, col):
		return top.CutName(c, width)
	}
	if d, ok := cutDeviation(c, width); ok {
		return d
	}
	return ansi.Truncate(c, width, "…")
}

// cutDeviation shortens a mean ± deviation (gpuq results' final) to width cells, the
// mean whole, so that what is left of the deviation still says how large it is: it
// loses its end only past its decimal point ("± 0.00…" of 0.00071); one written with
// an exponent, or cut before its point, is rounded to a figure ("± 6e-05") where that
// fits, or else left out ("±…"). Cut as text, 5.9e-05 read "± 5.…", five for a
// deviation of a hundred-thousandth. ok is false where c is no mean ± deviation or its
// mean and "±…" have no room: it is then cut as any text.
func cutDeviation(c string, width int) (string, bool) {
	mean, dev, ok := strings.Cut(c, " ± ")
	if !ok || ansi.StringWidth(mean+" ±")+1 > width {
		return "", false
	}
	head := mean + " ± "
	room := width - ansi.StringWidth(head) // cells left for the deviation, less than it needs
	if dot := strings.IndexByte(dev, '.'); dot >= 0 && !strings.ContainsAny(dev, "eE") && room-1 > dot {
		return head + dev[:room-1] + "…", true
	}
	if v, err := strconv.ParseFloat(dev, 64); err == nil {
		if r := strconv.FormatFloat(v, 'g', 1, 64); len(r) <= room {
			return head + r, true
		}
	}
	return mean + " ±…", true
}

// wrap breaks text into lines of width cells (0 or less: any) at spaces, and begins
// each line after the first with indent.
func wrap(text string, width int, indent string) string {
	if width <= 0 {
		return text
	}
	return strings.Join(words(text, width), "\n"+indent)
}

// wrapHanging breaks text into lines of width cells (0 or less: any) at spaces, the first
// begun with lead and the others with indent, each line counted with what begins it:
// wrap(text, width-len(lead), indent) lets a line after the first, begun with an
// indent longer than lead, run past the width by the difference.
func wrapHanging(lead, indent, text string, width int) string {
	if width <= 0 {
		return lead + text
	}
	first := words(text, width-ansi.StringWidth(lead))
	lines := []string{lead + first[0]}
	if rest := strings.Join(first[1:], " "); rest != "" {
		for _, l := range words(rest, width-ansi.StringWidth(indent)) {
			lines = append(lines, indent+l)
		}
	}
	return strings.Join(lines, "\n")
}

// wrapItems breaks a list written "a, b, c" into lines of width cells (0 or less: any)
// between its items, never inside one ("1 blocked"), each line but the last ending with
// its comma.
func wrapItems(list string, width int) string {
	if width <= 0 {
		return list
	}
	var lines []string
	line := ""
	for _, item := range strings.Split(list, ", ") {
		switch {
		case line == "":
			line = item
		case ansi.StringWidth(line)+2+ansi.StringWidth(item) < width: // and room for a comma
			line += ", " + item
		default:
			lines, line = append(lines, line+","), item
		}
	}
	return strings.Join(append(lines, line), "\n")
}

// words breaks text into lines of at most width cells at spaces; a word longer than
// width is cut, after a comma where it has one, so that no line is longer.
func words(text string, width int) []string {
	width = max(width, 8)
	var lines []string
	line := ""
	for _, w := range strings.Fields(text) {
		for ansi.StringWidth(w) > width {
			if line != "" {
				lines, line = append(lines, line), ""
			}
			at := width
			if i := strings.LastIndexByte(ansi.Cut(w, 0, width), ','); i > 0 {
				at = ansi.StringWidth(w[:i+1])
			}
			lines = append(lines, ansi.Cut(w, 0, at))
			w = ansi.Cut(w, at, ansi.StringWidth(w))
		}
		switch {
		case line == "":
			line = w
		case ansi.StringWidth(line)+1+ansi.StringWidth(w) <= width:
			line += " " + w
		default:
			lines, line = append(lines, line), w
		}
	}
	return append(lines, line)
}

// maxWidth is the width of text's widest line, in cells.
func maxWidth(text string) int {
	n := 0
	for _, l := range strings.Split(text, "\n") {
		n = max(n, ansi.StringWidth(l))
	}
	return n
}

// minCut is the fewest cells a shortened column keeps (see top.GiveWay).
const minCut = top.MinCut

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}

// termWidth is the width of the terminal w writes to, or 0 when it is not one.
func termWidth(w io.Writer) int {
	cols, _ := termSize(w)
	return cols
}

// termSize is the size of the terminal w writes to, 0 by 0 when it is not one.
func termSize(w io.Writer) (cols, rows int) {
	f, ok := w.(*os.File)
	if !ok || !isTerminal(w) {
		return 0, 0
	}
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil {
		return 0, 0
	}
	return int(ws.Col), int(ws.Row)
}
