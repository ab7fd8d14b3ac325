package top

import (
	"fmt"
	"hash/fnv"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/textinput"
	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
)

type styles struct {
	title, section, dim, selected, bad, good, warn lipgloss.Style
	jobs                                           []lipgloss.Style
	other, free                                    lipgloss.Style
	// The keys' help: each key, what it does, and between them.
	helpKey, helpDesc, helpSep lipgloss.Style
}

func newStyles(r *lipgloss.Renderer) styles {
	s := styles{
		title:    r.NewStyle().Bold(true),
		section:  r.NewStyle().Bold(true).Foreground(lipgloss.Color("12")),
		dim:      r.NewStyle().Foreground(lipgloss.Color("245")),
		selected: r.NewStyle().Reverse(true),
		bad:      r.NewStyle().Foreground(lipgloss.Color("9")),
		good:     r.NewStyle().Foreground(lipgloss.Color("10")),
		warn:     r.NewStyle().Foreground(lipgloss.Color("11")),
		other:    r.NewStyle().Foreground(lipgloss.Color("244")),
		free:     r.NewStyle().Foreground(lipgloss.Color("238")),
		helpKey:  r.NewStyle().Foreground(lipgloss.Color("241")),
		helpDesc: r.NewStyle().Foreground(lipgloss.Color("239")),
		helpSep:  r.NewStyle().Foreground(lipgloss.Color("237")),
	}
	for _, c := range []string{"39", "208", "41", "170", "220", "45", "203", "112", "141", "215"} {
		s.jobs = append(s.jobs, r.NewStyle().Foreground(lipgloss.Color(c)))
	}
	return s
}

// jobStyle gives a job the same colour on its card's bar and in its row, refresh
// after refresh.
func (s styles) jobStyle(job string) lipgloss.Style {
	h := fnv.New32a()
	h.Write([]byte(job))
	return s.jobs[h.Sum32()%uint32(len(s.jobs))]
}

// row is a line of a list; key is "" for a line that cannot be selected.
type row struct {
	key, job string
	text     string
	// brief is text in fewer cells, drawn where a screen would cut text short; ""
	// where it has none. Printed, text is whole.
	brief string
	style *lipgloss.Style
}

// section is a titled list.
type section struct {
	title string
	rows  []row
}

func (m model) sections() []section {
	f := strings.ToLower(m.filter.Value())
	match := func(parts ...string) bool {
		if f == "" {
			return true
		}
		return slices.ContainsFunc(parts, func(p string) bool { return strings.Contains(strings.ToLower(p), f) })
	}
	// A list's title counts what it shows: "RUNNING 2 of 7" while a filter hides some.
	count := func(title string, shown, all int) string {
		if f == "" {
			return fmt.Sprintf("%s %d", title, all)
		}
		return fmt.Sprintf("%s %d of %d", title, shown, all)
	}
	if m.ended != nil {
		// The run has ended: how each of its jobs did, and the events its record tells.
		return []section{m.endedSection(match, count), m.eventsSection(match)}
	}
	runs := slices.DeleteFunc(slices.Clone(m.ov.Running), func(r api.RunningJob) bool { return !match(r.Job, r.Name, m.output[r.Job]) })
	waits := slices.DeleteFunc(slices.Clone(m.ov.Queue), func(q api.WaitingJob) bool { return !match(q.Job, q.Name, q.Requeued, q.Reason) })
	runTitle := count("RUNNING", len(runs), len(m.ov.Running))
	queueTitle := count("QUEUE", len(waits), len(m.ov.Queue))
	// The titles head the job column, one cell wider than its rows' ids (a row begins
	// with the selection's mark): a longer title ("RUNNING 12", "QUEUE 3 of 140")
	// widens the column, or the columns after it would stand right of their values.
	title := max(len(runTitle), len(queueTitle)) - 1
	w, gw := max(jobWidth(m.ov), title), gpusWidth(m.ov)
	w, nw, narrow := m.idNameWidths(w, max(title, MinCut), gw)
	// A narrow screen leaves out the declared and learned memory, for the names.
	runLine := func(cells ...any) string {
		if narrow {
			cells = slices.Delete(cells, 8, 10)
			return fmt.Sprintf(runNarrow, cells...)
		}
		return fmt.Sprintf(runFormat, cells...)
	}
	// The names are cut as one column, the running jobs' and the queued ones' alike, so
	// that two that differ only where a cut would fall stay told apart (CutNames).
	var names []string
	for _, r := range runs {
		names = append(names, r.Name)
	}
	for _, q := range waits {
		names = append(names, q.Name)
	}
	cut := m.cuts.of(names, nw)
	var run section
	for i, r := range runs {
		st := m.st.jobStyle(r.Job)
		out := withLatest(r, m.output[r.Job])
		if r.Held {
			// It runs on, but is not started again until released (h).
			out = "held · " + out
		}
		text := runLine(w, CutStart(r.Job, w), nw, cut[i], gw, gpusOf(r), "t"+strconv.Itoa(r.Tier),
			elapsed(m.ov.Time.Sub(r.Started)), Gig(r.DeclaredBytes), Gig(r.LearnedBytes), Gig(r.CurrentBytes), UtilText(r.Util, r.UtilUnmeasured), out)
		run.rows = append(run.rows, row{key: "r/" + r.Job, job: r.Job, text: strings.TrimRight(text, " "), style: &st})
	}
	run.title = runLine(w+1, runTitle, nw, "NAME",
		gw, "GPU", "TIER", "ELAPSED", "DECLARED", "LEARNED", "NOW", "UTIL", "OUTPUT")
	var queue section
	for i, q := range waits {
		state := q.State
		switch {
		case state != "":
		case q.Held:
			state = "held"
		default:
			state = "queued"
		}
		line := func(why string) string {
			return fmt.Sprintf(queueFormat, w, CutStart(q.Job, w), nw, cut[len(runs)+i], state, Gig(q.EstimateBytes), why)
		}
		r := row{key: "q/" + q.Job, job: q.Job, text: line(q.Reason)}
		if q.Requeued != "" {
			// It has run: how that ended comes first, as gpuq status's REASON says it;
			// in brief where the line is cut, or the phrase would hide why it waits.
			r.text = line(q.Requeued + " · " + q.Reason)
			r.brief = line(api.RequeuedBrief(q.Requeued) + " · " + q.Reason)
		}
		queue.rows = append(queue.rows, r)
	}
	queue.title = fmt.Sprintf(queueFormat, w+1, queueTitle, nw, "NAME", "STATE", "ESTIMATE", "WHY IT WAITS")
	return []section{run, queue, m.eventsSection(match)}
}

