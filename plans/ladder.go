package plans

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// The parameters the default ladder and the effective batch are written for.
const (
	KeyBatch          = "batch_size"
	KeyAccumulation   = "gradient_accumulation_steps"
	KeyCheckpointing  = "gradient_checkpointing"
	KeyDataWorkers    = "num_data_workers"
	maxTiers          = 64 // bounds a repeating rung whatever its factors
	defaultMaxAttempt = 4
)

// Rung is one step of the OOM ladder. Rungs apply cumulatively: tier 2 is the job with
// rungs 1 and 2 applied.
type Rung struct {
	Set       *Map     // parameters set to fixed values
	Scale     []Factor // numeric parameters multiplied (integers floored, at least 1)
	Repeat    bool     // apply again after each further OOM while it still changes something
	Exclusive bool     // from this rung on, the job runs alone on its card
}

// Factor multiplies one parameter.
type Factor struct {
	Key string
	By  float64
}

// DefaultLadder is what practitioners do by hand after an OOM, cheapest first:
// checkpointing (~40-60% less activation memory, ~8% slower), then halving the batch
// while doubling accumulation (effective batch kept), then no data workers, alone on a card.
func DefaultLadder() []Rung {
	set := func(k string, v any) *Map { m := NewMap(); m.Set(k, v); return m }
	return []Rung{
		{Set: set(KeyCheckpointing, true)},
		{Scale: []Factor{{KeyBatch, 0.5}, {KeyAccumulation, 2}}, Repeat: true},
		{Set: set(KeyDataWorkers, int64(0)), Exclusive: true},
	}
}

// Keys lists the parameters the rung touches.
func (r Rung) Keys() []string {
	var ks []string
	if r.Set != nil {
		ks = append(ks, r.Set.Keys...)
	}
	for _, f := range r.Scale {
		ks = append(ks, f.Key)
	}
	return ks
}

// Apply returns p with the rung applied, and the keys whose values changed.
func (r Rung) Apply(p *Map) (*Map, []string) {
	out := p.Clone()
	var changed []string
	if r.Set != nil {
		for _, k := range r.Set.Keys {
			old, had := out.Param(k)
			was := valueKey(old)
			out.setParam(k, r.Set.Vals[k])
			if now, _ := out.Param(k); !had || valueKey(now) != was {
				changed = append(changed, k)
			}
		}
	}
	for _, f := range r.Scale {
		old, _ := out.Param(f.Key)
		nv := scale(old, f.By)
		if valueKey(nv) != valueKey(old) {
			changed = append(changed, f.Key)
		}
		out.setParam(f.Key, nv)
	}
	return out, changed
}

// scale scales a number by a factor. A count stays a whole number (floor, at least 1),
// written as an integer (8) or as a float (8.0): a batch of 3.5 is no batch.
func scale(v any, by float64) any {
	whole := func(f float64) float64 { return max(1, math.Floor(f*by)) }
	switch t := v.(type) {
	case int64:
		return max(1, int64(math.Floor(float64(t)*by)))
	case float64:
		if t == math.Trunc(t) {
			return whole(t)
		}
		return t * by
	case Float:
		if t.Value == math.Trunc(t.Value) {
			return whole(t.Value)
		}
		return t.Value * by
	}
	return v
}

// shrinks reports whether the rung scales something down; only such a rung may repeat.
func (r Rung) shrinks() bool {
	for _, f := range r.Scale {
		if f.By < 1 {
			return true
		}
	}
	return false
}

// String describes the rung the way a user would write it.
func (r Rung) String() string {
	var parts []string
	if r.Set != nil {
		for _, k := range r.Set.Keys {
			parts = append(parts, fmt.Sprintf("%s=%s", k, FormatValue(r.Set.Vals[k])))
		}
	}
	for _, f := range r.Scale {
		parts = append(parts, fmt.Sprintf("%s×%s", f.Key, formatFloat(f.By)))
	}
	if r.Exclusive {
		parts = append(parts, "alone on a card")
	}
	return strings.Join(parts, ", ")
}

