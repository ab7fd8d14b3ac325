package plans

import "testing"

func TestCount(t *testing.T) {
	for _, tt := range []struct {
		n          int
		noun, want string
	}{{1, "job", "1 job"}, {0, "job", "0 jobs"}, {2, "card", "2 cards"}, {1, "entry", "1 entry"}, {3, "entry", "3 entries"}} {
		if got := Count(tt.n, tt.noun); got != tt.want {
			t.Errorf("Count(%d, %q) = %q, want %q", tt.n, tt.noun, got, tt.want)
		}
	}
}
