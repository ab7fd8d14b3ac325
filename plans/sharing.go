package plans

// How a sweep's jobs share cards: the sharing target (util_target) and the form of
// sharing (sharing: mps).

import (
	"cmp"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// UtilTargetOff is the sharing target that counts no compute: memory and slots alone
// decide how many jobs share a card, as before gpuq measured compute.
const UtilTargetOff = -1

// DefaultUtilTarget is the sharing target a card has unless told otherwise (a target of
// 0, not written): the whole card.
const DefaultUtilTarget = 1.0

// UtilTargetText writes a sharing target as --util-target takes it: "off", or the
// share of a card ("1" for 0, the default).
func UtilTargetText(t float64) string {
	switch t {
	case UtilTargetOff:
		return "off"
	case 0:
		t = DefaultUtilTarget
	}
	return strconv.FormatFloat(t, 'f', -1, 64)
}

// SameUtilTarget reports whether two sharing targets share cards alike: 0 is the
// default.
func SameUtilTarget(a, b float64) bool {
	return cmp.Or(a, DefaultUtilTarget) == cmp.Or(b, DefaultUtilTarget)
}

// ParseUtilTarget reads a sharing target: how much of a card's compute the jobs
// sharing it may ask for together, by their measured utilizations. A number (1, 0.8,
// 1.5) or a percentage ("100%"), above 0 and at most 4; or "off".
func ParseUtilTarget(s string) (float64, error) {
	s = strings.TrimSpace(s)
	if strings.EqualFold(s, "off") || s == "false" { // YAML 1.1 reads off as false
		return UtilTargetOff, nil
	}
	x, err := strconv.ParseFloat(strings.TrimSuffix(s, "%"), 64)
	if err == nil && strings.HasSuffix(s, "%") {
		x /= 100
	}
	if err != nil || math.IsNaN(x) || x <= 0 || x > 4 {
		return 0, fmt.Errorf("%q is not a sharing target: write how much of a card's compute jobs sharing it may ask for together, "+
			"above 0 and at most 4 (400%%), e.g. 1 (the default: the whole card), 0.8 or 120%%; or off (memory and slots alone decide)", s)
	}
	return x, nil
}

// Sharing is how jobs that share a card share it.
type Sharing string

// Forms of sharing.
const (
	// TimeSlicing is the driver's default: processes on a card take turns.
	TimeSlicing Sharing = ""
	// MPS runs the jobs of a card in NVIDIA's Multi-Process Service, whose control
	// daemon gpuq starts and stops: their kernels run at once rather than in turns.
	MPS Sharing = "mps"
)

func (c *checker) utilTarget(doc *Map, ov Override) float64 {
	o, ok := override(doc, "util_target", ov)
	if !ok {
		return 0
	}
	t, err := ParseUtilTarget(o.Value)
	if err != nil {
		c.failAt(o, "util_target", "%v", err)
	}
	return t
}

func (c *checker) sharing(doc *Map) Sharing {
	v, ok := doc.Get("sharing")
	if !ok || v == nil {
		return TimeSlicing
	}
	switch s := strings.ToLower(FormatValue(v)); s {
	case "mps":
		return MPS
	case "time-slicing", "":
		return TimeSlicing
	default:
		c.fail("sharing", "%q is not a way to share a card: write mps (NVIDIA's Multi-Process Service, which gpuq starts) or time-slicing (the default)", s)
	}
	return TimeSlicing
}
