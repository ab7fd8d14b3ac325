package launcher

import (
	"context"
	"errors"
	"io"
	"os"
	"time"
)

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