// Position is where a job stands on its ladder.
type Position struct {
	Tier      int    // degradations applied so far; 0 = as written
	Next      int    // index of the next rung to try
	Applied   []bool // rungs applied out of turn (host OOM) are not applied again
	Exclusive bool
}

// Step applies the next rung that changes something and returns the new parameters and
// position, the keys changed and the rung's index; ok is false at the end of the ladder.
// A repeating rung stays next while it still scales a key down. With hostOOM, only a
// rung that lowers the data workers is taken, wherever it stands: data workers are what
// fills host memory, and the rest of the ladder saves GPU memory at the cost of speed;
// ok is false, pos unchanged, where none is left.
func Step(params *Map, ladder []Rung, pos Position, hostOOM bool) (next *Map, np Position, changed []string, rung int, ok bool) {
	np = pos
	np.Applied = make([]bool, len(ladder))
	copy(np.Applied, pos.Applied)
	try := func(i int) bool {
		r := ladder[i]
		out, ch := r.Apply(params)
		if len(ch) == 0 && !(r.Exclusive && !np.Exclusive) {
			return false
		}
		if r.shrinks() && !shrinking(r, ch) {
			return false // the batch is 1: doubling accumulation alone saves nothing
		}
		next, changed, rung = out, ch, i
		np.Tier++
		np.Exclusive = np.Exclusive || r.Exclusive
		return true
	}
	if hostOOM {
		for i, r := range ladder {
			if !np.Applied[i] && r.setsDataWorkers() && try(i) {
				np.Applied[i] = true
				return next, np, changed, rung, true
			}
		}
		return params, pos, nil, -1, false
	}
	for i := pos.Next; i < len(ladder); i++ {
		if np.Applied[i] {
			continue
		}
		if try(i) {
			np.Next = i + 1
			if ladder[i].Repeat {
				np.Next = i
			}
			return next, np, changed, rung, true
		}
	}
	np.Next = len(ladder)
	return params, np, nil, -1, false
}

// setsDataWorkers reports whether the rung sets the data workers, under any name
// trainers give them (see ladderRoles), at any depth of a config.
func (r Rung) setsDataWorkers() bool {
	if r.Set == nil {
		return false
	}
	for _, k := range r.Set.Keys {
		if slices.Contains(roleNamesOf(KeyDataWorkers), k[strings.LastIndexByte(k, '.')+1:]) {
			return true
		}
	}
	return false
}

// BatchOnly reports whether every rung of a ladder changes only what a batch holds on
// the card (the micro-batch, gradient accumulation, checkpointing, data workers: each
// under any name the ladder knows it by, or the one keys, a sweep's oom.keys, gives
// it) or runs the job alone. Then no rung lowers what a job holds before its first
// batch: its weights and what is loaded with them. A rung that sets anything else (a
// precision, a LoRA rank, a model) might.
func BatchOnly(ladder []Rung, keys map[string]string) bool {
	for _, r := range ladder {
		for _, k := range r.Keys() {
			if !batchKey(k, keys) {
				return false
			}
		}
	}
	return true
}

// batchKey reports whether k is a ladder role's key (see BatchOnly).
func batchKey(k string, keys map[string]string) bool {
	for _, role := range ladderRoles {
		if keys[role.Role] == k || slices.Contains(role.Names, k[strings.LastIndexByte(k, '.')+1:]) {
			return true
		}
	}
	return false
}

// Tier is the job at one step of its ladder.
type Tier struct {
	N         int // 0 = as written
	Rung      int // index of the rung that made this tier; -1 for tier 0
	Params    *Map
	Changed   []string // keys this tier changed from the one before
	Exclusive bool
}

// Tiers lists the tiers a job steps through after GPU OOMs, one per OOM.
func Tiers(params *Map, ladder []Rung) []Tier {
	tiers := []Tier{{N: 0, Rung: -1, Params: params}}
	var pos Position
	for len(tiers) < maxTiers {
		next, np, changed, rung, ok := Step(tiers[len(tiers)-1].Params, ladder, pos, false)
		if !ok {
			break
		}
		pos = np
		tiers = append(tiers, Tier{N: np.Tier, Rung: rung, Params: next, Changed: changed, Exclusive: np.Exclusive})
	}
	return tiers
}

