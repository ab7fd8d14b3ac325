package launcher

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"time"
)

// lineEnds is an attempt's log as its pty's output reaches it. The terminal driver
// turns each "\n" a trainer writes into "\r\n"; the log gets "\n" back (a run of "\r"
// before a "\n" is one line end), so that it reads as the trainer wrote it, in grep,
// editors and Python alike. A "\r" before anything else is a progress bar redrawn in
// place (tqdm) and is kept, so that cat, tail -f and less -R show the bar as the
// terminal did and the log's last line is the bar's latest state. A "\r" that ends one
// write is held until the next tells which it is, or until Flush.
type lineEnds struct {
	w   io.Writer
	cr  int // "\r" held from the last write
	out []byte
}

func (l *lineEnds) Write(p []byte) (int, error) {
	l.out = l.out[:0]
	for _, c := range p {
		switch c {
		case '\r':
			l.cr++
			continue
		case '\n':
			l.cr = 0
		}
		for ; l.cr > 0; l.cr-- {
			l.out = append(l.out, '\r')
		}
		l.out = append(l.out, c)
	}
	w, err := l.w.Write(l.out)
	if err != nil {
		// How much of p the log lacks, as near as the held "\r" let tell.
		return min(w, len(p)), err
	}
	return len(p), nil
}

// Flush writes a "\r" held at the end of the output.
func (l *lineEnds) Flush() error {
	if l.cr == 0 {
		return nil
	}
	_, err := l.w.Write(bytes.Repeat([]byte{'\r'}, l.cr))
	l.cr = 0
	return err
}

// FollowLog writes what is appended to f, an attempt's log, until the attempt in dir has
// ended and all of its log is written, or ctx is done.
func FollowLog(ctx context.Context, f *os.File, dir string, w io.Writer) error {
	for {
		ended, _ := ReadEnded(dir)
		if _, err := io.Copy(w, f); err != nil {
			return err
		}
		if ended != nil {
			// exit.json is written after the log is closed: nothing more comes.
			_, err := io.Copy(w, f)
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// SeekLastLines places f at the start of its last n lines, reading it backwards a
// block at a time, so that a long log is not read whole.
func SeekLastLines(f *os.File, n int) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	end := fi.Size()
	const block = 64 << 10
	buf := make([]byte, block)
	pos, seen := end, 0
	// A final newline ends the last line; it does not start another.
	if end > 0 {
		if _, err := f.ReadAt(buf[:1], end-1); err == nil && buf[0] == '\n' {
			seen = -1
		}
	}
	for pos > 0 {
		size := min(int64(block), pos)
		pos -= size
		if _, err := f.ReadAt(buf[:size], pos); err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		chunk := buf[:size]
		for i := len(chunk) - 1; i >= 0; i-- {
			if chunk[i] != '\n' {
				continue
			}
			if seen++; seen == n {
				_, err := f.Seek(pos+int64(i)+1, io.SeekStart)
				return err
			}
		}
	}
	_, err = f.Seek(0, io.SeekStart)
	return err
}

// The start of the line gpuq ends an attempt's log with, after its trainer's output
// (see Process.wait), and of the header it begins with (see Header).
const (
	endedLine   = "\ngpuq: exited "
	headerStart = "# gpuq attempt "
)

// trainerOutput passes on an attempt's log as its trainer wrote it: without the header
// gpuq begins it with (up to the blank line after the command) and without the line gpuq
// ends it with. It writes as the log grows, holding back no more than what may be that
// last line or its start, until Close.
type trainerOutput struct {
	w      io.Writer
	header bool // in the header still
	seen   int  // bytes of the header seen
	prev   byte // the header's last byte seen
	held   []byte
}

// TrainerOutput returns a writer of an attempt's log that writes its trainer's output
// alone to w; Close writes what it holds back, unless that is gpuq's closing line.
func TrainerOutput(w io.Writer) io.WriteCloser { return &trainerOutput{w: w, header: true} }

func (t *trainerOutput) Write(p []byte) (int, error) {
	n := len(p)
	if t.header {
		p = t.skipHeader(p)
	}
	t.held = append(t.held, p...)
	keep := heldBack(t.held)
	if _, err := t.w.Write(t.held[:len(t.held)-keep]); err != nil {
		return n, err
	}
	t.held = append(t.held[:0], t.held[len(t.held)-keep:]...)
	return n, nil
}

// Close writes what is held back: the log's end, unless it is gpuq's closing line.
func (t *trainerOutput) Close() error {
	rest := t.held
	switch {
	case t.header && t.seen < len(headerStart): // a log shorter than the header's start
		rest = []byte(headerStart[:t.seen])
	case closingLine(rest):
		return nil
	}
	_, err := t.w.Write(rest)
	return err
}

// skipHeader is what follows the header in p, the log's next bytes; all of a log that
// does not begin as gpuq's header does is output.
func (t *trainerOutput) skipHeader(p []byte) []byte {
	for i, c := range p {
		if t.seen < len(headerStart) && c != headerStart[t.seen] {
			t.header = false
			return append([]byte(headerStart[:t.seen]), p[i:]...)
		}
		t.seen++
		if c == '\n' && t.prev == '\n' {
			t.header = false
			return p[i+1:]
		}
		t.prev = c
	}
	return nil
}

// heldBack is how many bytes at the end of b may be gpuq's closing line, or its start.
func heldBack(b []byte) int {
	if i := bytes.LastIndex(b, []byte(endedLine)); i >= 0 && closingLine(b[i:]) {
		return len(b) - i
	}
	for k := min(len(endedLine)-1, len(b)); k > 0; k-- {
		if bytes.HasSuffix(b, []byte(endedLine[:k])) {
			return k
		}
	}
	return 0
}

// closingLine tells whether b is gpuq's closing line, whole or so far: a line end, the
// line's start and no other line end but a last one.
func closingLine(b []byte) bool {
	if !bytes.HasPrefix(b, []byte(endedLine)) {
		return false
	}
	end := bytes.IndexByte(b[1:], '\n')
	return end < 0 || end == len(b)-2
}
