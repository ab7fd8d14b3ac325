package plans

import "testing"

// TestParseCardID: a card's name reads back as String writes it; anything else is refused.
func TestParseCardID(t *testing.T) {
	for _, c := range []CardID{{Index: 3}, {Worker: "node7", Index: 0}, {Worker: "gpu-a.cluster", Index: 12}} {
		if got, err := ParseCardID(c.String()); err != nil || got != c {
			t.Errorf("ParseCardID(%q) = %v, %v; want %v", c, got, err, c)
		}
	}
	for _, bad := range []string{"", "x", "-1", "node7:", "node7:x", "3.0"} {
		if _, err := ParseCardID(bad); err == nil {
			t.Errorf("ParseCardID(%q) took it", bad)
		}
	}
}

// TestCardsOn: cards of this machine by index, a worker's with its name, as gpuq
// status and top name them (node7:3), not as Go prints a slice.
func TestCardsOn(t *testing.T) {
	for _, tt := range []struct {
		worker string
		cards  []int
		want   string
	}{
		{"", []int{0}, "GPU 0"},
		{"", []int{0, 1}, "GPUs 0,1"},
		{"node7", []int{3}, "GPU node7:3"},
		{"node7", []int{0, 1}, "GPUs node7:0,1"},
	} {
		if got := CardsOn(tt.worker, tt.cards); got != tt.want {
			t.Errorf("CardsOn(%q, %v) = %q, want %q", tt.worker, tt.cards, got, tt.want)
		}
	}
}