// shrinking reports whether an application scaled down at least one key.
func shrinking(r Rung, changed []string) bool {
	for _, f := range r.Scale {
		if f.By >= 1 {
			continue
		}
		for _, c := range changed {
			if c == f.Key {
				return true
			}
		}
	}
	return false
}

func (c *checker) oom(doc *Map) OOMPolicy {
	pol := OOMPolicy{MaxAttempts: defaultMaxAttempt}
	v, ok := doc.Get("oom")
	if !ok || v == nil {
		return pol
	}
	m, ok := v.(*Map)
	if !ok {
		c.fail("oom", "write a mapping: oom: {max_attempts: 4, ladder: [...]}")
		return pol
	}
	for _, k := range m.Keys {
		if !slices.Contains(oomKeys, k) {
			c.fail("oom."+k, "unknown key%s; oom has max_attempts, ladder and keys", Suggest(k, oomKeys))
		}
	}
	pol.MaxAttempts = c.integer(m, "max_attempts", defaultMaxAttempt, 1)
	if k, ok := m.Get("keys"); ok {
		pol.Keys = c.oomKeys(k)
	}
	if l, ok := m.Get("ladder"); ok {
		list, ok := l.([]any)
		if !ok {
			c.fail("oom.ladder", "write a list of rungs, e.g. [{set: {gradient_checkpointing: true}}]")
			return pol
		}
		pol.Ladder = []Rung{}
		for i, e := range list {
			if r, ok := c.rung(fmt.Sprintf("oom.ladder[%d]", i), e); ok {
				pol.Ladder = append(pol.Ladder, r)
			}
		}
	}
	return pol
}

func (c *checker) rung(field string, v any) (Rung, bool) {
	m, ok := v.(*Map)
	if !ok {
		c.fail(field, "a rung is a mapping such as {set: {gradient_checkpointing: true}} or {scale: {batch_size: 0.5, gradient_accumulation_steps: 2}}")
		return Rung{}, false
	}
	n := len(c.errs)
	for _, k := range m.Keys {
		if !slices.Contains(rungKeys, k) {
			c.fail(field+"."+k, "unknown key%s; a rung has set, scale, repeat and exclusive", Suggest(k, rungKeys))
		}
	}
	var r Rung
	if s, ok := m.Get("set"); ok {
		if sm, ok := s.(*Map); ok && sm.Len() > 0 {
			r.Set = sm
			for _, k := range sm.Keys {
				if v, ok := sm.Vals[k].(string); ok && strings.ContainsRune(v, 0) {
					c.fail(field+".set."+k, "%s", nulProblem)
				}
			}
		} else {
			c.fail(field+".set", "write a mapping of parameters to values, e.g. {num_data_workers: 0}")
		}
	}
	if s, ok := m.Get("scale"); ok {
		if sm, ok := s.(*Map); !ok || sm.Len() == 0 {
			c.fail(field+".scale", "write a mapping of parameters to factors, e.g. {batch_size: 0.5, gradient_accumulation_steps: 2}")
		} else {
			for _, k := range sm.Keys {
				f, ok := Number(sm.Vals[k])
				if !ok || !(f > 0) || math.IsInf(f, 1) {
					c.fail(field+".scale."+k, "a factor is a finite number above 0, e.g. 0.5")
					continue
				}
				r.Scale = append(r.Scale, Factor{Key: k, By: f})
			}
		}
	}
	r.Repeat = c.boolean(m, field+".repeat", "repeat")
	r.Exclusive = c.boolean(m, field+".exclusive", "exclusive")
	if r.Set == nil && r.Scale == nil && !r.Exclusive && len(c.errs) == n {
		c.fail(field, "the rung changes nothing: give it set, scale or exclusive: true")
	}
	if r.Repeat && !r.shrinks() {
		c.fail(field+".repeat", "only a rung that scales something down (a factor below 1) can repeat")
	}
	return r, len(c.errs) == n
}
