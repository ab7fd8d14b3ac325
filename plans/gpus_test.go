package plans

import (
	"slices"
	"strings"
	"testing"
)

func TestParseGPUs(t *testing.T) {
	tests := []struct {
		in      string
		count   int
		sim     bool
		str     string
		wantErr string
	}{
		{"0,1,2,3,4,5,6", 7, false, "0,1,2,3,4,5,6", ""},
		{"0 1 2 3", 4, false, "0,1,2,3", ""},
		{"all", 0, false, "all", ""},
		{"", 0, false, "all", ""},
		{"sim:7x23.52GiB", 7, true, "sim:7x23.52GiB", ""},
		{"sim:2x80GiB+4x24GiB", 6, true, "sim:2x80GiB+4x24GiB", ""},
		{"sim", 4, true, "sim:4x24GiB", ""},
		{"sim:24GiB", 1, true, "sim:1x24GiB", ""},
		{"0,1,1", 0, false, "", "listed twice"},
		{"0,a", 0, false, "", `"a" is not a card index`},
		{"-1", 0, false, "", "not a card index"},
		{"sim:0x24GiB", 0, true, "", "not a card count"},
		{"sim:4x24", 0, true, "", "no unit"},
		{"sim:4x100MiB", 0, true, "", "too small"},
		{"sim:5000x24GiB", 0, true, "", "more than 4096"},
	}
	for _, tt := range tests {
		got, err := ParseGPUs(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseGPUs(%q) error = %v, want %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseGPUs(%q): %v", tt.in, err)
			continue
		}
		if got.Count() != tt.count || got.IsSimulated() != tt.sim {
			t.Errorf("ParseGPUs(%q) = %+v, count %d sim %v", tt.in, got, got.Count(), got.IsSimulated())
		}
		if got.String() != tt.str {
			t.Errorf("ParseGPUs(%q).String() = %q", tt.in, got.String())
		}
	}
}

func TestParsePlan(t *testing.T) {
	p, err := ParsePlan("2,2,2,2,1,1,1")
	if err != nil {
		t.Fatal(err)
	}
	got, err := p.For(7)
	if err != nil || !slices.Equal(got, []int{2, 2, 2, 2, 1, 1, 1}) {
		t.Fatalf("For(7) = %v, %v", got, err)
	}
	if _, err := p.For(6); err == nil || !strings.Contains(err.Error(), "7 entries but there are 6 cards") {
		t.Errorf("For(6) error = %v", err)
	}
	one, _ := ParsePlan("2")
	if got, _ := one.For(3); !slices.Equal(got, []int{2, 2, 2}) {
		t.Errorf("single count: %v", got)
	}
	for in, want := range map[string]string{
		"2,x,1":  `entry 2 is "x", not a count`,
		"0,0,0":  "allows no job on any card",
		"2,-1,1": "entry 2 is -1",
		"":       "empty plan",
	} {
		if _, err := ParsePlan(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParsePlan(%q) error = %v, want %q", in, err, want)
		}
	}
}