// eventsSection lists the last events that match, newest first.
func (m model) eventsSection(match func(parts ...string) bool) section {
	events := section{title: "EVENTS"}
	for i := len(m.ov.Events) - 1; i >= 0; i-- { // newest first
		e := m.ov.Events[i]
		if !match(e.Job, e.Kind, e.Message) {
			continue
		}
		r := row{text: eventText(e), style: m.kindStyle(e.Kind)}
		if !strings.HasPrefix(e.Job, "GPU ") {
			r.key, r.job = fmt.Sprintf("e/%s/%d/%d", e.Job, e.Attempt, e.Time.UnixNano()), e.Job
		}
		events.rows = append(events.rows, r)
	}
	return events
}

// runFormat lays out a running job: job, name, cards, tier, elapsed, declared, learned
// and current memory, its shape's learned utilization, its output's last line;
// runNarrow the same less the declared and learned memory; queueFormat a queued one:
// job, name, state, estimate and why it waits.
const (
	runFormat   = "%-*s %-*s %-*s %-4s %7s %8s %7s %6s %4s  %s"
	runNarrow   = "%-*s %-*s %-*s %-4s %7s %6s %4s  %s"
	queueFormat = "%-*s %-*s %-7s %8s  %s"
)

// runFixed is the cells a running job's line takes but for its id, name, cards and
// output; runNarrowFixed the same in runNarrow.
const (
	runFixed       = 1 + 1 + 1 + 4 + 1 + 7 + 1 + 8 + 1 + 7 + 1 + 6 + 1 + 4 + 2
	runNarrowFixed = runFixed - (8 + 1) - (7 + 1)
)

// gpusOf names a running job's cards as the cards' rows do: "0,1", or "node7:0,1" on a
// worker.
func gpusOf(r api.RunningJob) string { return plans.Cards(r.Worker, r.GPUs) }

// gpusWidth is the width of the cards column: the longest cards shown, at least 4. A
// worker's cards are named by its host name (gpu-node-12:3), which a fixed width would
// let push the columns after it out of line.
func gpusWidth(ov api.Overview) int {
	w := 4
	for _, r := range ov.Running {
		w = max(w, ansi.StringWidth(gpusOf(r)))
	}
	return w
}

// UtilText is how much of a card's compute a shape keeps busy, as learned: "45%"; "all?"
// where it is counted as the whole card for want of a measurement (unmeasured), which a
// measured 100% is not; "-" for none yet. gpuq status and top say it alike.
func UtilText(u *float64, unmeasured bool) string {
	switch {
	case u == nil:
		return "-"
	case unmeasured:
		return "all?"
	}
	return fmt.Sprintf("%.0f%%", 100**u)
}

// idNameWidths are the widths of the id column, of width w and no narrower than least,
// and of the name column beside cards of width gw: the longest name shown, but on a
// screen at most half of what a running job's line leaves past its other columns (its
// output needs the rest); names longer lose their keys before their values (CutName).
// A name's first nameFirst cells come before the other columns: where the declared and
// learned memory would cut the names to fewer beside ids cut to least (ssh's 80
// columns), they give way (narrow): names tell the points apart, and gpuq status ID
// shows each attempt's estimate and peak. Then ids give way, losing their start
// (GiveWay, as gpuq status's and run's tables do): a sweep's jobs share it, and the
// names are what tell them apart; an id takes what the screen has left, whole where it
// fits. The rest of a name comes last: it takes what room is left, whole on a screen
// wide enough.
func (m model) idNameWidths(w, least, gw int) (idWidth, nameWidth int, narrow bool) {
	n := 4
	for _, r := range m.ov.Running {
		n = max(n, ansi.StringWidth(r.Name))
	}
	for _, q := range m.ov.Queue {
		n = max(n, ansi.StringWidth(q.Name))
	}
	if m.width <= 0 {
		return w, n, false
	}
	first := min(n, nameFirst)
	fits := func(w, fixed, want int) int { return max(min(want, (m.width-w-gw-fixed)/2), 4) }
	fixed := runFixed
	if fits(min(w, least), runFixed, first) < first {
		fixed, narrow = runNarrowFixed, true
	}
	// The name's first cells are whole where w + gw + fixed + 2*first fit the screen.
	widths := []int{w}
	GiveWay(widths, []int{0}, func(int) int { return least }, w+gw+fixed+2*first-m.width)
	return widths[0], fits(widths[0], fixed, n), narrow
}

// nameFirst is the cells of a name that top's lists give room before the declared and
// learned memory and the ids' start (see idNameWidths): enough for a sweep's point,
// the keys of its text values gone, to read whole (sst2,lr=3e-4,seed=87).
const nameFirst = 24

// MinCut is the fewest cells a shortened column keeps: enough to tell its values apart.
const MinCut = 12

// GiveWay narrows the columns of widths named in order, one after the other, each to
// no less than least(column), until they are over cells narrower in all; it returns
// how many cells are still over. gpuq status's and run's tables and top's lists give
// way by it, job ids before names.
func GiveWay(widths, order []int, least func(col int) int, over int) int {
	for _, c := range order {
		if over <= 0 || c >= len(widths) {
			break
		}
		by := min(over, max(widths[c]-least(c), 0))
		widths[c] -= by
		over -= by
	}
	return over
}

// CutStart shortens a job's id to width cells by its start, marked with "…": its
// number, at its end, tells it apart ("…long-name.12").
func CutStart(id string, width int) string {
	n := ansi.StringWidth(id)
	if n <= width || width < 2 {
		return ansi.Truncate(id, width, "…")
	}
	return "…" + tail(id, width-1)
}

