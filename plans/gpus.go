package plans

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// GPUSpec says which cards a sweep may use: indices of the machine's cards, every card,
// or a simulated machine.
type GPUSpec struct {
	Indices   []int            // nil with Simulated nil: every card the machine has
	Simulated []SimulatedCards // non-nil: a simulated machine of these cards
}

// SimulatedCards is Count simulated cards of Bytes each.
type SimulatedCards struct {
	Count int
	Bytes int64
}

// DefaultSimulated is the simulated machine used when no NVIDIA driver is present.
const DefaultSimulated = "sim:4x24GiB"

// maxSimulatedCards bounds a simulated machine; the benchmarks use 512.
const maxSimulatedCards = 4096

// IsSimulated reports whether the spec names a simulated machine.
func (g GPUSpec) IsSimulated() bool { return g.Simulated != nil }

// Count is the number of cards the spec names, or 0 for "every card".
func (g GPUSpec) Count() int {
	if g.Simulated != nil {
		n := 0
		for _, s := range g.Simulated {
			n += s.Count
		}
		return n
	}
	return len(g.Indices)
}

func (g GPUSpec) String() string {
	if g.Simulated != nil {
		parts := make([]string, len(g.Simulated))
		for i, s := range g.Simulated {
			size := strings.ReplaceAll(strings.Replace(FormatSize(s.Bytes), ".00 ", " ", 1), " ", "")
			parts[i] = fmt.Sprintf("%dx%s", s.Count, size)
		}
		return "sim:" + strings.Join(parts, "+")
	}
	if g.Indices == nil {
		return "all"
	}
	parts := make([]string, len(g.Indices))
	for i, x := range g.Indices {
		parts[i] = strconv.Itoa(x)
	}
	return strings.Join(parts, ",")
}

// ParseGPUs reads "0,1,2,3" (commas or spaces, as tmux scripts write "0 1 2 3"),
// "all", or a simulated machine "sim:7x23.52GiB" / "sim:2x80GiB+4x24GiB".
func ParseGPUs(s string) (GPUSpec, error) {
	t := strings.TrimSpace(s)
	if t == "" || strings.EqualFold(t, "all") {
		return GPUSpec{}, nil
	}
	if rest, ok := strings.CutPrefix(t, "sim:"); ok || t == "sim" {
		if t == "sim" {
			rest = strings.TrimPrefix(DefaultSimulated, "sim:")
		}
		return parseSimulated(rest)
	}
	var spec GPUSpec
	seen := map[int]bool{}
	for _, f := range splitList(t) {
		i, err := strconv.Atoi(f)
		if err != nil || i < 0 {
			return GPUSpec{}, fmt.Errorf("%q is not a card index: write indices as nvidia-smi shows them, e.g. 0,1,2, or \"all\", or a simulated machine such as sim:4x24GiB", f)
		}
		if seen[i] {
			return GPUSpec{}, fmt.Errorf("card %d is listed twice", i)
		}
		seen[i] = true
		spec.Indices = append(spec.Indices, i)
	}
	return spec, nil
}

func parseSimulated(s string) (GPUSpec, error) {
	spec := GPUSpec{Simulated: []SimulatedCards{}}
	total := 0
	for _, part := range strings.Split(s, "+") {
		part = strings.TrimSpace(part)
		count, size := "1", part
		if c, sz, ok := strings.Cut(part, "x"); ok {
			count, size = c, sz
		}
		n, err := strconv.Atoi(strings.TrimSpace(count))
		if err != nil || n < 1 {
			return GPUSpec{}, fmt.Errorf("simulated machine %q: %q is not a card count: write COUNTxSIZE, e.g. sim:7x23.52GiB or sim:2x80GiB+4x24GiB", "sim:"+s, count)
		}
		b, err := ParseSize(size)
		if err != nil {
			return GPUSpec{}, fmt.Errorf("simulated machine %q: %w", "sim:"+s, err)
		}
		if b < 1<<30 {
			return GPUSpec{}, fmt.Errorf("simulated machine %q: cards of %s are too small to train on; give at least 1GiB", "sim:"+s, FormatSize(b))
		}
		total += n
		if total > maxSimulatedCards {
			return GPUSpec{}, fmt.Errorf("simulated machine %q: more than %d cards", "sim:"+s, maxSimulatedCards)
		}
		spec.Simulated = append(spec.Simulated, SimulatedCards{Count: n, Bytes: b})
	}
	return spec, nil
}

// NoSlotLimit is a card's slot count when memory alone decides how many jobs share it.
const NoSlotLimit = math.MaxInt32

// GPUPlan is the per-card limit on concurrent jobs, in the order of the GPU list.
// One entry applies to every card.
type GPUPlan []int

// ParsePlan reads "2,2,2,2,1,1,1" (or spaces) or a single count for every card.
// A 0 keeps a card free.
func ParsePlan(s string) (GPUPlan, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return nil, fmt.Errorf("empty plan: write one count per card, e.g. 2,2,2,2,1,1,1, or one count for every card")
	}
	var plan GPUPlan
	total := 0
	for i, f := range splitList(t) {
		n, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("entry %d is %q, not a count: write whole numbers, e.g. 2,2,1", i+1, f)
		}
		if n < 0 {
			return nil, fmt.Errorf("entry %d is %d: a card runs 0 or more jobs", i+1, n)
		}
		total += n
		plan = append(plan, n)
	}
	if total == 0 {
		return nil, fmt.Errorf("%q allows no job on any card: give at least one card a count of 1 or more", s)
	}
	return plan, nil
}

// For returns the plan fitted to n cards.
func (p GPUPlan) For(n int) ([]int, error) {
	if len(p) == 1 {
		out := make([]int, n)
		for i := range out {
			out[i] = p[0]
		}
		return out, nil
	}
	if len(p) != n {
		return nil, fmt.Errorf("the plan has %s but there %s %s: write one count per card (%d), or a single count for every card", Count(len(p), "entry"), isAre(n), Count(n, "card"), n)
	}
	return append([]int(nil), p...), nil
}

func (p GPUPlan) String() string {
	parts := make([]string, len(p))
	for i, n := range p {
		if n == NoSlotLimit {
			parts[i] = "-"
		} else {
			parts[i] = strconv.Itoa(n)
		}
	}
	return strings.Join(parts, ",")
}

func splitList(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' })
}
