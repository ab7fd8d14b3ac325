package launcher

import (
	"bytes"
	"fmt"
	"sync"

	"github.com/gpuq/gpuq/plans"
)

// hub is the live output of an attempt for its attach clients: the last of it, which
// each client reads from where it is, woken as more comes. The trainer never waits for
// a client: one that falls behind by more than the hub holds skips what it missed.
type hub struct {
	mu   sync.Mutex
	ring *Ring
	subs map[chan struct{}]bool
	done bool
}

func newHub(n int) *hub {
	return &hub{ring: NewRing(n), subs: map[chan struct{}]bool{}}
}

func (h *hub) Write(b []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ring.Write(b)
	for ch := range h.subs {
		select {
		case ch <- struct{}{}:
		default: // woken already
		}
	}
	return len(b), nil
}

// subscription is one attach client's place in an attempt's output.
type subscription struct {
	h    *hub
	pos  int64
	more chan struct{} // closed once the attempt has ended, or the client has gone
}

// subscribe returns what the hub holds, from the start of a line, and the client's
// place after it, with nothing lost or repeated between the two.
func (h *hub) subscribe() ([]byte, *subscription) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := &subscription{h: h, more: make(chan struct{}, 1)}
	if h.done {
		close(s.more)
	} else {
		h.subs[s.more] = true
	}
	b, from := h.ring.Since(0)
	s.pos = from + int64(len(b))
	if from > 0 { // the output's start is gone: so is the line it cut
		b = fromLine(b)
	}
	return b, s
}

func (h *hub) unsubscribe(s *subscription) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.subs[s.more] {
		delete(h.subs, s.more)
		close(s.more)
	}
}

func (h *hub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs {
		close(ch)
	}
	h.subs = nil
	h.done = true
}

// next waits for output after the client's place and returns it, and false once the
// attempt has ended and nothing is left. Output the hub no longer holds is skipped, to
// the next line, with a line that says so.
func (s *subscription) next() ([]byte, bool) {
	_, open := <-s.more
	b, from := s.h.ring.Since(s.pos)
	skipped := from - s.pos
	s.pos = from + int64(len(b))
	if skipped > 0 {
		rest := fromLine(b)
		skipped += int64(len(b) - len(rest))
		b = append([]byte(fmt.Sprintf("\r\n[gpuq: this terminal fell behind the trainer: %s of its output skipped; its log has it all]\r\n",
			plans.FormatSize(skipped))), rest...)
	}
	return b, open || len(b) > 0
}

// fromLine is b from the start of its first whole line: after its first line end, or
// its first carriage return where it has none (a progress bar redrawn in place); all
// of b where it has neither.
func fromLine(b []byte) []byte {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		return b[i+1:]
	}
	if i := bytes.IndexByte(b, '\r'); i >= 0 {
		return b[i+1:]
	}
	return b
}