// CutName shortens a job's name or point, key=value,... (task=sst2,learning_rate=1e-4),
// to width cells, marked with "…", so that what tells one job from another is the last
// to go: its values, and of a text value its end (glue-sst2 and glue-qnli of one sweep
// share their start, often the sweep's name; their numbers are all they differ by).
// So first the keys of its text values go, as a job's name leaves them out
// (sst2,learning_rate=1e-4), the longest first; then the other keys lose their ends,
// the longest first, down to a letter and "…" (sst2,lea…=1e-4); then its text values
// (not numbers, nor sizes such as 26GiB) lose their starts, the longest first, down to
// "…" and three cells (…qnli,l…=1e-4); then the keys left go, the last first
// (…qnli,1e-4); what is still too long loses its middle. Names of one column that
// this cuts alike (glue-qnli and glue-wnli both …nli) are told apart by CutNames.
func CutName(s string, width int) string { return cutName(s, width, 3) }

// ValuesWidth is the fewest cells CutName cuts a name or point to with every value of
// it whole: the keys of its text values gone, the others down to a letter and "…"
// (glue-sst2,l…=1e-4); its width where that is less. A table gives way elsewhere
// before its names lose their values.
func ValuesWidth(s string) int {
	w := ansi.StringWidth(s)
	n := strings.Count(s, ",")
	for _, p := range strings.Split(s, ",") {
		k, v, keyed, text, _ := partOf(p)
		n += ansi.StringWidth(v)
		if keyed && !text {
			n += min(ansi.StringWidth(k), 2) + 1 // the key, to a letter and "…", and "="
		}
	}
	return min(w, n)
}

// EndsWidth is the fewest cells CutName cuts a name or point to with every number of
// it whole and each text value down to its end (…nli,l…=3e-4,s…=87): what it cuts
// before the keys left go and the middle, which lose what tells jobs apart. Its width
// where that is less.
func EndsWidth(s string) int {
	n := ValuesWidth(s)
	if n == ansi.StringWidth(s) {
		return n
	}
	for _, p := range strings.Split(s, ",") {
		if _, v, _, _, cutStart := partOf(p); cutStart {
			n -= max(ansi.StringWidth(v)-4, 0) // "…" and three cells, as CutName keeps
		}
	}
	return n
}

// cutName is CutName with the cells of a text value's end that it keeps past "…"
// (CutName's three) given: more tell apart values that differ before their last three.
func cutName(s string, width, keep int) string {
	type part struct {
		key, val   string
		keyW, valW int  // as shown; keyW 0 for a part without a key, or whose key went
		text       bool // a value that is no number, whose key may go whole
		cutStart   bool // a text value that may lose its start
	}
	over := ansi.StringWidth(s) - width
	if over <= 0 {
		return s
	}
	var ps []part
	for _, p := range strings.Split(s, ",") {
		k, v, _, text, cutStart := partOf(p)
		ps = append(ps, part{key: k, val: v, keyW: ansi.StringWidth(k), valW: ansi.StringWidth(v), text: text, cutStart: cutStart})
	}
	// widest is the part whose width w is the widest over floor of those ok takes; -1
	// where none is.
	widest := func(w func(*part) int, floor int, ok func(*part) bool) int {
		at := -1
		for i := range ps {
			if ok(&ps[i]) && w(&ps[i]) > floor && (at < 0 || w(&ps[i]) > w(&ps[at])) {
				at = i
			}
		}
		return at
	}
	keyW := func(p *part) int { return p.keyW }
	valW := func(p *part) int { return p.valW }
	textKey := func(p *part) bool { return p.text }
	every := func(*part) bool { return true }
	startCut := func(p *part) bool { return p.cutStart }
	for i := widest(keyW, 0, textKey); over > 0 && i >= 0; i = widest(keyW, 0, textKey) {
		over -= ps[i].keyW + 1 // the key and its "="
		ps[i].keyW = 0
	}
	for i := widest(keyW, 2, every); over > 0 && i >= 0; i = widest(keyW, 2, every) { // a letter and "…": no shorter
		ps[i].keyW--
		over--
	}
	for i := widest(valW, keep+1, startCut); over > 0 && i >= 0; i = widest(valW, keep+1, startCut) { // "…" and keep cells
		ps[i].valW--
		over--
	}
	for i := len(ps) - 1; over > 0 && i >= 0; i-- {
		if ps[i].keyW > 0 {
			over -= ps[i].keyW + 1
			ps[i].keyW = 0
		}
	}
	shown := make([]string, len(ps))
	for i, p := range ps {
		if p.keyW > 0 {
			shown[i] = ansi.Truncate(p.key, p.keyW, "…") + "="
		}
		if n := ansi.StringWidth(p.val); p.valW < n {
			shown[i] += "…" + tail(p.val, p.valW-1)
		} else {
			shown[i] += p.val
		}
	}
	return cutMiddle(strings.Join(shown, ","), width)
}

// nameCuts is the names of top's lists as last cut (see CutNames), to the width they
// were cut to: top draws its lists several times for each overview the daemon sends,
// whose names seldom change between them, and cutting a queue of 100,000 names that a
// cut reads alike takes seconds.
type nameCuts struct {
	width      int
	names, cut []string
}

// of is names cut to width, as they were last where they and the width are the same;
// a nil c keeps nothing.
func (c *nameCuts) of(names []string, width int) []string {
	if c == nil {
		return CutNames(names, width)
	}
	if c.cut == nil || c.width != width || !slices.Equal(c.names, names) {
		c.width, c.names, c.cut = width, names, CutNames(names, width)
	}
	return c.cut
}

