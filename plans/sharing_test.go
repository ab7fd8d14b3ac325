package plans

import (
	"strings"
	"testing"
)

func TestUtilTargetAndSharing(t *testing.T) {
	for _, c := range []struct {
		doc     string
		target  float64
		sharing Sharing
		err     string
	}{
		{"", 0, TimeSlicing, ""},
		{"util_target: 1.2\n", 1.2, TimeSlicing, ""},
		{"util_target: 80%\n", 0.8, TimeSlicing, ""},
		{"util_target: off\n", UtilTargetOff, TimeSlicing, ""},
		{"sharing: mps\n", 0, MPS, ""},
		{"util_target: 0\n", 0, "", `util_target: "0" is not a sharing target`},
		{"util_target: 9\n", 0, "", `util_target: "9" is not a sharing target: write how much of a card's compute jobs sharing it may ask for together, above 0 and at most 4 (400%)`},
		{"sharing: mig\n", 0, "", `sharing: "mig" is not a way to share a card: write mps`},
	} {
		sw, err := DecodeSweep("s.yaml", []byte("name: s\ncommand: [echo]\njobs: [{}]\n"+c.doc), Overrides{})
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: %v, want %q", c.doc, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", c.doc, err)
			continue
		}
		if sw.UtilTarget != c.target || sw.Sharing != c.sharing {
			t.Errorf("%q: target %v, sharing %q", c.doc, sw.UtilTarget, sw.Sharing)
		}
	}
	sw, err := DecodeSweep("s.yaml", []byte("name: s\ncommand: [echo]\njobs: [{}]\nutil_target: 1\n"), Overrides{UtilTarget: Override{Value: "2", Source: "--util-target"}})
	if err != nil || sw.UtilTarget != 2 {
		t.Errorf("the override wins: %v %v", sw.UtilTarget, err)
	}
}
