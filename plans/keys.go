package plans

// Where a job's ladder acts: the parameters the rungs change, found in the job's
// parameters or in its config base, under the names trainers call them by.

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// ladderRoles are the parameters the default ladder and the effective batch are written
// for, each with the names trainers also give it: Hugging Face's TrainingArguments
// (per_device_train_batch_size, dataloader_num_workers), DeepSpeed's config
// (train_micro_batch_size_per_gpu), Megatron (micro_batch_size), PyTorch Lightning
// (accumulate_grad_batches) and torch's DataLoader (num_workers).
var ladderRoles = []struct {
	Role  string
	Names []string
}{
	{KeyBatch, []string{KeyBatch, "per_device_train_batch_size", "train_micro_batch_size_per_gpu", "micro_batch_size"}},
	{KeyAccumulation, []string{KeyAccumulation, "accumulate_grad_batches"}},
	{KeyCheckpointing, []string{KeyCheckpointing}},
	{KeyDataWorkers, []string{KeyDataWorkers, "dataloader_num_workers", "num_workers"}},
}

// roleNamesOf is the names a role goes by.
func roleNamesOf(role string) []string {
	for _, r := range ladderRoles {
		if r.Role == role {
			return r.Names
		}
	}
	return nil
}

func roleNames() []string {
	out := make([]string, len(ladderRoles))
	for i, r := range ladderRoles {
		out[i] = r.Role
	}
	return out
}

// BatchKeys are the parameters whose product is a job's effective batch.
type BatchKeys struct{ Micro, Accumulation string }

// Effective is micro-batch × accumulation, the batch an optimizer step sees; ok is
// false when p has no integer micro-batch.
func (k BatchKeys) Effective(p *Map) (int64, bool) {
	b, ok := p.Param(k.Micro)
	bi, isInt := b.(int64)
	if !ok || !isInt {
		return 0, false
	}
	acc := int64(1)
	if a, ok := p.Param(k.Accumulation); ok {
		if ai, isInt := a.(int64); isInt {
			acc = ai
		}
	}
	return bi * acc, true
}

// String names the product, for messages.
func (k BatchKeys) String() string { return k.Micro + " × " + k.Accumulation }

// evalParts are path elements under which a batch size is not the training one.
var evalParts = []string{"eval", "evaluation", "val", "valid", "validation", "test", "inference", "predict", "generation"}

// reach says which keys reach a sweep's trainer, computed once for all its jobs, and
// keeps the ladders fitted to each set of parameter names: the jobs of a sweep mostly
// share one, and a trace has a hundred thousand jobs.
type reach struct {
	s      *Sweep
	used   map[string]bool // named by a placeholder, or read inside by one
	config bool            // the trainer is told where its config is
	leaves []string        // config.base's keys
	fits   map[string]*fitted
	sig    []byte // fit's buffer
}

func (s *Sweep) reach() *reach {
	used := s.placeholders()
	// A placeholder that reads inside a mapping parameter ({training.batch_size})
	// names that parameter too.
	for name := range used {
		for i := strings.IndexByte(name, '.'); i >= 0; i = nextDot(name, i) {
			used[name[:i]] = true
		}
	}
	return &reach{s: s, used: used, config: s.configReaches(), leaves: s.baseLeaves(), fits: map[string]*fitted{}}
}

// reaches reports whether a parameter gets to the trainer: by a placeholder, or in the
// rendered config.
func (rc *reach) reaches(k string) bool { return rc.used[k] || rc.config && rc.s.Config.Merges(k) }

// namedFor reports whether key is called one of names by its last dotted part, outside
// an evaluation section.
func namedFor(key string, names []string) bool {
	i := strings.LastIndexByte(key, '.')
	if i >= 0 && slices.ContainsFunc(strings.Split(key[:i], "."), func(p string) bool { return slices.Contains(evalParts, strings.ToLower(p)) }) {
		return false
	}
	return slices.Contains(names, key[i+1:])
}

// findRoles finds, for each role, the key a job has it under: the one oom.keys names,
// else one named for it by its last dotted part (training.batch_size), outside
// evaluation sections: the parameter that reaches the trainer, else the key of
// config.base, else the parameter. ladderRoles with several candidates are left out, with a
// warning.
func (rc *reach) findRoles(params *Map, named map[string]string) (found map[string]string, ambiguous []string) {
	found = map[string]string{}
	for _, r := range ladderRoles {
		if k, ok := named[r.Role]; ok {
			found[r.Role] = k
			continue
		}
		// A parameter the trainer gets first, then a key of the base, then a
		// parameter that goes nowhere (the warnings say so). A leaf of a mapping
		// parameter (training.batch_size of training: {...}) reaches the trainer as
		// that parameter does.
		var reached, base, lost []string
		for k, at := range paramPaths(params) {
			switch {
			case !namedFor(k, r.Names) || slices.Contains(reached, k) || slices.Contains(lost, k):
				// A path written twice (dotted, and in a mapping) is one key.
			case rc.reaches(k) || rc.reaches(at.top):
				reached = append(reached, k)
			default:
				lost = append(lost, k)
			}
		}
		for _, k := range rc.leaves {
			if namedFor(k, r.Names) {
				base = append(base, k)
			}
		}
		cands := reached
		if len(cands) == 0 {
			cands = base
		}
		if len(cands) == 0 {
			cands = lost
		}
		switch len(cands) {
		case 0:
		case 1:
			found[r.Role] = cands[0]
		default:
			ambiguous = append(ambiguous, fmt.Sprintf("%s could be %s", r.Role, strings.Join(cands, " or ")))
		}
	}
	return found, ambiguous
}