// CutNames shortens the names of one column to width cells each, by CutName's stages
// in CutName's order, but taken by the column as a whole, every name alike (see
// NameCut), as gpuq results cuts its points: where one name must lose its keys, every
// name loses them, so that a column does not read sst2,1 above rte,s…=1 (rte,1 fits as
// well), and a column of names that fit whole beside one that does not reads the same
// at every width the others are cut to. Its text values lose their starts no further
// than still tells them apart: a sweep's glue-qnli and glue-wnli both lose theirs to
// …nli, and the column would show two jobs as one, so they keep …qnli, …wnli.
//
// Where even every key gone and the text values down to their ends do not fit, the
// names, their keys gone, are cut one by one as CutName cuts them (their middles), but
// names it would cut alike kept told apart: they keep more of their text values'
// ends, as many cells as it takes; where that is not enough (they differ in what is
// left out whole, or in a middle cut away), each shows where they differ (see
// around). Where width cells cannot tell them apart, they are cut as CutName cuts
// them, as identical names are.
func CutNames(names []string, width int) []string {
	out := make([]string, len(names))
	c, ok := columnCut(names, width)
	if ok {
		for i, n := range names {
			out[i] = c.Cut(n)
		}
		return out
	}
	// What the column cut could not fit: the names without their keys, one by one.
	names = slices.Clone(names)
	for i, n := range names {
		names[i] = NameCut{NoKeys: true}.Cut(n)
	}
	for i, n := range names {
		out[i] = CutName(n, width)
	}
	// The names cut alike are cut again together; one of them may then read as a name
	// CutName cut does, which joins them, until none does or the width cannot.
	var alike []string
	in := map[string]bool{} // the names in alike: a sweep's thousands may read alike
	for {
		more := false
		for _, g := range readAlike(names, out) {
			for _, n := range g {
				if !in[n] {
					in[n] = true
					alike, more = append(alike, n), true
				}
			}
		}
		if !more {
			return out
		}
		cut, ok := apart(alike, width)
		if !ok {
			return out
		}
		for i, n := range names {
			if c, ok := cut[n]; ok {
				out[i] = c
			}
		}
	}
}

// readAlike groups the distinct names whose cuts (out, index for index) read the same,
// in the order they come.
func readAlike(names, out []string) [][]string {
	by := map[string][]string{}
	seen := map[string]bool{} // a name comes once in a group, however often it is listed
	var order []string
	for i, n := range names {
		if seen[n] {
			continue
		}
		seen[n] = true
		c := out[i]
		if len(by[c]) == 0 {
			order = append(order, c)
		}
		by[c] = append(by[c], n)
	}
	var groups [][]string
	for _, c := range order {
		if len(by[c]) > 1 {
			groups = append(groups, by[c])
		}
	}
	return groups
}

// apart cuts distinct names to width cells so that they read differently: each as
// CutName does but keeping more of its text values' ends, or, where no number of
// cells does, around where they differ; false where neither tells them all apart.
func apart(names []string, width int) (map[string]string, bool) {
	longest := 0
	for _, n := range names {
		longest = max(longest, ansi.StringWidth(n))
	}
	for keep := 4; keep < min(width, longest); keep++ {
		cut := map[string]string{}
		for _, n := range names {
			cut[n] = cutName(n, width, keep)
		}
		if distinct(cut) {
			return cut, true
		}
	}
	cut := around(names, width)
	return cut, distinct(cut)
}

// distinct reports whether no two names are cut alike.
func distinct(cut map[string]string) bool {
	seen := map[string]bool{}
	for _, c := range cut {
		if seen[c] {
			return false
		}
		seen[c] = true
	}
	return true
}

// around cuts distinct names to width cells around where they differ: what lies
// between the start they all share and the end they all share, with as much of either
// as fits, "…" for the rest; where that is too long, it loses its middle. Those that
// still read the same share more of their start or end, and are cut again around
// where they differ in turn (which may make them read as others do: see apart).
func around(names []string, width int) map[string]string {
	pre, suf := common(names)
	cut := map[string]string{}
	by := map[string][]string{}
	for _, n := range names {
		r := []rune(n)
		c := span(r, pre, len(r)-suf, width)
		cut[n] = c
		by[c] = append(by[c], n)
	}
	for _, same := range by {
		if p, s := common(same); len(same) > 1 && (p > pre || s > suf) {
			maps.Copy(cut, around(same, width))
		}
	}
	return cut
}

// span is r[a:b] in width cells, widened by what is around it while it fits, or
// losing its middle where it does not; "…" marks what is left out before and after.
func span(r []rune, a, b, width int) string {
	cells := func(a, b int) int {
		n := ansi.StringWidth(string(r[a:b]))
		if a > 0 {
			n++
		}
		if b < len(r) {
			n++
		}
		return n
	}
	show := func(a, b int, mid string) string {
		if a > 0 {
			mid = "…" + mid
		}
		if b < len(r) {
			mid += "…"
		}
		return mid
	}
	if cells(a, b) > width {
		room := width - (cells(a, b) - ansi.StringWidth(string(r[a:b])))
		if room < 1 {
			return ansi.Truncate(string(r), width, "…")
		}
		return show(a, b, cutMiddle(string(r[a:b]), room))
	}
	for grew := true; grew; {
		grew = false
		if b < len(r) && cells(a, b+1) <= width {
			b, grew = b+1, true
		}
		if a > 0 && cells(a-1, b) <= width {
			a, grew = a-1, true
		}
	}
	return show(a, b, string(r[a:b]))
}

// common is how many runes all of names begin with, and how many of the rest they all
// end with.
func common(names []string) (pre, suf int) {
	rs := make([][]rune, len(names))
	short := -1
	for i, n := range names {
		rs[i] = []rune(n)
		if short < 0 || len(rs[i]) < short {
			short = len(rs[i])
		}
	}
	same := func(at func(r []rune) rune) bool {
		return !slices.ContainsFunc(rs, func(r []rune) bool { return at(r) != at(rs[0]) })
	}
	for pre < short && same(func(r []rune) rune { return r[pre] }) {
		pre++
	}
	for suf < short-pre && same(func(r []rune) rune { return r[len(r)-1-suf] }) {
		suf++
	}
	return pre, suf
}

// cutMiddle shortens s to width cells by its middle, marked with "…".
func cutMiddle(s string, width int) string {
	n := ansi.StringWidth(s)
	if n <= width || width < 2 {
		return ansi.Truncate(s, width, "…")
	}
	keep := width - 1
	head := (keep + 1) / 2
	return ansi.Cut(s, 0, head) + "…" + tail(s, keep-head)
}

