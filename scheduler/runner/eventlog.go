package runner

import (
	"bytes"
	"fmt"
	"io"
	"sync"
	"time"
)

// EventLog is the log of a program that runs attempts for a long time, a daemon's or
// a worker's: one timestamped line per event.
type EventLog struct {
	mu sync.Mutex
	w  io.Writer
	// gathering counts the Gather calls under way; meanwhile lines wait in held.
	gathering int
	held      bytes.Buffer
}

// NewEventLog logs to w; nil logs nothing.
func NewEventLog(w io.Writer) *EventLog { return &EventLog{w: w} }

// Printf logs one line.
func (l *EventLog) Printf(format string, args ...any) {
	if l.w == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.w
	if l.gathering > 0 {
		w = &l.held
	}
	fmt.Fprintf(w, time.Now().Format("2006-01-02 15:04:05 ")+format+"\n", args...)
}

// Gather runs fn, and writes the lines logged meanwhile (by anyone) together when it
// returns: a request that changes 100,000 jobs logs a line for each, and a write for
// each took longer than the rest of the request.
func (l *EventLog) Gather(fn func()) {
	l.mu.Lock()
	l.gathering++
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.gathering--; l.gathering == 0 && l.held.Len() > 0 {
			l.w.Write(l.held.Bytes())
			l.held = bytes.Buffer{}
		}
	}()
	fn()
}
