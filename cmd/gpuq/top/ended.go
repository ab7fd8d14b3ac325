package top

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"time"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/state"
)

// runEnd is how the gpuq run top watched ended: the record it left as it ended (see
// api.Run.Record), which says how each of its jobs ended, as gpuq results and status
// read it; err where it left none (killed) or it cannot be read.
type runEnd struct {
	run api.Run
	rec api.RunRecord
	err error
	// at is when it ended: as its record says, else (a record from a gpuq that kept no
	// time, or none) when top saw it end.
	at time.Time
}

// endOf is the end of the gpuq run that err says has ended, with the record it left;
// nil where err says no such thing. A run leaves its record before it stops answering,
// so that the record is there once its end is seen.
func endOf(err error) *runEnd {
	var ended api.RunEndedError
	if !errors.As(err, &ended) {
		return nil
	}
	rec, rerr := ended.Run.ReadRecord()
	rec.Jobs = each(rec.Jobs, func(j *api.Job) {
		j.Name, j.Reason, j.Error = printable(j.Name), printable(j.Reason), printable(j.Error)
		j.Attempts = each(j.Attempts, func(a *api.AttemptSummary) { a.Outcome = printable(a.Outcome) })
	})
	rec.Events = each(rec.Events, func(ev *api.Event) { ev.Message = printable(ev.Message) })
	at := rec.Ended
	if at.IsZero() {
		at = time.Now()
	}
	return &runEnd{run: ended.Run, rec: rec, err: rerr, at: at}
}

// endRun puts the view at the run's end: its jobs as they ended in place of the cards
// (no longer the run's to read) and the running and queued jobs (stale from the last
// reading); its latest events as it kept them in its record as it ended, in place of
// the last read, which miss its last ends (a record from a gpuq that kept none leaves
// the last read). Nothing is read again: the run does not come back.
func (m *model) endRun(e *runEnd) {
	m.ended, m.err = e, nil
	m.ov.GPUs, m.ov.Running, m.ov.Queue = nil, nil, nil
	if len(e.rec.Events) > 0 {
		m.ov.Events = e.rec.Events
	}
	m.keepSelection()
}

// endLine says, in the line under the title, that the run has ended, when, and how its
// jobs did, as gpuq run's own summary counts them; and how to go.
func (m model) endLine() string {
	e := m.ended
	at := e.at.Format("15:04:05")
	what := fmt.Sprintf("the gpuq run of %s ended", e.run.Sweep)
	if e.err != nil {
		why := "it cannot be read: " + e.err.Error()
		if errors.Is(e.err, fs.ErrNotExist) {
			why = "it was killed, or ended before it kept one"
		}
		return m.st.bad.Render(fmt.Sprintf("%s at %s and left no record of how its jobs ended (%s); its logs are in its run directory · q quits",
			what, at, why))
	}
	counts := map[string]int{}
	for _, j := range e.rec.Jobs {
		counts[j.State]++
	}
	said := fmt.Sprintf("%d succeeded, %d failed, %d cancelled", counts[string(state.JobSucceeded)], counts[string(state.JobFailed)], counts[string(state.JobCancelled)])
	if n := counts[string(state.JobStopped)]; n > 0 {
		said += fmt.Sprintf(", %d stopped early", n)
	}
	style := m.st.good
	if counts[string(state.JobFailed)] > 0 || counts[string(state.JobCancelled)] > 0 {
		style = m.st.bad
	}
	if left := len(e.rec.Jobs) - counts[string(state.JobSucceeded)] - counts[string(state.JobFailed)] -
		counts[string(state.JobCancelled)] - counts[string(state.JobStopped)]; left > 0 {
		// Ctrl-C, or the terminal closing, stopped it: the rest never ended.
		what = fmt.Sprintf("the gpuq run of %s was stopped", e.run.Sweep)
		said += fmt.Sprintf(", %d not finished", left)
		style = m.st.bad
	}
	// The whole line where it fits; else without what the clock and the keys say.
	lines := []string{fmt.Sprintf("%s at %s: %s · q quits", what, at, said), fmt.Sprintf("%s at %s: %s", what, at, said), what + ": " + said}
	text := lines[len(lines)-1]
	for _, l := range lines {
		if m.width <= 0 || ansi.StringWidth(l) <= m.width {
			text = l
			break
		}
	}
	return style.Render(text)
}

// endedFormat lays out a job of a run that has ended: job, name, state, its attempts,
// its last attempt's cards and tier, how long that attempt ran, the most it held, and
// how it ended; endedNarrow the same less the cards, tier and peak, which give way to
// how it ended (gpuq status ID has them).
const (
	endedFormat = "%-*s %-*s %-9s %5s %-*s %-4s %7s %7s  %s"
	endedNarrow = "%-*s %-*s %-9s %5s %7s  %s"
)