// oomKeys reads oom.keys: the ladder's roles, each to the key the trainer has it under.
func (c *checker) oomKeys(v any) map[string]string {
	m, ok := v.(*Map)
	if !ok {
		c.fail("oom.keys", "write a mapping of the ladder's parameters to your trainer's keys, e.g. keys: {batch_size: train.micro_bs, gradient_checkpointing: model.grad_ckpt}")
		return nil
	}
	out := map[string]string{}
	for _, role := range m.Keys {
		key, ok := m.Vals[role].(string)
		switch {
		case !slices.Contains(roleNames(), role):
			c.fail("oom.keys."+role, "the ladder has no parameter %q%s; oom.keys names %s", role, Suggest(role, roleNames()), strings.Join(roleNames(), ", "))
		case !ok || key == "" || !validName(key):
			c.fail("oom.keys."+role, "write the key your trainer reads, a name or a dotted path such as train.micro_bs")
		default:
			out[role] = key
		}
	}
	return out
}

// fitted is the ladder of the jobs with one set of parameter names.
type fitted struct {
	ladder    []Rung
	batch     BatchKeys
	fromBase  []string  // keys the jobs take from config.base
	missing   []rungKey // keys a written ladder names that the jobs lack
	ambiguous []string
	// unscaled are the keys the default ladder would scale whose values are no
	// numbers (batch_size: "8"): their rung is left out, and a warning says why.
	unscaled []string
}

// rungKey is a key one rung of a ladder names.
type rungKey struct {
	rung int
	key  string
}

// fit fits the sweep's ladder to the jobs with params' names: the rungs' parameters
// found where the jobs have them (see findRoles). A rung of the default ladder whose
// keys the jobs lack is left out; a written rung is kept, and its missing keys listed.
func (rc *reach) fit(params *Map) *fitted {
	// Jobs alike in their parameters' names, and in which are numbers (a batch size
	// written as a string takes no halving rung), fit alike. The signature is written
	// into one buffer for all the jobs, and a string made of it only for a new fit.
	sig := rc.sig[:0]
	for k, at := range paramPaths(params) {
		sig = append(sig, k...)
		if _, num := Number(at.v); num {
			sig = append(sig, '#')
		}
		sig = append(sig, 0)
	}
	rc.sig = sig
	if f, ok := rc.fits[string(sig)]; ok {
		return f
	}
	s := rc.s
	roles, ambiguous := rc.findRoles(params, s.OOM.Keys)
	f := &fitted{ambiguous: ambiguous,
		batch: BatchKeys{Micro: cmp.Or(roles[KeyBatch], KeyBatch), Accumulation: cmp.Or(roles[KeyAccumulation], KeyAccumulation)}}
	ladder, written := s.OOM.Ladder, s.OOM.Ladder != nil
	if !written {
		ladder = DefaultLadder()
	}
	for r, rung := range ladder {
		rung = rung.renamed(roles)
		ok := true
		for _, k := range rung.Keys() {
			if _, has := params.Param(k); has || slices.Contains(f.fromBase, k) {
				continue
			}
			if v, inBase := s.baseValue(k); inBase && isScalar(v) {
				f.fromBase = append(f.fromBase, k)
				continue
			}
			ok = false
			if written {
				f.missing = append(f.missing, rungKey{r, k})
			}
		}
		for _, fac := range rung.Scale {
			v, has := params.Param(fac.Key)
			if !has {
				v, has = s.baseValue(fac.Key)
			}
			if _, num := Number(v); has && !num && !written {
				ok = false
				f.unscaled = append(f.unscaled, fac.Key)
			}
		}
		if ok || written {
			f.ladder = append(f.ladder, rung)
		}
	}
	rc.fits[string(sig)] = f
	return f
}

