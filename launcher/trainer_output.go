package launcher

import (
	"bytes"
	"io"
)

// What gpuq writes into an attempt's log around its trainer's output: the header's
// first bytes and the line after which it writes the command to rerun the attempt,
// shell-quoted, up to a blank line (see Header); and the line it ends the log with,
// after a line end of its own (see Process.wait).
const (
	headerStart = "# gpuq attempt "
	rerunLine   = "\n# to rerun by hand:\n"
	closing     = "gpuq: exited "
)

// trainerOutput passes on an attempt's log as its trainer wrote it: without gpuq's
// header and closing line. It writes as the log grows, holding back no more than what
// may be the closing line or its start, until Close.
type trainerOutput struct {
	w         io.Writer
	h         header
	held      []byte
	lineStart bool // what was passed on ends a line, or nothing was
}

// TrainerOutput returns a writer of an attempt's log that writes its trainer's output
// alone to w; Close writes what it holds back, unless that is gpuq's closing line.
func TrainerOutput(w io.Writer) io.WriteCloser {
	return &trainerOutput{w: w, lineStart: true}
}

func (t *trainerOutput) Write(p []byte) (int, error) {
	n := len(p)
	if !t.h.done {
		p = t.h.skip(p)
	}
	t.held = append(t.held, p...)
	from := holdFrom(t.held, t.lineStart)
	if from > 0 {
		if _, err := t.w.Write(t.held[:from]); err != nil {
			return n, err
		}
		t.lineStart = t.held[from-1] == '\n'
	}
	t.held = append(t.held[:0], t.held[from:]...)
	return n, nil
}

// Close writes what is held back, unless it is gpuq's closing line.
func (t *trainerOutput) Close() error {
	rest := t.held
	switch {
	case !t.h.done && t.h.seen < len(headerStart): // a log shorter than a header's start
		rest = []byte(headerStart[:t.h.seen])
	case isClosing(rest, t.lineStart):
		return nil
	}
	_, err := t.w.Write(rest)
	return err
}

// header follows gpuq's header through a log's first bytes: its comment lines, then
// the command to rerun, whose quoted words may hold blank lines of their own.
type header struct {
	done    bool
	seen    int  // bytes of headerStart matched
	rerun   int  // bytes of rerunLine matched; all: in the command
	quoted  bool // within single quotes
	escaped bool // after a backslash outside them
	prev    byte // the last byte outside quotes, unescaped
}

// skip is what follows the header in p, the log's next bytes: all of p for a log that
// does not begin as gpuq's header does.
func (h *header) skip(p []byte) []byte {
	for i, c := range p {
		switch {
		case h.seen < len(headerStart):
			if c != headerStart[h.seen] {
				h.done = true
				return append([]byte(headerStart[:h.seen]), p[i:]...)
			}
			h.seen++
		case h.rerun < len(rerunLine):
			switch {
			case c == rerunLine[h.rerun]:
				h.rerun++
			case c == rerunLine[0]:
				h.rerun = 1
			default:
				h.rerun = 0
			}
		case h.quoted:
			h.quoted = c != '\''
			h.prev = 0
		case h.escaped:
			h.escaped, h.prev = false, 0
		case c == '\\':
			h.escaped = true
		case c == '\'':
			h.quoted = true
		case c == '\n' && h.prev == '\n':
			h.done = true
			return p[i+1:]
		default:
			h.prev = c
		}
	}
	return nil
}

// holdFrom is where in b, the output not yet passed on, what may be gpuq's closing
// line begins: the line end before it and the line, whole or so far. A line end that
// ends a line is passed on (the trainer's last line would otherwise wait for its
// next); one that makes a blank line is held. So the closing line is also known by its
// start at a line's start, its line end passed on: where a trainer's output does not
// end with a line end, and the closing line's own reached this writer alone, the
// output gains that line end.
func holdFrom(b []byte, lineStart bool) int {
	if i := bytes.LastIndex(b, []byte("\n"+closing)); i >= 0 && oneLine(b[i+1:]) {
		return i
	}
	if lineStart && (bytes.HasPrefix(b, []byte(closing)) && oneLine(b) || bytes.HasPrefix([]byte(closing), b)) {
		return 0
	}
	for k := min(len(closing), len(b)); k >= 2; k-- { // "\n" and the closing line's start
		if bytes.HasSuffix(b, []byte("\n"+closing[:k-1])) {
			return len(b) - k
		}
	}
	if n := len(b); n > 0 && b[n-1] == '\n' && (n == 1 && lineStart || n > 1 && b[n-2] == '\n') {
		return n - 1 // a blank line, or gpuq's line end before its closing line
	}
	return len(b)
}

// isClosing tells whether b, what is left at the log's end, is gpuq's closing line.
func isClosing(b []byte, lineStart bool) bool {
	if lineStart && bytes.HasPrefix(b, []byte(closing)) {
		return oneLine(b)
	}
	return bytes.HasPrefix(b, []byte("\n"+closing)) && oneLine(b[1:])
}

// oneLine tells whether b holds no line end but, perhaps, a last one.
func oneLine(b []byte) bool {
	i := bytes.IndexByte(b, '\n')
	return i < 0 || i == len(b)-1
}
