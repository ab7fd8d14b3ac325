package launcher

import "sync"

// Ring keeps the last bytes written to it: enough of an attempt's output to classify how
// it ended and to show on attach, without holding the whole log in memory.
type Ring struct {
	mu      sync.Mutex
	buf     []byte
	next    int
	full    bool
	written int64 // every byte ever written: where what it holds ends in the output
}

// NewRing returns a ring of n bytes.
func NewRing(n int) *Ring { return &Ring{buf: make([]byte, n)} }

func (r *Ring) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := len(p)
	r.written += int64(n)
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

// Since returns what the ring holds from offset pos of all that was written to it on,
// and the offset it begins at: later than pos where the ring no longer holds what was
// written at pos, which a reader that fell behind has lost.
func (r *Ring) Since(pos int64) (b []byte, from int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	held := int64(r.next)
	if r.full {
		held = int64(len(r.buf))
	}
	from = max(pos, r.written-held)
	n := int(r.written - from)
	if n <= 0 {
		return nil, r.written
	}
	b = make([]byte, n)
	start := (r.next - n + len(r.buf)) % len(r.buf)
	copy(b[copy(b, r.buf[start:min(start+n, len(r.buf))]):], r.buf)
	return b, from
}