// tail is the end of s in at most width cells. ansi.Cut from the left keeps a wide
// character (日, two cells) that its edge splits, a cell more than asked: a name then
// ran past its column, or lost a key to make room.
func tail(s string, width int) string {
	n := ansi.StringWidth(s)
	for left := n - width; left < n; left++ {
		if t := ansi.Cut(s, left, n); ansi.StringWidth(t) <= width {
			return t
		}
	}
	return ""
}

func (m model) kindStyle(kind string) *lipgloss.Style {
	switch {
	case strings.Contains(kind, "oom"), kind == "failed", kind == "timed-out", kind == "out-of-service", kind == "lost":
		return &m.st.bad
	case kind == "succeeded":
		return &m.st.good
	case kind == "requeued", kind == "timing-out", kind == "stopping-early", kind == "stopped":
		return &m.st.warn
	}
	return nil
}

// eventText is an event's line, after its time, as the daemon's log writes it.
func eventText(e api.Event) string {
	return e.Time.Format("15:04:05") + " " + scheduler.Event(e).Text()
}

// jobWidth is the width of the job column: the longest id shown, at least 8 cells. A
// screen without room for it narrows the column (idNameWidths), and the longer ids
// lose their start (CutStart); one with room shows them whole.
func jobWidth(ov api.Overview) int {
	w := 8
	for _, r := range ov.Running {
		w = max(w, len(r.Job))
	}
	for _, q := range ov.Queue {
		w = max(w, len(q.Job))
	}
	return w
}

// selectable lists the keys of the rows that can be selected, in order.
func (m model) selectable() []row {
	var out []row
	for _, s := range m.sections() {
		for _, r := range s.rows {
			if r.key != "" {
				out = append(out, r)
			}
		}
	}
	return out
}

func (m *model) move(by int) {
	rows := m.selectable()
	if len(rows) == 0 {
		return
	}
	i := slices.IndexFunc(rows, func(r row) bool { return r.key == m.sel })
	m.sel = rows[min(max(i+by, 0), len(rows)-1)].key
	m.trailing = false
}

// keepSelection keeps the selected row where it still is; where it is gone, the
// selection stays with its job in the list it has moved to (a queued job that started,
// a running one that ended, among the events), so that the next key acts on the job the
// user chose; otherwise it goes to the first row. A selection put in EVENTS so, not by
// a key, goes to the first row once newer events push it out of the list's lines: the
// list keeps showing the newest events, not "… 11 above" and an event long past.
func (m *model) keepSelection() {
	rows := m.selectable()
	if slices.ContainsFunc(rows, func(r row) bool { return r.key == m.sel }) {
		if m.trailing && m.pushedOut() {
			m.sel = rows[0].key
		}
		return
	}
	m.trailing = true
	job := ""
	if parts := strings.SplitN(m.sel, "/", 3); len(parts) > 1 {
		job = parts[1]
	}
	m.sel = ""
	if i := slices.IndexFunc(rows, func(r row) bool { return job != "" && r.job == job }); i >= 0 {
		m.sel = rows[i].key
	} else if len(rows) > 0 {
		m.sel = rows[0].key
	}
}

// pushedOut reports whether the selection is a row of EVENTS that the list's lines,
// showing its newest rows, leave out.
func (m model) pushedOut() bool {
	secs := m.sections()
	events := secs[len(secs)-1]
	i := slices.IndexFunc(events.rows, func(r row) bool { return r.key == m.sel })
	if i < 0 {
		return false
	}
	n := shares(secs, m.listLines())[len(secs)-1]
	end := min(n, len(events.rows))
	if len(events.rows) > n && n > 0 {
		_, end = window(len(events.rows), n, 0)
	}
	return i >= end
}

func (m model) selectedJob() string {
	for _, r := range m.selectable() {
		if r.key == m.sel {
			return r.job
		}
	}
	return ""
}

// View is the screen, full-screen, with the terminal's cursor where a line is typed
// in the footer, the screen's last line.
func (m model) View() tea.View {
	screen := m.screen()
	v := tea.NewView(screen)
	v.AltScreen = true
	if in := m.typing(); in != nil {
		_, x := inputLine(*in, m.width)
		v.Cursor = tea.NewCursor(x, strings.Count(screen, "\n"))
		v.Cursor.Blink = false
	}
	return v
}

// typing is the line being typed, if one is: the filter, or the card to drain.
func (m *model) typing() *textinput.Model {
	switch m.mode {
	case filtering:
		return &m.filter
	case draining:
		return &m.card
	}
	return nil
}

// inputLine is a prompt and what is typed after it in width cells, and the cell of
// the cursor: all of it where it fits, with a cell for the cursor past its end; else
// what is typed scrolled to the cursor, up to a third of the room kept for what
// follows it, the text before it as far back as the rest goes, so that the cursor and
// what is typed around it stay in view (a line cut at the screen's edge hid what was
// typed past it). Cells, not characters: a wide character takes two.
func inputLine(in textinput.Model, width int) (line string, cursor int) {
	runes := []rune(in.Value())
	pos := min(in.Position(), len(runes))
	before, after := string(runes[:pos]), string(runes[pos:])
	room := max(width-ansi.StringWidth(in.Prompt)-1, 1) // the cursor's cell past the end
	if ansi.StringWidth(before)+ansi.StringWidth(after) > room {
		ahead := min(ansi.StringWidth(after), room/3)
		before = tail(before, room-ahead)
		after = ansi.Truncate(after, room-ansi.StringWidth(before), "")
	}
	return in.Prompt + before + after, ansi.StringWidth(in.Prompt) + ansi.StringWidth(before)
}

// screen is what the screen shows.
func (m model) screen() string {
	if m.mode == reading {
		head := m.st.title.Render("log of "+m.logJob) + m.st.dim.Render("  "+m.logPath)
		return fit(head, m.width) + "\n" + m.logs.View() + "\n" + fit(m.st.dim.Render("↑↓ pgup pgdn scroll · esc back"), m.width)
	}
	lines := []string{m.header()}
	if said := m.trouble(); said != "" {
		lines = append(lines, said)
	}
	// The title, the cards, a list's title and its row, and the keys: on a screen with
	// fewer rows, the lines past its bottom would push the title off its top.
	if need := len(lines) + len(m.ov.GPUs) + 3; m.height > 0 && m.height < need {
		return m.tooSmall(need)
	}
	cols := m.cardColumns()
	for _, c := range m.ov.GPUs {
		lines = append(lines, m.cardLine(c, m.width, cols))
	}
	footer := m.footer()
	lines = append(lines, m.lists(m.listLines())...)
	for len(lines) < m.height-1 {
		lines = append(lines, "")
	}
	lines = append(lines, footer)
	for i, l := range lines {
		lines[i] = fit(l, m.width)
	}
	return strings.Join(lines, "\n")
}

