package top

import (
	"io"
	"os"
	"slices"
	"strings"
	"unicode"

	"github.com/charmbracelet/x/ansi"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
)

// logBytes is how much of a log's end the log view shows.
const logBytes = 64 << 10

// tailFile returns the last n bytes of a file, from a line's start, without the
// terminal's escape codes; carriage returns (tqdm redrawing its bar) keep the last
// drawing of each line.
func tailFile(path string, n int64) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", err
	}
	from := max(st.Size()-n, 0)
	buf := make([]byte, st.Size()-from)
	if _, err := f.ReadAt(buf, from); err != nil && err != io.EOF {
		return "", err
	}
	text := string(buf)
	if from > 0 {
		if i := strings.IndexByte(text, '\n'); i >= 0 {
			text = text[i+1:]
		}
	}
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		l = strings.TrimRight(l, "\r")
		if j := strings.LastIndexByte(l, '\r'); j >= 0 {
			l = l[j+1:]
		}
		lines[i] = printable(l)
	}
	return strings.Join(lines, "\n"), nil
}

// printable is text from elsewhere (a trainer's output, a sweep's parameters, a
// worker's word) made safe to draw: without escape codes, and without the control
// characters a terminal acts on, which ansi.Strip leaves: a bell, a backspace, a shift
// to the line-drawing character set, and C1's CSI and OSC written in UTF-8, which set
// colours, the title or the clipboard as ESC [ and ESC ] do. A tab is a space.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\t':
			return ' '
		case unicode.IsControl(r):
			return -1
		}
		return r
	}, ansi.Strip(s))
}

// readable is an overview with its free text made printable.
func readable(ov api.Overview) api.Overview {
	ov.Simulated = printable(ov.Simulated)
	ov.GPUs = each(ov.GPUs, func(g *api.GPUView) { g.Name, g.Fault = printable(g.Name), printable(g.Fault) })
	ov.Running = each(ov.Running, func(r *api.RunningJob) { r.Name = printable(r.Name) })
	ov.Queue = each(ov.Queue, func(q *api.WaitingJob) {
		q.Name, q.Reason, q.Requeued = printable(q.Name), printable(q.Reason), printable(q.Requeued)
	})
	ov.Events = each(ov.Events, func(e *api.Event) { e.Message = printable(e.Message) })
	return ov
}

// ofSweep is the overview's lists of a sweep's jobs alone, by their ids (sweep.N); all
// of them for "".
func ofSweep(ov api.Overview, sweep string) api.Overview {
	if sweep == "" {
		return ov
	}
	of := func(job string) bool { return strings.HasPrefix(job, sweep+".") }
	ov.Running = slices.DeleteFunc(slices.Clone(ov.Running), func(r api.RunningJob) bool { return !of(r.Job) })
	ov.Queue = slices.DeleteFunc(slices.Clone(ov.Queue), func(q api.WaitingJob) bool { return !of(q.Job) })
	ov.Events = slices.DeleteFunc(slices.Clone(ov.Events), func(e api.Event) bool { return !of(e.Job) })
	return ov
}

// each is a copy of s with f applied to every element: the overview's slices may be
// its source's own.
func each[T any](s []T, f func(*T)) []T {
	s = slices.Clone(s)
	for i := range s {
		f(&s[i])
	}
	return s
}

// lastLine is the last line a trainer wrote that has something on it: its latest
// message or its progress bar; "" when its log cannot be read.
func lastLine(path string) string {
	if path == "" {
		return ""
	}
	text, err := tailFile(path, 4<<10)
	if err != nil {
		return ""
	}
	lines := strings.Split(text, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" {
			return l
		}
	}
	return ""
}
