package plans

import (
	"strings"
	"testing"
)

func TestParseSize(t *testing.T) {
	tests := []struct {
		in      string
		want    int64
		wantErr string
	}{
		{"11GiB", 11 << 30, ""},
		{"23.52GiB", 25254407700, ""},
		{"23.52 GiB", 25254407700, ""},
		{"512MiB", 512 << 20, ""},
		{"1TiB", 1 << 40, ""},
		{"1024B", 1024, ""},
		{"80GB", 80e9, ""},
		{"1kb", 1000, ""},
		{"11", 0, "has no unit"},
		{"11G", 0, "did you mean GiB"},
		{"GiB", 0, "is not a size"},
		{"1.2.3GiB", 0, "not a number"},
		{"-1GiB", 0, "is not a size"},
		{"5 parsecs", 0, "unknown unit"},
	}
	for _, tt := range tests {
		got, err := ParseSize(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseSize(%q) error = %v, want it to contain %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
}

func TestFormatSize(t *testing.T) {
	for in, want := range map[int64]string{
		0: "0 B", 1023: "1023 B", 1 << 10: "1.00 KiB", 32 << 20: "32.00 MiB",
		25254407700: "23.52 GiB", 1 << 40: "1.00 TiB", -(1 << 30): "-1.00 GiB",
	} {
		if got := FormatSize(in); got != want {
			t.Errorf("FormatSize(%d) = %q, want %q", in, got, want)
		}
	}
}

func TestParseHeadroom(t *testing.T) {
	h, err := ParseHeadroom("10%")
	if err != nil || h.Of(100<<30) != 10<<30 || h.String() != "10%" {
		t.Fatalf("10%%: %+v %v", h, err)
	}
	h, err = ParseHeadroom("1GiB")
	if err != nil || h.Of(80<<30) != 1<<30 {
		t.Fatalf("1GiB: %+v %v", h, err)
	}
	for _, bad := range []string{"100%", "-5%", "x%", "12", "ten"} {
		if _, err := ParseHeadroom(bad); err == nil {
			t.Errorf("ParseHeadroom(%q) accepted", bad)
		}
	}
}
