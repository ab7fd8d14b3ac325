package launcher

import "sync"

// Ring keeps the last bytes written to it: enough of an attempt's output to classify how
// it ended and to show on attach, without holding the whole log in memory.
type Ring struct {
	mu   sync.Mutex
	buf  []byte
	next int
	full bool
}

// NewRing returns a ring of n bytes.
func NewRing(n int) *Ring { return &Ring{buf: make([]byte, n)} }

func (r *Ring) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := len(p)
	if len(p) >= len(r.buf) {
		copy(r.buf, p[len(p)-len(r.buf):])
		r.next, r.full = 0, true
		return n, nil
	}
	c := copy(r.buf[r.next:], p)
	if c < len(p) {
		copy(r.buf, p[c:])
		r.full = true
	}
	r.next = (r.next + len(p)) % len(r.buf)
	if r.next == 0 && len(p) > 0 {
		r.full = true
	}
	return n, nil
}

// Bytes returns a copy of what the ring holds, oldest first.
func (r *Ring) Bytes() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.full {
		return append([]byte(nil), r.buf[:r.next]...)
	}
	return append(append([]byte(nil), r.buf[r.next:]...), r.buf[:r.next]...)
}
