package plans

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// sweepWithBase writes base as the sweep's config.base and decodes the sweep.
func sweepWithBase(t *testing.T, base, sweep string) (*Sweep, error) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "base.yaml"), []byte(base), 0o644); err != nil {
		t.Fatal(err)
	}
	return DecodeSweep(filepath.Join(dir, "s.yaml"), []byte(sweep), Overrides{})
}

func rungsText(j Job) string {
	parts := make([]string, len(j.Ladder))
	for i, r := range j.Ladder {
		parts[i] = r.String()
	}
	return strings.Join(parts, "; ")
}

// TestLadderFindsItsKeys: the default ladder degrades the keys where the trainer has
// them, parameters or config base, under its own names.
func TestLadderFindsItsKeys(t *testing.T) {
	tests := []struct {
		name, base, sweep string
		rungs, batch      string // the job's ladder; its effective batch keys
		warn              string // a warning Warnings must give; "" = none about the ladder
	}{
		{
			name:  "in the base, as the tmux script injected them",
			base:  "model: gla\nbatch_size: 4\ngradient_accumulation_steps: 8\ngradient_checkpointing: false\nnum_data_workers: 8\n",
			sweep: "config: {base: base.yaml}\n",
			rungs: "gradient_checkpointing=true; batch_size×0.5, gradient_accumulation_steps×2; num_data_workers=0, alone on a card",
			batch: "batch_size × gradient_accumulation_steps",
		},
		{
			name:  "nested in the base, evaluation's batch left alone",
			base:  "training:\n  batch_size: 1\n  gradient_accumulation_steps: 8\nevaluation:\n  batch_size: 8\ndata:\n  loading: {max_length: 1024, num_workers: 2}\n",
			sweep: "config: {base: base.yaml}\n",
			rungs: "training.batch_size×0.5, training.gradient_accumulation_steps×2; data.loading.num_workers=0, alone on a card",
			batch: "training.batch_size × training.gradient_accumulation_steps",
		},
		{
			name:  "Hugging Face TrainingArguments names",
			base:  "per_device_train_batch_size: 8\ngradient_accumulation_steps: 2\ngradient_checkpointing: false\ndataloader_num_workers: 4\n",
			sweep: "config: {base: base.yaml}\n",
			rungs: "gradient_checkpointing=true; per_device_train_batch_size×0.5, gradient_accumulation_steps×2; dataloader_num_workers=0, alone on a card",
			batch: "per_device_train_batch_size × gradient_accumulation_steps",
		},
		{
			name:  "a parameter overrides the base's value at the same key",
			base:  "batch_size: 4\ngradient_accumulation_steps: 8\n",
			sweep: "config: {base: base.yaml}\nparams: {batch_size: 2, gradient_accumulation_steps: 16}\n",
			rungs: "batch_size×0.5, gradient_accumulation_steps×2",
			batch: "batch_size × gradient_accumulation_steps",
		},
		{
			name:  "named by oom.keys",
			base:  "train: {micro_bs: 4, accum: 2, ckpt: false}\n",
			sweep: "config: {base: base.yaml}\noom: {keys: {batch_size: train.micro_bs, gradient_accumulation_steps: train.accum, gradient_checkpointing: train.ckpt}}\n",
			rungs: "train.ckpt=true; train.micro_bs×0.5, train.accum×2",
			batch: "train.micro_bs × train.accum",
		},
		{
			name:  "two candidates: none is guessed",
			base:  "train: {batch_size: 4}\npretrain: {batch_size: 8}\ngradient_accumulation_steps: 1\n",
			sweep: "config: {base: base.yaml}\n",
			rungs: "",
			batch: "batch_size × gradient_accumulation_steps",
			warn:  "the ladder cannot tell which key to change: batch_size could be train.batch_size or pretrain.batch_size; name it with oom: {keys: {...}}",
		},
		{
			name:  "an odd batch in the base cannot be halved exactly",
			base:  "training: {batch_size: 3, gradient_accumulation_steps: 2}\n",
			sweep: "config: {base: base.yaml}\n",
			rungs: "training.batch_size×0.5, training.gradient_accumulation_steps×2",
			batch: "training.batch_size × training.gradient_accumulation_steps",
			warn:  "tier 1 changes the effective batch (training.batch_size × training.gradient_accumulation_steps) from 6 to 4",
		},
		{
			name:  "no key anywhere",
			base:  "lr: 0.1\n",
			sweep: "config: {base: base.yaml}\n",
			rungs: "",
			batch: "batch_size × gradient_accumulation_steps",
			warn:  "an OOM will fail every job: no ladder key found in its parameters or config.base",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := sweepWithBase(t, tt.base, "name: k\ncommand: [train, --config, \"{config}\"]\nmatrix: {lr: [0.1, 0.2]}\nconfig: {base: base.yaml}\n"+strings.Replace(tt.sweep, "config: {base: base.yaml}\n", "", 1))
			if err != nil {
				t.Fatal(err)
			}
			j := s.Jobs[0]
			if got := rungsText(j); got != tt.rungs {
				t.Errorf("ladder:\n  %s\nwant\n  %s", got, tt.rungs)
			}
			if j.Batch.String() != tt.batch {
				t.Errorf("effective batch of %s, want %s", j.Batch, tt.batch)
			}
			warnings := strings.Join(s.Warnings(), "\n")
			if tt.warn != "" && !strings.Contains(warnings, tt.warn) {
				t.Errorf("warnings\n%s\nlack %q", warnings, tt.warn)
			}
			if tt.warn == "" && strings.Contains(warnings, "ladder") {
				t.Errorf("unexpected warnings:\n%s", warnings)
			}
			// Each tier's rendered config has the degraded values at the base's keys.
			tiers := Tiers(j.Params, j.Ladder)
			last := tiers[len(tiers)-1]
			doc := s.Config.Render(last.Params)
			for _, k := range last.Changed {
				want, _ := last.Params.Get(k)
				if got, ok := doc.Path(k); !ok || valueKey(got) != valueKey(want) {
					t.Errorf("tier %d renders %s = %v, want %v", last.N, k, got, want)
				}
			}
		})
	}
}