// listLines is how many lines the lists have on the screen: what the title, the
// error, the cards and the keys leave.
func (m model) listLines() int {
	n := 1 + len(m.ov.GPUs) + 1
	if m.err != nil || m.ended != nil {
		n++
	}
	return m.height - n
}

// trouble is the line under the title: that the run watched has ended, or why the last
// reading failed; "" where it did not. A gpuq run is no daemon, and is not called one.
func (m model) trouble() string {
	watched := "the daemon"
	if m.opts.Run != nil {
		watched = "the gpuq run"
	}
	switch {
	case m.ended != nil:
		return m.endLine()
	case m.err != nil && api.Unanswered(m.err):
		// Said in the width there is: the reason, not the socket's path and the URL.
		said := "the daemon does not answer (stopped, or restarting); top asks again until it does"
		switch {
		case m.opts.Run != nil:
			// Ending, most likely: the next reading says so.
			said = "the gpuq run does not answer; top asks again"
		case m.stopped != nil:
			how := ""
			if m.stopped.asked {
				how = " (gpuq daemon --stop)"
			}
			said = fmt.Sprintf("the daemon (pid %d) stopped at %s%s; top asks again until one runs", m.stopped.pid, m.stopped.at.Format("15:04:05"), how)
		}
		if m.width > 0 {
			said = fit(said, m.width)
		}
		return m.st.bad.Render(said)
	case m.err != nil:
		return m.st.bad.Render("cannot read " + watched + ": " + m.err.Error())
	}
	return ""
}

// tooSmall is the screen where it has fewer rows than the need of a view: the title,
// and that it is too small, in as many of its rows as there are. An open prompt, or
// the answer to one, keeps the last row whatever else goes: what the user types, and
// what came of it, must be seen (a cancel asked for its y out of sight).
func (m model) tooSmall(need int) string {
	said := fmt.Sprintf("too small: top needs %d rows here, the terminal has %d", need, m.height)
	lines := []string{m.header(), m.st.warn.Render(said)}
	for len(lines) < m.height {
		lines = append(lines, "")
	}
	lines = lines[:m.height]
	if m.asking() || m.status != "" {
		lines[len(lines)-1] = m.footer()
	}
	for i, l := range lines {
		lines[i] = fit(l, m.width)
	}
	return strings.Join(lines, "\n")
}

func (m model) header() string {
	// That the cards are simulated comes first: a long title is cut before the clock.
	left := strings.Join(m.titleParts(), " · ")
	right := m.clock()
	if m.width > 0 { // the clock stays in the corner: the title gives way
		left = fit(left, max(m.width-lipgloss.Width(right)-1, 1))
	}
	gap := max(m.width-lipgloss.Width(left)-lipgloss.Width(right), 1)
	return m.st.title.Render(left) + strings.Repeat(" ", gap) + right
}

// titleParts are what the title line says, in order: gpuq top, that the cards are
// simulated, and whose view it is (the daemon on its state directory, a gpuq run).
func (m model) titleParts() []string {
	parts := []string{"gpuq top"}
	if m.ov.Simulated != "" {
		parts = append(parts, m.st.warn.Render("SIMULATED GPUs "+m.ov.Simulated))
	}
	return append(parts, m.opts.Title)
}

// clock is the time of the overview shown, once one is read; marked where it no
// longer goes on: when the run watched ended, or, while the daemon does not answer,
// when it last did.
func (m model) clock() string {
	switch {
	case m.ended != nil:
		return m.st.warn.Render("ended " + m.ended.at.Format("15:04:05"))
	case !m.read:
		return ""
	case m.err != nil:
		return m.st.warn.Render("as of " + m.ov.Time.Format("15:04:05"))
	}
	return m.ov.Time.Format("15:04:05")
}

// printedHeader is the title line of a view printed width cells wide, where the title
// and the clock do not fit on one line: the title is not cut (a state directory's path
// is copied from it), so it breaks between its parts, the clock in the corner of the
// first line, as on a terminal, and each line after it as many parts as fit (a part
// wider than the line alone on its own). A line longer than the width wrapped the
// clock onto a line of its own where gpuq top | head reached a terminal.
func (m model) printedHeader(width int) []string {
	parts, clock := m.titleParts(), m.clock()
	n := 1
	for n < len(parts) && lipgloss.Width(strings.Join(parts[:n+1], " · "))+1+lipgloss.Width(clock) <= width {
		n++
	}
	first := strings.Join(parts[:n], " · ")
	lines := []string{m.st.title.Render(first) + strings.Repeat(" ", max(width-lipgloss.Width(first)-lipgloss.Width(clock), 1)) + clock}
	for rest := parts[n:]; len(rest) > 0; {
		n = 1
		for n < len(rest) && lipgloss.Width(strings.Join(rest[:n+1], " · ")) <= width {
			n++
		}
		lines = append(lines, m.st.title.Render(strings.Join(rest[:n], " · ")))
		rest = rest[n:]
	}
	return lines
}

// lists draws the three sections in at most budget lines: each gets at least its
// title and a row where it has one, then lines go where the rows are; a list longer
// than its lines scrolls to keep the selection in view.
func (m model) lists(budget int) []string {
	secs := m.sections()
	give := shares(secs, budget)
	var out []string
	for i, s := range secs {
		if budget-len(out) <= 0 {
			break
		}
		out = append(out, m.st.section.Render(s.title))
		out = append(out, m.window(s.rows, min(give[i], budget-len(out)))...)
	}
	return out
}

