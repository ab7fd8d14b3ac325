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
	// Cols is the width that tables fit, on Out and Err alike; 0 asks the terminal
	// each writes to (piped or redirected: no limit).
	Cols int
}

// width is the number of columns that Out's lines fit, 0 for any.
func (s ioStreams) width() int { return s.widthOf(s.Out) }

// errWidth is the number of columns that Err's lines fit, 0 for any: what is written
// there (a one-off's summary, beside its trainer's output on Out) fits Err's terminal,
// whatever Out is.
func (s ioStreams) errWidth() int { return s.widthOf(s.Err) }

func (s ioStreams) widthOf(w io.Writer) int {
	if s.Cols > 0 {
		return s.Cols
	}
	return termWidth(w)
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