// TestLadderKeysReachTheEstimate: a model description names a key found in the base,
// and each rung's estimate follows it.
func TestLadderKeysReachTheEstimate(t *testing.T) {
	s, err := sweepWithBase(t, "training: {batch_size: 8, gradient_accumulation_steps: 1}\n", `
name: e
command: [train, --config, "{config}"]
config: {base: base.yaml}
jobs: [{}]
memory: {model: {params: 1B, layers: 16, hidden: 2048, vocab: 32000, seq_len: 1024, micro_batch: "{training.batch_size}"}}
`)
	if err != nil {
		t.Fatal(err)
	}
	j := s.Jobs[0]
	tiers := Tiers(j.Params, j.Ladder)
	if len(tiers) != 4 {
		t.Fatalf("tiers: %d, want batch 8, 4, 2, 1", len(tiers))
	}
	if a, b := j.MemoryAt(tiers[0].Params), j.MemoryAt(tiers[1].Params); b >= a {
		t.Errorf("halving the batch did not lower the estimate: %s then %s", FormatSize(a), FormatSize(b))
	}
}

func TestOOMKeysRefused(t *testing.T) {
	for _, tt := range []struct{ oom, want string }{
		{"{keys: {batch_sizes: train.bs}}", `oom.keys.batch_sizes: the ladder has no parameter "batch_sizes" (did you mean "batch_size"?)`},
		{"{keys: {batch_size: 3}}", "oom.keys.batch_size: write the key your trainer reads"},
		{"{keys: [batch_size]}", "oom.keys: write a mapping"},
		{"{keys: {batch_size: train.bs}, ladder: [{scale: {batch_size: 0.5}}]}", `oom.ladder[0] (every job): names "train.bs", which the job has neither as a parameter nor in config.base`},
	} {
		_, err := DecodeSweep("t.yaml", []byte("name: t\ncommand: [echo, \"{config}\"]\nmatrix: {seed: [1, 2]}\noom: "+tt.oom+"\n"), Overrides{})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("oom: %s\n  got %v\n  want %q", tt.oom, err, tt.want)
		}
	}
}

