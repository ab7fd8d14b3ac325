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