// shares is how many lines of budget each list's rows get: at least one where it has
// one, each list's title taking a line, then the lines left go where the rows are.
func shares(secs []section, budget int) []int {
	want := make([]int, len(secs))
	give := make([]int, len(secs))
	left := budget
	for i, s := range secs {
		want[i] = len(s.rows)
		give[i] = min(want[i], 1)
		left -= 1 + give[i]
	}
	for left > 0 {
		more := false
		for i := range secs {
			if left > 0 && give[i] < want[i] {
				give[i]++
				left--
				more = true
			}
		}
		if !more {
			break
		}
	}
	return give
}

// window draws a list's rows in n lines: all of them, or those around the selection,
// with a line for the rows left out above and one for those below. The selected row
// is always among those drawn: a key acts on the job it shows.
func (m model) window(rows []row, n int) []string {
	if n <= 0 {
		return nil
	}
	start, end := 0, min(n, len(rows))
	if len(rows) > n {
		sel := max(0, slices.IndexFunc(rows, func(r row) bool { return r.key != "" && r.key == m.sel }))
		start, end = window(len(rows), n, sel)
	}
	var out []string
	dim := func(text string) string { return m.st.dim.Render(" " + text) }
	// Fewer than 3 lines hold the selected row and no line for those left out.
	marks := n >= 3
	if start > 0 && marks {
		out = append(out, dim(fmt.Sprintf("… %d above", start)))
	}
	for _, r := range rows[start:end] {
		text := r.text
		if r.brief != "" && m.width > 0 && 1+ansi.StringWidth(text) > m.width {
			text = r.brief
		}
		line := " " + text
		switch {
		case r.key != "" && r.key == m.sel:
			line = m.st.selected.Render(fit(">"+text, m.width))
		case r.style != nil:
			line = r.style.Render(line)
		}
		out = append(out, line)
	}
	if end < len(rows) && marks {
		out = append(out, dim(fmt.Sprintf("… %d more", len(rows)-end)))
	}
	return out
}

// window is which of rows (more than n) to draw in n lines, from start to end, so that
// row sel is among them: a line goes to those left out above (start > 0) and one to
// those below (end < rows), where n leaves room for them beside the selected row.
func window(rows, n, sel int) (start, end int) {
	if n < 3 {
		start = max(0, sel-n+1)
		return start, start + n
	}
	lines := func(s, e int) int {
		l := e - s
		if s > 0 {
			l++
		}
		if e < rows {
			l++
		}
		return l
	}
	for end < rows && lines(0, end+1) <= n {
		end++
	}
	for sel >= end {
		end++
		for lines(start, end) > n {
			start++
		}
	}
	return start, end
}

func (m model) footer() string {
	switch m.mode {
	case filtering, draining:
		line, _ := inputLine(*m.typing(), m.width)
		return line
	case confirming:
		return m.st.warn.Render(m.confirmText())
	}
	if m.status != "" {
		return m.status
	}
	help := keys.ShortHelp()
	if m.ended != nil {
		help = keys.endedHelp()
	}
	if f := m.filter.Value(); f != "" {
		said := "filter /" + f + " (esc clears) · "
		return m.st.dim.Render(said) + m.shortHelp(help, max(m.width-lipgloss.Width(said), 1))
	}
	return m.shortHelp(help, m.width)
}

// shortHelp is the keys' help on one line of width cells: as many keys as fit, and
// " …" after them where it fits and a key more did not.
func (m model) shortHelp(bindings []key.Binding, width int) string {
	var b strings.Builder
	used := 0
	for _, kb := range bindings {
		if !kb.Enabled() {
			continue
		}
		sep := ""
		if used > 0 {
			sep = "  "
		}
		h := kb.Help()
		if w := lipgloss.Width(sep + h.Key + " " + h.Desc); used+w <= width {
			b.WriteString(m.st.helpSep.Render(sep) + m.st.helpKey.Render(h.Key) + " " + m.st.helpDesc.Render(h.Desc))
			used += w
			continue
		}
		if used+2 < width {
			b.WriteString(m.st.helpSep.Render(" …"))
		}
		break
	}
	return b.String()
}

// asking reports whether a prompt is open: the filter, the card to drain, a cancel's
// confirmation.
func (m model) asking() bool {
	return m.mode == filtering || m.mode == draining || m.mode == confirming
}

// confirmText asks whether to cancel the job, in the width there is: the question and
// its keys before why it is asked, and the job's id losing its start before the keys
// go (a line cut at its end hid the "(y/n)").
func (m model) confirmText() string {
	whole := fmt.Sprintf("cancel %s? a running trainer is stopped (y/n)", m.doomed)
	short := fmt.Sprintf("cancel %s? (y/n)", m.doomed)
	switch {
	case m.width <= 0 || ansi.StringWidth(whole) <= m.width:
		return whole
	case ansi.StringWidth(short) <= m.width:
		return short
	}
	return fmt.Sprintf("cancel %s? (y/n)", CutStart(m.doomed, max(m.width-len("cancel ? (y/n)"), 2)))
}

// cardLine is a card on one line: its memory as a bar split by holder, then used and
// total, slots, utilisation and temperature, in the columns of every card so that their
// bars line up.
func (m model) cardLine(c api.GPUView, width int, cols cardColumns) string {
	label := fmt.Sprintf("GPU %-*s ", cols.name, cardID(c))
	switch {
	case c.Fault != "":
		return label + m.st.bad.Render("OUT OF SERVICE: "+c.Fault)
	case c.WorkerAway != nil:
		return label + m.st.warn.Render(awayText(c, m.ov.Time))
	}
	stats := m.stats(c)
	w := max(width-lipgloss.Width(label)-cols.stats, 10)
	return label + m.bar(c, w) + stats
}

// awayText says that a card's worker is away, since when, and what becomes of its jobs
// (there is no reading of its memory to draw).
func awayText(c api.GPUView, now time.Time) string {
	s := "AWAY: not heard from " + c.WorkerAway.SinceText()
	if len(c.Jobs) == 0 {
		return s
	}
	jobs := make([]string, len(c.Jobs))
	for i, h := range c.Jobs {
		jobs[i] = h.Job
	}
	if left := c.WorkerAway.Until.Sub(now); left > 0 {
		return s + fmt.Sprintf("; %s run again elsewhere unless it is back within %s", strings.Join(jobs, ", "), elapsed(left))
	}
	return s + "; " + strings.Join(jobs, ", ") + " run again elsewhere"
}