// endedFixed is the cells a line of endedFormat takes but for its id, name, cards and
// how it ended; endedNarrowFixed the same in endedNarrow.
const (
	endedFixed       = 1 + 1 + 1 + 9 + 1 + 5 + 1 + 1 + 4 + 1 + 7 + 1 + 7 + 2
	endedNarrowFixed = 1 + 1 + 1 + 9 + 1 + 5 + 1 + 7 + 2
)

// endedHow is the fewest cells a screen leaves how a job ended before the cards, tier
// and peak give way: enough for "exited with status 1: " and the start of an error.
const endedHow = 32

// endedSection lists the jobs of the run as they ended, filtered by match.
func (m model) endedSection(match func(parts ...string) bool, count func(title string, shown, all int) string) section {
	all := m.ended.rec.Jobs
	jobs := slices.DeleteFunc(slices.Clone(all), func(j api.Job) bool { return !match(j.ID, j.Name, j.State, howEnded(j)) })
	title := count("JOBS", len(jobs), len(all))
	w, gw, n := max(8, len(title)-1), 4, 4
	var names []string
	for _, j := range jobs {
		w, n = max(w, len(j.ID)), max(n, ansi.StringWidth(j.Name))
		gw = max(gw, ansi.StringWidth(lastCards(j)))
		names = append(names, j.Name)
	}
	nw, fixed, narrow := n, endedFixed+gw, false
	if m.width > 0 {
		if m.width-w-min(n, nameFirst)-fixed < endedHow {
			fixed, narrow = endedNarrowFixed, true
		}
		// As in the running list: ids give way first, losing their start; then names
		// take at most half of what is left beside how each job ended.
		widths := []int{w}
		GiveWay(widths, []int{0}, func(int) int { return max(len(title)-1, MinCut) }, w+fixed+2*min(n, nameFirst)-m.width)
		w = widths[0]
		nw = max(min(n, (m.width-w-fixed)/2), 4)
	}
	line := func(id, name, st, tries, cards, tier, took, peak, how string) string {
		if narrow {
			return fmt.Sprintf(endedNarrow, w, id, nw, name, st, tries, took, how)
		}
		return fmt.Sprintf(endedFormat, w, id, nw, name, st, tries, gw, cards, tier, took, peak, how)
	}
	cut := m.cuts.of(names, nw)
	sec := section{title: line(fmt.Sprintf("%-*s", w+1, title), "NAME", "STATE", "TRIES", "GPU", "TIER", "ELAPSED", "PEAK", "HOW IT ENDED")}
	for i, j := range jobs {
		tries, tier, took, peak := "-", "-", "-", "-"
		if k := len(j.Attempts); k > 0 {
			a := j.Attempts[k-1]
			tries, tier = fmt.Sprint(k), fmt.Sprintf("t%d", a.Tier)
			if !a.Ended.IsZero() {
				took = elapsed(a.Ended.Sub(a.Started))
			}
			var most int64
			for _, a := range j.Attempts {
				most = max(most, a.PeakBytes)
			}
			peak = Gig(most)
		}
		text := line(CutStart(j.ID, w), cut[i], j.State, tries, lastCards(j), tier, took, peak, howEnded(j))
		sec.rows = append(sec.rows, row{key: "j/" + j.ID, job: j.ID, text: strings.TrimRight(text, " "), style: m.stateStyle(j.State)})
	}
	return sec
}

// lastCards names the cards of a job's last attempt; "-" for a job that never ran.
func lastCards(j api.Job) string {
	if len(j.Attempts) == 0 {
		return "-"
	}
	a := j.Attempts[len(j.Attempts)-1]
	return plans.Cards(a.Worker, a.GPUs)
}

// howEnded says how a job ended: for one that did not succeed, gpuq's reason (which
// names its last attempt's exit, and its error line), as gpuq run's summary says it,
// less "attempt 2 failed: ", which its state and tries say; else its last attempt's
// outcome.
func howEnded(j api.Job) string {
	switch {
	case j.Reason != "" && j.State != string(state.JobSucceeded):
		why, _ := strings.CutPrefix(j.Reason, fmt.Sprintf("attempt %d failed: ", len(j.Attempts)))
		return why
	case len(j.Attempts) > 0 && j.Attempts[len(j.Attempts)-1].Outcome != "":
		return j.Attempts[len(j.Attempts)-1].Outcome
	}
	return "-"
}

// stateStyle colours a job by how it ended.
func (m model) stateStyle(s string) *lipgloss.Style {
	switch state.JobState(s) {
	case state.JobSucceeded:
		return &m.st.good
	case state.JobFailed:
		return &m.st.bad
	case state.JobCancelled, state.JobStopped:
		return &m.st.warn
	}
	return nil
}
