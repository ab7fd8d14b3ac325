package runner

import (
	"strings"
	"sync"
	"testing"
)

// countingWriter counts the writes it is given.
type countingWriter struct {
	strings.Builder
	writes int
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.writes++
	return w.Builder.Write(p)
}

// TestEventLogGathers: the lines logged while Gather runs, from any goroutine, are
// written together when it returns, in the order logged; a line at any other time is
// written at once.
func TestEventLogGathers(t *testing.T) {
	var w countingWriter
	l := NewEventLog(&w)
	l.Printf("before")
	l.Gather(func() {
		for i := range 1000 {
			l.Printf("held s.%d", i)
		}
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); l.Printf("from elsewhere") }()
		wg.Wait()
		if w.writes != 1 {
			t.Errorf("%d writes while gathering, want the one before", w.writes)
		}
	})
	l.Printf("after")
	lines := strings.Split(strings.TrimSpace(w.String()), "\n")
	if w.writes != 3 || len(lines) != 1003 || !strings.HasSuffix(lines[1], " held s.0") ||
		!strings.HasSuffix(lines[1001], " from elsewhere") || !strings.HasSuffix(lines[1002], " after") {
		t.Errorf("%d writes of %d lines, want 3 of 1003: %q ... %q", w.writes, len(lines), lines[:2], lines[len(lines)-2:])
	}
}