// stats is what follows a card's bar.
func (m model) stats(c api.GPUView) string {
	// Jobs on the card, of its slots: 1/2; with no limit, the jobs alone.
	slots := strconv.Itoa(c.Busy)
	if c.Slots >= 0 {
		slots += "/" + strconv.Itoa(c.Slots)
	}
	s := fmt.Sprintf(" %5s/%-5s %3s %4s %4s", Gig(c.UsedBytes), Gig(c.TotalBytes), slots, Percent(c.Utilization), Celsius(c.Temperature))
	if c.Drained {
		s += " " + m.st.warn.Render("DRAINED")
	}
	return s
}

// cardID names a card as people write it: "3", or "node7:3" on a worker.
func cardID(c api.GPUView) plans.CardID {
	return plans.CardID{Worker: c.Worker, Index: c.Index}
}

// cardColumns are the widths of the longest card name (at least 2) and of the longest
// stats, so that the bars of every card line up.
type cardColumns struct{ name, stats int }

func (m model) cardColumns() cardColumns {
	cols := cardColumns{name: 2}
	for _, c := range m.ov.GPUs {
		cols.name = max(cols.name, len(cardID(c).String()))
		cols.stats = max(cols.stats, lipgloss.Width(m.stats(c)))
	}
	return cols
}

// bar draws a card's memory in w cells: each job's use (█) and what is reserved for it
// beyond that (▒) in the job's colour, other processes (▓), free memory (░), and the
// headroom kept free at its end (·).
func (m model) bar(c api.GPUView, w int) string {
	if c.TotalBytes <= 0 {
		return m.st.free.Render(strings.Repeat("░", w))
	}
	cells := func(b int64) int { return int((b*int64(w) + c.TotalBytes/2) / c.TotalBytes) }
	var b strings.Builder
	n := 0
	put := func(st lipgloss.Style, ch string, k int) {
		k = min(k, w-n)
		if k > 0 {
			b.WriteString(st.Render(strings.Repeat(ch, k)))
			n += k
		}
	}
	for _, s := range c.Jobs {
		st := m.st.jobStyle(s.Job)
		put(st, "█", cells(s.UsedBytes))
		put(st, "▒", cells(max(s.ReservedBytes-s.UsedBytes, 0)))
	}
	put(m.st.other, "▓", cells(c.OtherBytes))
	head := cells(c.HeadroomBytes)
	put(m.st.free, "░", w-n-head)
	put(m.st.free, "·", w-n)
	return b.String()
}

// Print writes the overview once as plain text, for a pipe or a file: every card with
// its jobs, every running and queued job, and the last events (of opts.Sweep's jobs,
// where given), each line whole; width sizes the bars.
func Print(w io.Writer, ov api.Overview, opts Options, width int) error {
	m := newModel(opts, lipgloss.NewRenderer(w))
	m.ov, m.read, m.width = ofSweep(readable(ov), opts.Sweep), true, width
	for _, run := range ov.Running {
		m.output[run.Job] = lastLine(run.Log)
	}
	return m.print(w)
}

// PrintEnded writes, where err (an overview's) says that the gpuq run watched has
// ended, how its jobs ended, as gpuq top shows it then, once as plain text as Print
// does; false where err says no such thing.
func PrintEnded(w io.Writer, err error, opts Options, width int) (bool, error) {
	end := endOf(err)
	if end == nil {
		return false, nil
	}
	m := newModel(opts, lipgloss.NewRenderer(w))
	m.width = width
	m.endRun(end)
	return true, m.print(w)
}

// print writes the view once as plain text (see Print).
func (m model) print(w io.Writer) error {
	width := m.width
	// Printed, the title is whole (a state directory's path, say): the clock is in the
	// corner where it fits beside it, else the title breaks between its parts.
	lines := []string{m.header()}
	unlimited := m
	unlimited.width = 0
	if whole := unlimited.header(); lipgloss.Width(whole) > width {
		lines = m.printedHeader(width)
	}
	if m.ended != nil {
		lines = append(lines, m.endLine())
	}
	cols := m.cardColumns()
	for _, c := range m.ov.GPUs {
		lines = append(lines, m.cardLine(c, width, cols))
		if c.Fault != "" || c.WorkerAway != nil {
			continue
		}
		var parts []string
		for _, s := range c.Jobs {
			parts = append(parts, fmt.Sprintf("%s %s of %s", s.Job, Gig(s.UsedBytes), Gig(s.ReservedBytes)))
		}
		if c.OtherBytes > 0 {
			parts = append(parts, "other processes "+Gig(c.OtherBytes))
		}
		if len(parts) > 0 {
			lines = append(lines, "       "+strings.Join(parts, ", "))
		}
	}
	for _, s := range m.sections() {
		lines = append(lines, s.title)
		for _, r := range s.rows {
			lines = append(lines, " "+r.text)
		}
	}
	_, err := io.WriteString(w, strings.Join(lines, "\n")+"\n")
	return err
}

// fit cuts a line to the width of the screen.
func fit(s string, width int) string { return ansi.Truncate(s, width, "…") }

// Gig is a size in GiB to one decimal ("14.0G"), for columns that must stay narrow;
// "-" for none.
func Gig(b int64) string {
	if b <= 0 {
		return "-"
	}
	return strconv.FormatFloat(float64(b)/(1<<30), 'f', 1, 64) + "G"
}

// Percent is a share NVML gave, "-" for none.
func Percent(v int) string {
	if v < 0 {
		return "-"
	}
	return strconv.Itoa(v) + "%"
}

// Celsius is a temperature NVML gave, "-" for none.
func Celsius(v int) string {
	if v < 0 {
		return "-"
	}
	return strconv.Itoa(v) + "°C"
}

// elapsed prints a duration the way top's columns have room for: 59s, 12m05s, 3h02m.
func elapsed(d time.Duration) string {
	d = max(d, 0).Round(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
}
