package plans

import (
	"fmt"
	"strings"
	"testing"
)

func params(kv ...any) *Map {
	m := NewMap()
	for i := 0; i < len(kv); i += 2 {
		m.Set(kv[i].(string), kv[i+1])
	}
	return m
}

// defaultLadder is the default ladder fitted to a job with these parameters.
func defaultLadder(t *testing.T, p *Map) []Rung {
	t.Helper()
	doc := NewMap()
	doc.Set("name", "t")
	doc.Set("command", []any{"train", "{config}"})
	doc.Set("params", p)
	doc.Set("jobs", []any{NewMap()})
	s, err := SweepOf("t.yaml", doc, Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	return s.Jobs[0].Ladder
}

func describeTiers(ts []Tier) string {
	var lines []string
	for _, t := range ts {
		eb, _ := BatchKeys{KeyBatch, KeyAccumulation}.Effective(t.Params)
		b, _ := t.Params.Get(KeyBatch)
		gc, _ := t.Params.Get(KeyCheckpointing)
		w, _ := t.Params.Get(KeyDataWorkers)
		lines = append(lines, fmt.Sprintf("%d rung=%d bs=%v gc=%v w=%v eb=%d excl=%v", t.N, t.Rung, b, gc, w, eb, t.Exclusive))
	}
	return strings.Join(lines, "\n")
}

func TestTiersDefaultLadder(t *testing.T) {
	p := params(KeyBatch, int64(8), KeyAccumulation, int64(4), KeyCheckpointing, false, KeyDataWorkers, int64(8))
	got := describeTiers(Tiers(p, defaultLadder(t, p)))
	want := `0 rung=-1 bs=8 gc=false w=8 eb=32 excl=false
1 rung=0 bs=8 gc=true w=8 eb=32 excl=false
2 rung=1 bs=4 gc=true w=8 eb=32 excl=false
3 rung=1 bs=2 gc=true w=8 eb=32 excl=false
4 rung=1 bs=1 gc=true w=8 eb=32 excl=false
5 rung=2 bs=1 gc=true w=0 eb=32 excl=true`
	if got != want {
		t.Errorf("tiers:\n%s\nwant:\n%s", got, want)
	}
	if v, _ := p.Get(KeyBatch); v != int64(8) {
		t.Error("Tiers mutated the job's params")
	}
}

func TestTiersSkipRungsThatChangeNothing(t *testing.T) {
	p := params(KeyBatch, int64(1), KeyAccumulation, int64(4), KeyCheckpointing, true)
	got := describeTiers(Tiers(p, defaultLadder(t, p)))
	if got != "0 rung=-1 bs=1 gc=true w=<nil> eb=4 excl=false" {
		t.Errorf("a job already at the bottom has one tier, got:\n%s", got)
	}
}

func TestLadderForUsesOnlyKeysTheJobHas(t *testing.T) {
	p := params(KeyBatch, int64(8), "lr", 0.1)
	if l := defaultLadder(t, p); len(l) != 0 {
		t.Errorf("batch without accumulation: halving would change the effective batch, want no rung, got %v", l)
	}
	p.Set(KeyAccumulation, int64(1))
	if l := defaultLadder(t, p); len(l) != 1 || l[0].Scale == nil {
		t.Errorf("want the halving rung alone, got %v", l)
	}
}

func TestScaleKeepsIntegers(t *testing.T) {
	r := Rung{Scale: []Factor{{KeyBatch, 0.5}, {KeyAccumulation, 2}, {"lr", 0.5}}}
	out, changed := r.Apply(params(KeyBatch, int64(3), KeyAccumulation, int64(4), "lr", 0.001))
	b, _ := out.Get(KeyBatch)
	lr, _ := out.Get("lr")
	if b != int64(1) || lr != 0.0005 || len(changed) != 3 {
		t.Errorf("got bs=%v lr=%v changed=%v", b, lr, changed)
	}
}

// TestScaleKeepsWholeFloatsWhole: a count written as a float (batch_size: 7.0) stays a
// whole number, as an integer's does; a fraction (a rate) scales as it is.
func TestScaleKeepsWholeFloatsWhole(t *testing.T) {
	r := Rung{Scale: []Factor{{KeyBatch, 0.5}, {KeyAccumulation, 2}, {"lr", 0.5}}}
	out, _ := r.Apply(params(KeyBatch, 7.0, KeyAccumulation, Float{Value: 2, Text: "2.0"}, "lr", 0.001))
	b, _ := out.Get(KeyBatch)
	acc, _ := out.Get(KeyAccumulation)
	lr, _ := out.Get("lr")
	if b != 3.0 || acc != 4.0 || lr != 0.0005 {
		t.Errorf("got bs=%v acc=%v lr=%v; want 3, 4 and 0.0005", b, acc, lr)
	}
	out, _ = r.Apply(params(KeyBatch, 1.0))
	if b, _ := out.Get(KeyBatch); b != 1.0 {
		t.Errorf("a batch of 1.0 halved: %v, want it kept", b)
	}
}

// TestAQuotedBatchSizeIsSaid: a batch size written as a string takes no halving rung,
// and the warning says why, not that the job has no ladder key.
func TestAQuotedBatchSizeIsSaid(t *testing.T) {
	doc := "name: q\ncommand: [echo, \"{batch_size}\", \"{gradient_accumulation_steps}\"]\nparams: {batch_size: \"8\", gradient_accumulation_steps: 2}\njobs: [{}]\n"
	s, err := DecodeSweep("q.yaml", []byte(doc), Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Jobs[0].Ladder) != 0 {
		t.Errorf("ladder %v; want no rung that would change nothing", s.Jobs[0].Ladder)
	}
	w := strings.Join(s.Warnings(), "\n")
	if !strings.Contains(w, `batch_size is "8", not a number`) || strings.Contains(w, "no ladder key found") {
		t.Errorf("warnings:\n%s", w)
	}
	// A job of the same keys with a number keeps its rungs: what is fitted of one job
	// is not another's whose values differ in kind.
	doc = "name: q\ncommand: [echo, \"{batch_size}\"]\nparams: {gradient_accumulation_steps: 2}\njobs: [{batch_size: \"8\"}, {batch_size: 16}]\n"
	if s, err = DecodeSweep("q.yaml", []byte(doc), Overrides{}); err != nil {
		t.Fatal(err)
	}
	if len(s.Jobs[0].Ladder) != 0 || len(s.Jobs[1].Ladder) == 0 {
		t.Errorf("ladders %v and %v: want none for the quoted batch size, rungs for the number", s.Jobs[0].Ladder, s.Jobs[1].Ladder)
	}
	if w := strings.Join(s.Warnings(), "\n"); strings.Contains(w, `"16"`) {
		t.Errorf("the number is warned of as a string:\n%s", w)
	}
	// A quoted batch size in one job hides no other job's missing ladder: the job
	// with no ladder key is still named.
	doc = "name: q\ncommand: [echo, \"{lr}\"]\nparams: {lr: 0.1}\njobs: [{batch_size: \"8\", gradient_accumulation_steps: 2}, {}]\n"
	if s, err = DecodeSweep("q.yaml", []byte(doc), Overrides{}); err != nil {
		t.Fatal(err)
	}
	w = strings.Join(s.Warnings(), "\n")
	if !strings.Contains(w, `batch_size is "8", not a number`) || !strings.Contains(w, "an OOM will fail job "+s.Jobs[1].ID+": no ladder key found") {
		t.Errorf("warnings:\n%s", w)
	}
}

func TestWarningsReportEffectiveBatchChange(t *testing.T) {
	doc := "name: w\ncommand: [echo, \"{config}\"]\nparams: {batch_size: 6, gradient_accumulation_steps: 2}\njobs: [{}]\n"
	s, err := DecodeSweep("w.yaml", []byte(doc), Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	w := s.Warnings()
	if len(w) != 1 || !strings.Contains(w[0], "tier 2 changes the effective batch (batch_size × gradient_accumulation_steps) from 12 to 8") {
		t.Errorf("warnings: %q", w)
	}
}

func TestStepHostOOMLowersWorkersFirst(t *testing.T) {
	p := params(KeyBatch, int64(8), KeyAccumulation, int64(4), KeyCheckpointing, false, KeyDataWorkers, int64(8))
	ladder := defaultLadder(t, p)
	next, pos, changed, rung, ok := Step(p, ladder, Position{}, true)
	if !ok || rung != 2 || pos.Tier != 1 || !pos.Exclusive || changed[0] != KeyDataWorkers {
		t.Fatalf("host OOM: rung %d pos %+v changed %v", rung, pos, changed)
	}
	// Then GPU OOMs go through the ladder in order, never applying the workers rung again.
	var got []int
	for {
		var ok bool
		next, pos, _, rung, ok = Step(next, ladder, pos, false)
		if !ok {
			break
		}
		got = append(got, rung)
	}
	if fmt.Sprint(got) != "[0 1 1 1]" || pos.Tier != 5 {
		t.Errorf("rungs after a host OOM: %v, tier %d", got, pos.Tier)
	}
}

// TestStepHostOOMNeverTakesTheGPULadder: after a host OOM only a rung that lowers the
// data workers is taken, under whatever name the job gives them; with none left, there
// is no next rung and the position stays where it was.
func TestStepHostOOMNeverTakesTheGPULadder(t *testing.T) {
	p := params("per_device_train_batch_size", int64(8), "gradient_checkpointing", false, "dataloader_num_workers", int64(4))
	ladder := defaultLadder(t, p)
	next, pos, changed, _, ok := Step(p, ladder, Position{}, true)
	if !ok || len(changed) != 1 || changed[0] != "dataloader_num_workers" || pos.Tier != 1 {
		t.Fatalf("host OOM with dataloader_num_workers: %v %+v %v", changed, pos, ok)
	}
	after, pos2, changed, rung, ok := Step(next, ladder, pos, true)
	if ok || rung != -1 || changed != nil || after != next || pos2.Tier != pos.Tier || pos2.Next != pos.Next {
		t.Errorf("a second host OOM took rung %d (%v), position %+v", rung, changed, pos2)
	}
	noWorkers := params(KeyBatch, int64(8), KeyCheckpointing, false)
	if _, _, changed, rung, ok := Step(noWorkers, defaultLadder(t, noWorkers), Position{}, true); ok {
		t.Errorf("host OOM without data workers took rung %d (%v)", rung, changed)
	}
	// Nested in a config, by torch's DataLoader's name.
	rungs := []Rung{{Scale: []Factor{{KeyBatch, 0.5}}}, {Set: params("data.loader.num_workers", int64(0))}}
	nested := params(KeyBatch, int64(8), "data.loader.num_workers", int64(6))
	if _, _, changed, rung, ok := Step(nested, rungs, Position{}, true); !ok || rung != 1 {
		t.Errorf("host OOM with data.loader.num_workers: rung %d (%v)", rung, changed)
	}
}

// TestBatchOnly: the default ladder, under any name the trainer gives its keys (a
// nested one, Hugging Face's, or one oom.keys names), changes only what a batch holds;
// a written rung that sets a precision or a LoRA rank may lower the weights.
func TestBatchOnly(t *testing.T) {
	set := func(k string, v any) Rung { return Rung{Set: params(k, v)} }
	hf := params("per_device_train_batch_size", int64(8), "gradient_accumulation_steps", int64(1),
		"training.gradient_checkpointing", false, "dataloader_num_workers", int64(4))
	for _, tt := range []struct {
		name   string
		ladder []Rung
		keys   map[string]string
		want   bool
	}{
		{"default", defaultLadder(t, params(KeyBatch, int64(8), KeyCheckpointing, false, KeyDataWorkers, int64(8))), nil, true},
		{"Hugging Face's names, nested", defaultLadder(t, hf), nil, true},
		{"named in oom.keys", []Rung{{Scale: []Factor{{"train.micro_bs", 0.5}}}, set("model.grad_ckpt", true)},
			map[string]string{KeyBatch: "train.micro_bs", KeyCheckpointing: "model.grad_ckpt"}, true},
		{"alone on a card", []Rung{{Exclusive: true}}, nil, true},
		{"none", nil, nil, true},
		{"a precision", []Rung{set(KeyCheckpointing, true), set("precision", "bf16")}, nil, false},
		{"a LoRA rank", []Rung{set("lora_rank", int64(8))}, nil, false},
		{"an unnamed key", []Rung{{Scale: []Factor{{"train.micro_bs", 0.5}}}}, nil, false},
	} {
		if got := BatchOnly(tt.ladder, tt.keys); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}