// fitLadder gives a job its ladder and batch keys, each parameter the rungs change
// taken from config.base into the job's parameters when only the base has it, so that
// the rungs can change it and the estimate, shape and effective batch follow.
func (c *checker) fitLadder(rc *reach, j *Job, note func(field, job, msg string)) {
	f := rc.fit(j.Params)
	for _, a := range f.ambiguous {
		c.warn(fmt.Sprintf("%s: the ladder cannot tell which key to change: %s; name it with oom: {keys: {...}}", rc.s.File, a))
	}
	for _, k := range f.unscaled {
		v, ok := j.Params.Param(k)
		if !ok {
			v, _ = rc.s.baseValue(k)
		}
		c.warn(fmt.Sprintf("%s: %s is %q, not a number: an OOM will not halve the batch (nor double the accumulation); write it without quotes",
			rc.s.File, k, FormatValue(v)))
	}
	j.Ladder, j.Batch = f.ladder, f.batch
	for _, k := range f.fromBase {
		v, _ := rc.s.baseValue(k)
		j.Params.Set(k, v)
	}
	for _, m := range f.missing {
		known := append(slices.Clone(j.Params.Keys), rc.leaves...)
		note(fmt.Sprintf("oom.ladder[%d]", m.rung), j.ID, fmt.Sprintf("names %q, which the job has neither as a parameter nor in config.base, so the rung would degrade nothing%s: add it to params or fix the name",
			m.key, Suggest(m.key, known)))
	}
	if rc.s.OOM.Ladder == nil {
		return
	}
	for r, rung := range j.Ladder {
		for _, fac := range rung.Scale {
			if v, ok := j.Params.Param(fac.Key); ok {
				if _, num := Number(v); !num {
					note(fmt.Sprintf("oom.ladder[%d].scale.%s", r, fac.Key), j.ID, fmt.Sprintf("scales %q, whose value %q is not a number", fac.Key, FormatValue(v)))
				}
			}
		}
	}
}

// baseValue is the value config.base has at a dotted path.
func (s *Sweep) baseValue(key string) (any, bool) {
	if s.Config == nil || s.Config.Doc == nil {
		return nil, false
	}
	return s.Config.Doc.Path(key)
}

func (s *Sweep) baseLeaves() []string {
	if s.Config == nil || s.Config.Doc == nil {
		return nil
	}
	return s.Config.Doc.Leaves()
}

// renamed is the rung with the ladder's role names replaced by the job's keys.
func (r Rung) renamed(keys map[string]string) Rung {
	name := func(k string) string { return cmp.Or(keys[k], k) }
	if !slices.ContainsFunc(r.Keys(), func(k string) bool { return name(k) != k }) {
		return r // shared by every job, as written
	}
	out := r
	if r.Set != nil {
		out.Set = NewMap()
		for _, k := range r.Set.Keys {
			out.Set.Set(name(k), r.Set.Vals[k])
		}
	}
	out.Scale = make([]Factor, len(r.Scale))
	for i, f := range r.Scale {
		out.Scale[i] = Factor{Key: name(f.Key), By: f.By}
	}
	if r.Scale == nil {
		out.Scale = nil
	}
	return out
}

// noRungWarning names, once for the sweep, the jobs an OOM would fail at once: their
// ladder is empty. A sweep that writes an empty ladder (oom: {ladder: []}, as a one-off
// command's does) asked for that.
func (s *Sweep) noRungWarning() []string {
	if s.OOM.Ladder != nil && len(s.OOM.Ladder) == 0 {
		return nil
	}
	var bare []string
	batch, batchOnly := "", true // every bare job has a batch size and no accumulation
	for _, j := range s.Jobs {
		if len(j.Ladder) > 0 {
			continue
		}
		// Its batch keys as its ladder was fitted to find them (a dotted path, a name
		// oom.keys gives): one that is no number has fit's warning instead.
		b, hasBatch := j.Params.Param(j.Batch.Micro)
		acc, hasAcc := j.Params.Param(j.Batch.Accumulation)
		if quoted := func(v any) bool { _, num := Number(v); return !num }; hasBatch && quoted(b) || hasAcc && quoted(acc) {
			continue
		}
		bare = append(bare, j.ID)
		batch, batchOnly = cmp.Or(batch, j.Batch.Micro), batchOnly && hasBatch && !hasAcc
	}
	if len(bare) == 0 {
		return nil
	}
	if batchOnly {
		return []string{fmt.Sprintf("%s: an OOM will fail %s: it has %s, but the ladder halves the batch only while it doubles %s, so that the effective batch stays: add %s: 1 to its parameters (and pass it to the trainer), or write oom.ladder",
			s.File, jobList(bare, len(s.Jobs)), batch, KeyAccumulation, KeyAccumulation)}
	}
	var names []string
	for _, r := range ladderRoles {
		names = append(names, r.Role)
	}
	sort.Strings(names)
	where := "in its parameters"
	if s.Config != nil && s.Config.Doc != nil {
		where += " or config.base"
	}
	return []string{fmt.Sprintf("%s: an OOM will fail %s: no ladder key found %s (%s, or the names Hugging Face and Lightning use); name yours with oom: {keys: {batch_size: train.micro_bs}}, or write oom.ladder",
		s.File, jobList(bare, len(s.Jobs)), where, strings.Join(names, ", "))}
}

// jobList names some jobs of a sweep of total jobs: "every job", or the first few.
func jobList(ids []string, total int) string {
	switch {
	case len(ids) == total && total > 1:
		return "every job"
	case len(ids) == 1:
		return "job " + ids[0]
	case len(ids) <= 3:
		return "jobs " + strings.Join(ids, ", ")
	}
	return fmt.Sprintf("jobs %s and %d more", strings.Join(ids[:3], ", "), len(ids)-3)
}
