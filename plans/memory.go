package plans

// A job's memory: a size, probe, or a model description estimated at each tier.

import (
	"fmt"
	"slices"
	"strings"
)

// MemoryAt is the job's estimate with the given parameters (those of a tier): by its
// model when it has one, else as declared.
func (j *Job) MemoryAt(params *Map) int64 {
	if j.Model == nil {
		return j.Memory
	}
	m, err := j.ModelAt(params)
	if err != nil {
		// Every tier's parameters were checked against the model when the sweep was read.
		return j.Memory
	}
	return m.Estimate().Total()
}

// StateFloor is the least the job's model holds on a card before any batch, at any
// tier of its ladder: its weights, gradients, optimizer state, copies and CUDA
// context, no activations or logits. ok is false for a job without a model.
func (j *Job) StateFloor() (least Breakdown, ok bool) {
	if j.Model == nil {
		return Breakdown{}, false
	}
	for _, t := range Tiers(j.Params, j.Ladder) {
		m, err := j.ModelAt(t.Params)
		if err != nil {
			continue // every tier was checked when the sweep was read
		}
		b := m.Estimate()
		b.Activations, b.Logits, b.Missing = 0, 0, nil
		if !ok || b.Total() < least.Total() {
			least, ok = b, true
		}
	}
	return least, ok
}

// ModelAt reads the job's model description with the given parameters. A job over
// several cards (gpus_per_job) spreads its model over them unless the description
// says otherwise (gpus:), for ZeRO and split_layers.
func (j *Job) ModelAt(params *Map) (Model, error) {
	desc := j.Model
	if _, ok := desc.Get("gpus"); !ok && j.GPUsPerJob > 1 {
		desc = desc.Clone()
		desc.Set("gpus", int64(j.GPUsPerJob))
	}
	return ModelOf(desc, params)
}

// memory reads a job's memory: a size, "probe", or {model: {...}}.
func (c *checker) memory(field, job string, v any, j *Job) {
	if s, ok := v.(string); ok && strings.EqualFold(s, "probe") {
		j.Probe = true
		return
	}
	m, ok := v.(*Map)
	if !ok {
		j.Memory = c.size(field, job, v)
		return
	}
	for _, k := range m.Keys {
		if !slices.Contains(memoryKeys, k) {
			c.failJob(field+"."+k, job, "unknown key%s; memory is a size (\"11GiB\"), probe, or {model: {params: 7B, ...}}", Suggest(k, memoryKeys))
		}
	}
	desc, ok := m.Vals["model"].(*Map)
	if !ok {
		c.failJob(field+".model", job, "describe the model as a mapping, e.g. {name: mistral-7b, lora_rank: 16, seq_len: 512, micro_batch: \"{batch_size}\"}; `gpuq estimate --help` lists the keys")
		return
	}
	desc, err := ExpandModel(desc, c.dir, c.readFile)
	if err != nil {
		c.failJob(field+".model", job, "%v", err)
		return
	}
	j.Model = desc
}

// checkModel estimates a job described by its model, at every tier of its ladder, so
// that a rung whose parameters the description cannot take fails now, not mid-sweep.
func (c *checker) checkModel(j *Job, note func(field, job, msg string)) {
	if j.Model == nil {
		return
	}
	for _, t := range Tiers(j.Params, j.Ladder) {
		m, err := j.ModelAt(t.Params)
		if err != nil {
			msg := err.Error()
			if t.N > 0 {
				msg = fmt.Sprintf("at tier %d (%s changed): %s", t.N, strings.Join(t.Changed, ", "), msg)
			}
			note(j.field("memory")+".model", j.ID, msg)
			return
		}
		if t.N == 0 {
			b := m.Estimate()
			j.Memory = b.Total()
			if j.HostMemory == 0 { // what it offloads; a declared host_memory wins
				j.HostMemory = b.Host
			}
		}
	}
}
