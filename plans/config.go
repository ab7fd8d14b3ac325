package plans

// The per-attempt config: config.base as read with the sweep, and which parameters go
// into it.

import (
	"fmt"
	"iter"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// ConfigSpec is the per-attempt config file: Base with the job's parameters merged in,
// written as Format.
type ConfigSpec struct {
	Base   string // absolute; "" = none: the config is the parameters alone
	Format Format
	// Doc is the base as it was read with the sweep (nil without a base): attempts are
	// rendered from it, so an edit to the file after submission changes no attempt.
	Doc *Map
	// Add names the parameters merged although the base lacks them; AddAll merges
	// every one.
	Add    []string
	AddAll bool
}

// Merges reports whether a parameter goes into the rendered config. Without a base,
// every one does: the config is the parameters. With one, only those whose (dotted)
// path the base has, and those config.add names: a trainer with a strict config
// schema rejects keys it does not know, and most parameters (task, seed) are meant
// for the command line.
func (c *ConfigSpec) Merges(key string) bool {
	if c == nil || c.Doc == nil || c.AddAll || slices.Contains(c.Add, key) {
		return true
	}
	_, ok := c.Doc.Path(key)
	return ok
}

// Render is the config of an attempt with these parameters: the base with the
// parameters it merges set at their dotted paths, a mapping merged into the base's
// mapping there key by key (lora: {r: 32} keeps the base's lora.alpha), as OmegaConf
// and Hydra merge, rather than put in its place.
func (c *ConfigSpec) Render(params *Map) *Map {
	doc := NewMap()
	if c != nil && c.Doc != nil {
		doc = c.Doc.Clone()
	}
	for _, k := range params.Keys {
		if c.Merges(k) {
			doc.mergePath(k, params.Vals[k])
		}
	}
	return doc
}

// Placeholder is the value of a placeholder {name} in an attempt with these
// parameters, whose config Render made rendered: the parameter (see Map.Param), but
// one that is a mapping as the config holds it, what the trainer reads there: the
// base's keys and the dotted parameters under it (training.gradient_accumulation_steps,
// which the ladder sets) merged in.
func Placeholder(params, rendered *Map, name string) (any, bool) {
	v, ok := params.Param(name)
	if _, mapping := v.(*Map); mapping {
		if merged, in := rendered.Path(name); in {
			return merged, true
		}
	}
	return v, ok
}

// mergePath puts v at a dotted path as SetPath does, but where both v and what is
// there are mappings, merges v's keys into it, each in the same way.
func (m *Map) mergePath(path string, v any) {
	if add, ok := v.(*Map); ok {
		if there, ok := m.Path(path); ok {
			if into, ok := there.(*Map); ok {
				for _, k := range add.Keys {
					into.mergePath(k, add.Vals[k])
				}
				return
			}
		}
	}
	m.SetPath(path, cloneValue(v)) // the job's own mapping stays as it is
}

// Path returns the value at a dotted path ("training.batch_size").
func (m *Map) Path(path string) (any, bool) {
	var v any = m
	for _, p := range strings.Split(path, ".") {
		mm, ok := v.(*Map)
		if !ok {
			return nil, false
		}
		if v, ok = mm.Get(p); !ok {
			return nil, false
		}
	}
	return v, true
}

// Param is a job's parameter as its trainer gets it: the parameter of that name, or,
// for a dotted key, the value at the rest of the path in a parameter that is a
// mapping: training.batch_size in params {training: {batch_size: 32}}, which Render
// merges into the base's training section. Where both are written, the later one is
// what Render leaves in the config, and what Param reads.
func (m *Map) Param(key string) (any, bool) {
	in, k := m.locate(key)
	if in == nil {
		return nil, false
	}
	return in.Vals[k], true
}

// setParam sets a parameter where Param reads it (in place: the caller's own copy),
// or else under key, to a copy of v: a mapping merged key by key into a mapping there,
// as Render merges one into the base (set: {training: {gradient_checkpointing: true}}
// keeps training's batch_size).
func (m *Map) setParam(key string, v any) {
	in, k := m.locate(key)
	if in == nil {
		in, k = m, key
	}
	in.mergeParam(k, v)
}

// mergeParam puts a copy of v under k: merged key by key into the mapping there where
// both are mappings, else in place of what is there.
func (m *Map) mergeParam(k string, v any) {
	add, ok := v.(*Map)
	into, there := m.Vals[k].(*Map)
	if !ok || !there {
		m.Set(k, cloneValue(v))
		return
	}
	for _, kk := range add.Keys {
		into.mergePath(kk, add.Vals[kk])
	}
}

// locate is the mapping, m or one nested in a parameter of it, and the key there, that
// Param reads key from; nil where none holds it. Of the parameters that could hold it
// (the key itself, training.opt: {...}, training: {...}), Render leaves in the config
// the one written last.
func (m *Map) locate(key string) (*Map, string) {
	if m == nil {
		return nil, ""
	}
	var in *Map
	var at, holder string
	take := func(h string, sub *Map, k string) {
		// Two hold it (rare): the one written later.
		if in == nil || slices.Index(m.Keys, h) > slices.Index(m.Keys, holder) {
			in, at, holder = sub, k, h
		}
	}
	if _, ok := m.Vals[key]; ok {
		take(key, m, key)
	}
	for i := strings.IndexByte(key, '.'); i >= 0; i = nextDot(key, i) {
		if sub, ok := m.Vals[key[:i]].(*Map); ok {
			if nested, k := sub.locate(key[i+1:]); nested != nil {
				take(key[:i], nested, k)
			}
		}
	}
	return in, at
}

// nextDot is the index of the dot in key after the one at i, or -1.
func nextDot(key string, i int) int {
	if j := strings.IndexByte(key[i+1:], '.'); j >= 0 {
		return i + 1 + j
	}
	return -1
}

// paramPaths yields a job's parameters by the keys a ladder or a placeholder may name
// them by: each parameter under its own key, then each leaf of one that is a mapping
// under its dotted path (training.batch_size), with the parameter it is in (top). A
// path may come twice (training.batch_size written dotted too).
func paramPaths(params *Map) func(yield func(string, paramAt) bool) {
	return func(yield func(string, paramAt) bool) {
		for _, k := range params.Keys {
			v := params.Vals[k]
			if !yield(k, paramAt{top: k, v: v}) {
				return
			}
			sub, ok := v.(*Map)
			if !ok {
				continue
			}
			for l, lv := range sub.LeafValues() {
				if !yield(k+"."+l, paramAt{top: k, v: lv}) {
					return
				}
			}
		}
	}
}

// paramAt is a value paramPaths yields, and the parameter it is in.
type paramAt struct {
	top string
	v   any
}

// SetPath puts v at a dotted path, making the mappings on the way.
func (m *Map) SetPath(path string, v any) {
	parts := strings.Split(path, ".")
	for _, p := range parts[:len(parts)-1] {
		child, ok := m.Vals[p].(*Map)
		if !ok {
			child = NewMap()
			m.Set(p, child)
		}
		m = child
	}
	m.Set(parts[len(parts)-1], v)
}

// LeafValues yields the dotted path and the value of every value that is not a
// mapping, in the document's order, as Leaves lists them: found by walking the
// mappings, not by splitting the path again, which a key with a dot in it (a.b: 1)
// would lose.
func (m *Map) LeafValues() iter.Seq2[string, any] {
	return func(yield func(string, any) bool) { m.eachLeaf("", yield) }
}

func (m *Map) eachLeaf(prefix string, yield func(string, any) bool) bool {
	for _, k := range m.Keys {
		if child, ok := m.Vals[k].(*Map); ok && child.Len() > 0 {
			if !child.eachLeaf(prefix+k+".", yield) {
				return false
			}
			continue
		}
		if !yield(prefix+k, m.Vals[k]) {
			return false
		}
	}
	return true
}

// Leaves lists the dotted paths of every value that is not a mapping, in the
// document's order.
func (m *Map) Leaves() []string {
	var out []string
	for l := range m.LeafValues() {
		out = append(out, l)
	}
	return out
}

func (c *checker) config(doc *Map, dir string) *ConfigSpec {
	v, ok := doc.Get("config")
	if !ok || v == nil {
		return nil
	}
	var base, format string
	var add any
	switch t := v.(type) {
	case string:
		base = t
	case *Map:
		for _, k := range t.Keys {
			if !slices.Contains(configKeys, k) {
				c.fail("config."+k, "unknown key%s; config has base, format and add", Suggest(k, configKeys))
			}
		}
		base = c.str(t, "base", "")
		format = c.str(t, "format", "")
		add = t.Vals["add"]
	default:
		c.fail("config", "write config: {base: configs/train.yaml, format: yaml}")
		return nil
	}
	spec := &ConfigSpec{Format: YAML}
	if base != "" {
		spec.Base = base
		if !filepath.IsAbs(base) {
			spec.Base = filepath.Join(dir, base)
		}
		spec.Format = FormatOf(base)
		spec.Doc = c.readBase(spec.Base)
	}
	switch Format(strings.ToLower(format)) {
	case "":
	case YAML, "yml":
		spec.Format = YAML
	case JSON:
		spec.Format = JSON
	default:
		c.fail("config.format", "%q is not a format gpuq writes: use yaml or json", format)
	}
	spec.Add, spec.AddAll = c.configAdd(add)
	return spec
}

func (c *checker) readBase(path string) *Map {
	data, err := c.readFile(path)
	if err != nil {
		c.fail("config.base", "%s cannot be read (%v): config.base is relative to the sweep file", path, err)
		return nil
	}
	doc, err := Decode(data, FormatOf(path))
	if err != nil {
		c.fail("config.base", "%s: %v", path, err)
	}
	return doc
}

func (c *checker) configAdd(v any) (names []string, all bool) {
	switch t := v.(type) {
	case nil:
		return nil, false
	case string:
		if t == "all" {
			return nil, true
		}
	case []any:
		for _, e := range t {
			s, ok := e.(string)
			if !ok {
				names = nil
				break
			}
			names = append(names, s)
		}
		if len(names) == len(t) {
			return names, false
		}
	}
	c.fail("config.add", "write the parameters to merge although config.base lacks them, e.g. add: [task, seed], or add: all")
	return nil, false
}

// checkAdd refuses a config.add entry that no job has as a parameter: a typo there
// would leave the parameter out of the config as silently as no entry at all.
func (c *checker) checkAdd(s *Sweep) {
	if s.Config == nil {
		return
	}
	have := map[string]bool{}
	for _, j := range s.Jobs {
		for _, k := range j.Params.Keys {
			have[k] = true
		}
	}
	var known []string
	for k := range have {
		known = append(known, k)
	}
	sort.Strings(known)
	for _, a := range s.Config.Add {
		if !have[a] {
			c.fail("config.add", "%q is not a parameter of any job%s", a, Suggest(a, known))
		}
	}
}

// paramWarnings are the parameters that reach the trainer nowhere: not merged into the
// config, named by no placeholder. One that is a near miss of a key of config.base
// (gradient_checkpoint for gradient_checkpointing) says so; one that may be a typo of a
// key of the base the job lacks (a matrix axis sede for seed) asks.
func (s *Sweep) paramWarnings() []string {
	rc := s.reach()
	var lost, named []string // named: each lost one, with what it may have meant
	var out []string
	seen := map[string]bool{}
	for _, j := range s.Jobs {
		for _, k := range j.Params.Keys {
			if seen[k] || rc.reaches(k) {
				continue
			}
			seen[k] = true
			if rc.leaves != nil {
				if near := nearMiss(k, rc.leaves); near != "" {
					out = append(out, fmt.Sprintf("%s: parameter %s is not a key of config.base (%s), so it is not written into the config: did you mean %s?",
						s.File, k, filepath.Base(s.Config.Base), near))
					continue
				}
			}
			lost = append(lost, k)
			lacks := slices.DeleteFunc(slices.Clone(rc.leaves), func(l string) bool { _, has := j.Params.Param(l); return has })
			named = append(named, k+Suggest(k, lacks))
		}
	}
	if len(lost) > 0 {
		what, them := "parameter "+named[0]+" reaches", "it"
		if len(lost) > 1 {
			what, them = "parameters "+strings.Join(named, ", ")+" reach", "them"
		}
		fix := fmt.Sprintf("name %s in the command or env (\"{%s}\")", them, lost[0])
		switch {
		case rc.leaves != nil && rc.config:
			fix += fmt.Sprintf(", or list %s under config.add to write %s into the config although config.base lacks %s", them, them, them)
		case !rc.config:
			fix += ", or pass the rendered config to the trainer: --config \"{config}\""
		}
		out = append(out, fmt.Sprintf("%s: %s the trainer nowhere: %s", s.File, what, fix))
	}
	return out
}

// configReaches reports whether the trainer is told where its rendered config is.
func (s *Sweep) configReaches() bool {
	for _, a := range s.Command {
		if strings.Contains(a, "{config}") {
			return true
		}
	}
	for _, e := range s.Env {
		if strings.Contains(e.Value, "{config}") {
			return true
		}
	}
	return false
}

// placeholders are the names the command, env and model descriptions fill in.
func (s *Sweep) placeholders() map[string]bool {
	used := map[string]bool{}
	add := func(tmpl string) {
		names, _ := Placeholders(tmpl)
		for _, n := range names {
			used[n] = true
		}
	}
	for _, a := range s.Command {
		add(a)
	}
	for _, e := range s.Env {
		add(e.Value)
	}
	for _, j := range s.Jobs {
		if j.Model == nil {
			continue
		}
		for _, v := range j.Model.Vals {
			add(FormatValue(v))
		}
	}
	return used
}

// nearMiss returns the key of known (dotted paths) that word is most likely a
// misspelling or a misplacing of, or "": gradient_checkpoint for gradient_checkpointing,
// batch_size for training.batch_size. It is close as Suggest's (see closeTo), and
// stricter besides: a parameter that is simply not in the config (task, seed) must not
// be taken for a typo of a short key that happens to be close. Its edits count a swap
// of two letters as two, so that a matrix axis sede, beside a key seed of the base that
// the job lacks, is asked about as a parameter that reaches the trainer nowhere (see
// paramWarnings) rather than said to be seed misplaced.
func nearMiss(word string, known []string) string {
	best, bestD := "", 0
	for _, k := range known {
		if k == word {
			continue
		}
		d, close := edits(word, k)
		short := min(len(word), len(k))
		if last := k[strings.LastIndexByte(k, '.')+1:]; !strings.Contains(word, ".") && last != k {
			if dl, cl := edits(word, last); cl && (!close || dl < d) {
				d, close, short = dl, cl, min(len(word), len(last))
			}
		}
		if close && short >= 4 && d <= 1+short/6 && (best == "" || d < bestD) {
			best, bestD = k, d
		}
	}
	return best
}

// edits is how many letters put in, taken out or changed make word of known (case
// aside), and whether word is close to known at all (see closeTo).
func edits(word, known string) (int, bool) {
	_, close := closeTo(word, known)
	return distance([]rune(strings.ToLower(word)), []rune(strings.ToLower(known)), false), close
}
