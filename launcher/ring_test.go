package launcher

import "testing"

// TestRingSince: a reader reads from its place on what the ring still holds, and is
// moved on past what the ring no longer holds, across the ring's wrap.
func TestRingSince(t *testing.T) {
	r := NewRing(8)
	r.Write([]byte("abcdef"))
	tests := []struct {
		write    string
		pos      int64
		want     string
		wantFrom int64
	}{
		{"", 0, "abcdef", 0},
		{"", 4, "ef", 4},
		{"", 6, "", 6},
		{"ghij", 6, "ghij", 6}, // across the wrap
		{"", 0, "cdefghij", 2}, // "ab" is gone
		{"klmnopqrstu", 3, "nopqrstu", 13},
	}
	for _, tt := range tests {
		r.Write([]byte(tt.write))
		if b, from := r.Since(tt.pos); string(b) != tt.want || from != tt.wantFrom {
			t.Errorf("after %q, Since(%d) = %q from %d, want %q from %d", tt.write, tt.pos, b, from, tt.want, tt.wantFrom)
		}
	}
}