// TestWrittenLadderFindsBaseKeys: a written rung may name a key of the base.
func TestWrittenLadderFindsBaseKeys(t *testing.T) {
	s, err := sweepWithBase(t, "model: {max_length: 2048}\nbatch_size: 4\n", `
name: w
command: [train, --config, "{config}"]
config: {base: base.yaml}
jobs: [{}]
oom: {ladder: [{scale: {model.max_length: 0.5}}, {scale: {batch_size: 0.5}, repeat: true}]}
`)
	if err != nil {
		t.Fatal(err)
	}
	if got := rungsText(s.Jobs[0]); got != "model.max_length×0.5; batch_size×0.5" {
		t.Errorf("ladder: %s", got)
	}
}

func TestNoRungWarnedOncePerSweep(t *testing.T) {
	s, err := DecodeSweep("n.yaml", []byte("name: n\ncommand: [train, --config, \"{config}\"]\nmatrix: {seed: [1, 2, 3, 4, 5]}\njobs: [{seed: 6, gradient_checkpointing: false}]\n"), Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	if got := oomWarnings(s); len(got) != 1 || !strings.Contains(got[0], "an OOM will fail jobs n.1, n.2, n.3 and 2 more: no ladder key found") {
		t.Errorf("want one warning naming the five jobs without a rung, got %q", got)
	}
}

// TestABatchAloneIsNamed: a sweep whose trainers take a batch size and nothing else the
// ladder changes is told what keeps its batch from being halved (the accumulation that
// keeps the effective batch), not that no ladder key was found; one where some job has
// not even that is told that no key was found.
func TestABatchAloneIsNamed(t *testing.T) {
	s, err := DecodeSweep("b.yaml", []byte("name: b\ncommand: [train, --bs, \"{per_device_train_batch_size}\"]\nparams: {per_device_train_batch_size: 8}\nmatrix: {seed: [1, 2]}\n"), Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	if got := oomWarnings(s); len(got) != 1 || !strings.Contains(got[0], "every job: it has per_device_train_batch_size, but the ladder halves the batch only while it doubles gradient_accumulation_steps") {
		t.Errorf("want one warning naming the missing accumulation, got %q", got)
	}
	// A job without even a batch size is told what the others are not.
	s, err = DecodeSweep("m.yaml", []byte("name: m\ncommand: [train, --config, \"{config}\"]\njobs: [{batch_size: 8}, {seed: 1}]\n"), Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	if got := oomWarnings(s); len(got) != 1 || !strings.Contains(got[0], "every job: no ladder key found") {
		t.Errorf("bare jobs not all with a batch size: want the warning that names no key, got %q", got)
	}
}

// oomWarnings are the sweep's warnings that an OOM would fail jobs at once.
func oomWarnings(s *Sweep) []string {
	var got []string
	for _, w := range s.Warnings() {
		if strings.Contains(w, "an OOM will fail") {
			got = append(got, w)
		}
	}
	return got
}

// TestQuotedBatchKeysAreWarnedOnce: a batch key that is no number is said once, by its
// own warning, wherever the ladder found it (oom.keys, a nested config.base); a job whose
// ladder is empty for want of a key is still named, even beside a quoted key its
// ladder does not use.
func TestQuotedBatchKeysAreWarnedOnce(t *testing.T) {
	cmd := "name: k\ncommand: [train, --config, \"{config}\"]\nconfig: {base: base.yaml}\n"
	for _, tt := range []struct {
		name, base, sweep string
		want, not         string
	}{
		{"named by oom.keys", "lr: 1\n", "params: {micro: \"8\", gradient_accumulation_steps: 2}\noom: {keys: {batch_size: micro}}\njobs: [{}]\n",
			`micro is "8", not a number`, "no ladder key found"},
		{"nested in config.base", "train: {batch_size: \"8\", gradient_accumulation_steps: 2}\n", "jobs: [{}]\n",
			`train.batch_size is "8", not a number`, "no ladder key found"},
		{"a quoted key the ladder does not use", "lr: 1\n", "params: {micro: 8, batch_size: \"x\"}\noom: {keys: {batch_size: micro}}\njobs: [{}]\n",
			"an OOM will fail", "not a number"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, err := sweepWithBase(t, tt.base, cmd+tt.sweep)
			if err != nil {
				t.Fatal(err)
			}
			w := strings.Join(s.Warnings(), "\n")
			if !strings.Contains(w, tt.want) || strings.Contains(w, tt.not) {
				t.Errorf("warnings, want %q and not %q:\n%s", tt.want, tt.not, w)
			}
		})
	}
}

// TestAMappingParameterIsLadderedAtItsOwnValue: a parameter that is a mapping over a
// section of config.base (training: {batch_size: 32} over the base's 8) is the batch
// the ladder halves, the effective batch and the estimate read, not the base's value.
func TestAMappingParameterIsLadderedAtItsOwnValue(t *testing.T) {
	s, err := sweepWithBase(t, "training: {batch_size: 8, gradient_accumulation_steps: 1, lr: 0.1}\n",
		"name: m\ncommand: [train, --config, \"{config}\"]\nconfig: {base: base.yaml}\n"+
			"memory: {model: {params: 125M, layers: 12, hidden: 768, heads: 12, seq_len: 512, micro_batch: \"{training.batch_size}\"}}\n"+
			"params: {training: {batch_size: 32}}\njobs: [{}]\n")
	if err != nil {
		t.Fatal(err)
	}
	j := s.Jobs[0]
	if eb, ok := j.Batch.Effective(j.Params); !ok || eb != 32 {
		t.Errorf("effective batch %d (%v) by %s, want 32", eb, ok, j.Batch)
	}
	if _, dotted := j.Params.Get("training.batch_size"); dotted {
		t.Errorf("the base's batch was copied into the parameters beside the job's own: %v", j.Params.Keys)
	}
	m, err := ModelOf(j.Model, j.Params)
	if err != nil {
		t.Fatal(err)
	}
	if m.MicroBatch != 32 {
		t.Errorf("estimated at batch %d, want 32", m.MicroBatch)
	}
	var halved *Tier
	for _, tier := range Tiers(j.Params, j.Ladder) {
		if slices.Contains(tier.Changed, "training.batch_size") {
			halved = &tier
			break
		}
	}
	if halved == nil {
		t.Fatalf("no tier halves training.batch_size: ladder %s", rungsText(j))
	}
	got, _ := json.Marshal(s.Config.Render(halved.Params))
	if want := `{"training":{"batch_size":16,"gradient_accumulation_steps":2,"lr":0.1}}`; string(got) != want {
		t.Errorf("tier %d rendered %s, want %s", halved.N, got, want)
	}
	// The job's own parameters stay as they were: a tier's are a copy.
	if got, _ := json.Marshal(s.Config.Render(j.Params)); string(got) != `{"training":{"batch_size":32,"gradient_accumulation_steps":1,"lr":0.1}}` {
		t.Errorf("tier 0 now renders %s", got)
	}
}

// TestMappingParametersAndTheLadder: how a mapping parameter meets the rest of a sweep.
func TestMappingParametersAndTheLadder(t *testing.T) {
	const head = "name: m\ncommand: [train, --config, \"{config}\"]\nconfig: {format: json}\n"
	decode := func(t *testing.T, doc string) *Sweep {
		t.Helper()
		s, err := DecodeSweep("m.yaml", []byte(head+doc), Overrides{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	halves := func(j Job, key string) bool {
		for _, r := range j.Ladder {
			if slices.ContainsFunc(r.Scale, func(f Factor) bool { return f.Key == key && f.By < 1 }) {
				return true
			}
		}
		return false
	}
	t.Run("the same leaf written dotted too is one key", func(t *testing.T) {
		s := decode(t, "params: {training: {batch_size: 32, gradient_accumulation_steps: 1}}\n"+
			"matrix: {seed: [1, 2], include: [{seed: 2, training.batch_size: 4}]}\n")
		j := s.Jobs[1]
		if eb, ok := j.Batch.Effective(j.Params); !ok || eb != 4 || !halves(j, "training.batch_size") {
			t.Errorf("effective batch %d (%v), ladder %s; want 4, halving training.batch_size", eb, ok, rungsText(j))
		}
		for _, w := range s.Warnings() {
			if strings.Contains(w, "could be") || strings.Contains(w, "no ladder key") {
				t.Errorf("warned: %s", w)
			}
		}
	})
	t.Run("a point's mapping merges into the params'", func(t *testing.T) {
		s := decode(t, "params: {training: {batch_size: 32}}\nmatrix: {seed: [1, 2], include: [{seed: 2, training: {lr: 0.2}}]}\n")
		got, _ := json.Marshal(s.Config.Render(s.Jobs[1].Params))
		if want := `{"training":{"batch_size":32,"lr":0.2},"seed":2}`; string(got) != want {
			t.Errorf("job 2 renders %s, want %s", got, want)
		}
		if got, _ := json.Marshal(s.Config.Render(s.Jobs[0].Params)); string(got) != `{"training":{"batch_size":32},"seed":1}` {
			t.Errorf("job 1 renders %s", got)
		}
	})
	t.Run("a rung's mapping merges into the job's", func(t *testing.T) {
		s := decode(t, "params: {training: {batch_size: 32, gradient_checkpointing: false}}\njobs: [{}]\n"+
			"oom: {ladder: [{set: {training: {gradient_checkpointing: true}}}, {scale: {training.batch_size: 0.5}}]}\n")
		tiers := Tiers(s.Jobs[0].Params, s.Jobs[0].Ladder)
		if len(tiers) < 3 {
			t.Fatalf("%d tiers", len(tiers))
		}
		for n, want := range []string{`{"batch_size":32,"gradient_checkpointing":true}`, `{"batch_size":16,"gradient_checkpointing":true}`} {
			if got, _ := json.Marshal(tiers[n+1].Params.Vals["training"]); string(got) != want {
				t.Errorf("tier %d: training %s, want %s", n+1, got, want)
			}
		}
	})
	t.Run("a rung changes no other job's, nor itself", func(t *testing.T) {
		s := decode(t, "params: {training: {batch_size: 32}}\nmatrix: {seed: [1, 2]}\n"+
			"oom: {ladder: [{set: {training: {batch_size: 16}}, scale: {training.batch_size: 0.5}}]}\n")
		rung := s.Jobs[1].Ladder[0].String()
		first := Tiers(s.Jobs[0].Params, s.Jobs[0].Ladder)
		was, _ := json.Marshal(first[1].Params)
		second := Tiers(s.Jobs[1].Params, s.Jobs[1].Ladder)
		now, _ := json.Marshal(first[1].Params)
		if s.Jobs[1].Ladder[0].String() != rung || string(now) != string(was) {
			t.Errorf("rung %s became %s; job 1's tier 1 %s became %s", rung, s.Jobs[1].Ladder[0], was, now)
		}
		if b, _ := second[1].Params.Param("training.batch_size"); b != int64(8) {
			t.Errorf("job 2's tier 1 has batch %v, want 16 halved: 8", b)
		}
	})
	t.Run("a placeholder that reads inside a mapping reaches the trainer", func(t *testing.T) {
		s, err := DecodeSweep("m.yaml", []byte("name: m\ncommand: [train, --bs, \"{training.batch_size}\"]\n"+
			"params: {training: {batch_size: 32}}\njobs: [{}]\n"), Overrides{})
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range s.Warnings() {
			if strings.Contains(w, "reaches the trainer nowhere") {
				t.Errorf("warned: %s", w)
			}
		}
	})
}
