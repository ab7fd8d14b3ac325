package runner

import (
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
	fmt.Fprintf(l.w, time.Now().Format("2006-01-02 15:04:05 ")+format+"\n", args...)
}
