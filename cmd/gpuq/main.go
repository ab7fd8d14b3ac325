// Command gpuq packs GPU training sweeps onto a machine's cards by memory and per-card
// slots, launches them, and recovers from out-of-memory failures.
package main

import (
	"io"
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], ioStreams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}))
}

// ioStreams are where a verb reads and writes; tests pass buffers.
type ioStreams struct {
	In       io.Reader
	Out, Err io.Writer
	// Cols is the width that tables fit; 0 asks Out's terminal (piped: no limit).
	Cols int
}

// width is the number of columns that Out's lines fit, 0 for any.
func (s ioStreams) width() int {
	if s.Cols > 0 {
		return s.Cols
	}
	return termWidth(s.Out)
}

// isTerminal reports whether w is a character device, so that output may use bars and
// redraw in place.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
