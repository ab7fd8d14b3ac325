package plans

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Size units. Binary units (KiB…TiB) are what PyTorch and nvidia-smi print; decimal
// units (KB…TB) are accepted for people who copy figures from vendor sheets.
var sizeUnits = map[string]float64{
	"b":   1,
	"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
	"kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
}

// ParseSize reads a byte count such as "11GiB", "23.52 GiB", "512MB" or "1024B".
// A bare number is refused: "11" could mean bytes or GiB, and guessing wrong packs
// jobs onto cards they do not fit.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	num, unit := t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	if num == "" {
		return 0, fmt.Errorf("%q is not a size: write a number and a unit, e.g. 11GiB", s)
	}
	if unit == "" {
		return 0, fmt.Errorf("%q has no unit: write e.g. %sGiB (or B, KiB, MiB, TiB, KB, MB, GB, TB)", s, num)
	}
	mult, ok := sizeUnits[unit]
	if !ok {
		hint := ""
		switch unit {
		case "g", "gi":
			hint = " (did you mean GiB?)"
		case "m", "mi":
			hint = " (did you mean MiB?)"
		case "k", "ki":
			hint = " (did you mean KiB?)"
		case "t", "ti":
			hint = " (did you mean TiB?)"
		}
		return 0, fmt.Errorf("%q has an unknown unit %q%s: use B, KiB, MiB, GiB, TiB, KB, MB, GB or TB", s, t[i:], hint)
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a size: %q is not a number", s, num)
	}
	b := v * mult
	if b > math.MaxInt64/2 {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return int64(math.Round(b)), nil
}

// FormatSize prints bytes the way PyTorch does: two decimals, 1024-based.
func FormatSize(b int64) string {
	neg := ""
	if b < 0 {
		neg, b = "-", -b
	}
	switch {
	case b >= 1<<40:
		return fmt.Sprintf("%s%.2f TiB", neg, float64(b)/(1<<40))
	case b >= 1<<30:
		return fmt.Sprintf("%s%.2f GiB", neg, float64(b)/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%s%.2f MiB", neg, float64(b)/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%s%.2f KiB", neg, float64(b)/(1<<10))
	}
	return fmt.Sprintf("%s%d B", neg, b)
}

// Headroom is the memory kept free on every card: a share of its capacity or a
// fixed size.
type Headroom struct {
	Percent float64 // 0 ≤ Percent < 100; used when Bytes is 0
	Bytes   int64
}

// DefaultHeadroom leaves room for allocator fragmentation and for readings that lag
// behind allocations (REFERENCE.md §3).
var DefaultHeadroom = Headroom{Percent: 5}

// ParseHeadroom reads "10%" or a size such as "1GiB".
func ParseHeadroom(s string) (Headroom, error) {
	t := strings.TrimSpace(s)
	if p, ok := strings.CutSuffix(t, "%"); ok {
		v, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil || v < 0 || v >= 100 {
			return Headroom{}, fmt.Errorf("%q is not a share: write a percentage from 0%% to 99%%, e.g. 10%%", s)
		}
		return Headroom{Percent: v}, nil
	}
	b, err := ParseSize(t)
	if err != nil {
		return Headroom{}, fmt.Errorf("%w; or a share such as 10%%", err)
	}
	return Headroom{Bytes: b}, nil
}

// Of returns the bytes kept free on a card of the given capacity.
func (h Headroom) Of(total int64) int64 {
	if h.Bytes > 0 {
		return h.Bytes
	}
	return int64(float64(total) * h.Percent / 100)
}

// Room is what a card of the given capacity offers jobs: its capacity less headroom.
func (h Headroom) Room(total int64) int64 { return total - h.Of(total) }

func (h Headroom) String() string {
	if h.Bytes > 0 {
		return FormatSize(h.Bytes)
	}
	return strconv.FormatFloat(h.Percent, 'f', -1, 64) + "%"
}
