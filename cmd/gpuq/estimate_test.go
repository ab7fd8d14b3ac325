package main

import (
	"encoding/json"
	"math"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/schedtest"
)

func TestEstimateFlags(t *testing.T) {
	out, errOut, code := gpuq(t, "estimate", "--params", "7.24B", "--layers", "32", "--hidden", "4096", "--heads", "32",
		"--ffn", "14336", "--vocab", "32000", "--seq-len", "512", "--micro-batch", "4", "--lora-rank", "16", "--gpus", "sim:2x23.52GiB")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	schedtest.Golden(t, "estimate_lora.txt", out)
}

func TestEstimateJSON(t *testing.T) {
	out, errOut, code := gpuq(t, "estimate", "--params", "7B", "--json", "--gpus", "sim:1x80GiB+1x141GiB")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got struct {
		Total int64            `json:"total_bytes"`
		Parts map[string]int64 `json:"parts"`
		Fits  []struct {
			GPU int `json:"gpu"`
		} `json:"fits"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if got.Parts["weights"]+got.Parts["gradients"]+got.Parts["optimizer"] != 112e9 {
		t.Errorf("7B full fine-tune: %v, want 16 B/param", got.Parts)
	}
	var sum int64
	for _, v := range got.Parts {
		sum += v
	}
	if sum != got.Total || len(got.Fits) != 1 || got.Fits[0].GPU != 1 {
		t.Errorf("total %d of parts %d, fits %v: want the sum, on the 141 GiB card only", got.Total, sum, got.Fits)
	}
}

func TestEstimateSweepJSON(t *testing.T) {
	out, errOut, code := gpuq(t, "estimate", "../../examples/sweeps/torch-80g.yaml", "--gpus", "sim:8x80GiB", "--json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got struct {
		Jobs []struct {
			Job    string           `json:"job"`
			Source string           `json:"source"`
			Total  int64            `json:"total_bytes"`
			Parts  map[string]int64 `json:"parts"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(got.Jobs) != 6 || got.Jobs[0].Source != "model" || got.Jobs[0].Parts["activations"] == 0 {
		t.Errorf("%+v", got.Jobs)
	}
}

// TestEstimateByNameOrConfig: a built-in architecture and its config.json give the same
// estimate, grouped-query attention counted.
func TestEstimateByNameOrConfig(t *testing.T) {
	total := func(args ...string) (int64, map[string]int64) {
		t.Helper()
		out, errOut, code := gpuq(t, append([]string{"estimate", "--seq-len", "1024", "--micro-batch", "2", "--lora-rank", "16", "--gpus", "sim:1x24GiB", "--json"}, args...)...)
		if code != exitOK {
			t.Fatalf("%v: exit %d: %s", args, code, errOut)
		}
		var got struct {
			Total int64            `json:"total_bytes"`
			Parts map[string]int64 `json:"parts"`
		}
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatal(err)
		}
		return got.Total, got.Parts
	}
	byName, parts := total("--model", "qwen3-4b")
	byConfig, _ := total("--model-config", "../../plans/testdata/hf/qwen3-4b.json")
	if byName != byConfig {
		t.Errorf("--model qwen3-4b %d, --model-config %d: want the same", byName, byConfig)
	}
	// 4.02B frozen weights in bf16 plus the adapters: not the 4.4B multi-head attention would count.
	if w := parts["weights"]; w < 2*4.02e9 || w > 2*4.05e9 {
		t.Errorf("Qwen3-4B's weights: %d bytes", w)
	}
	if wider, _ := total("--model", "qwen3-4b", "--vocab", "300000"); wider <= byName {
		t.Errorf("--vocab did not win over the architecture's")
	}
}

// TestEstimateSaysWhatWouldFit: a job that fits no card is shown its ladder's tiers
// and the usual switches, each with its estimate and whether it fits the largest card.
func TestEstimateSaysWhatWouldFit(t *testing.T) {
	// The notes' Mistral-7B reward model, a full fine-tune at 1 × 384 tokens that ran out
	// of memory on cards of 64 GB.
	out, errOut, code := gpuq(t, "estimate", "--model", "mistral-7b", "--seq-len", "384", "--micro-batch", "1", "--gpus", "sim:8x64GB")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	schedtest.Golden(t, "estimate_suggest.txt", out)
	out, errOut, code = gpuq(t, "estimate", "testdata/too-large.yaml")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	schedtest.Golden(t, "estimate_sweep_suggest.txt", out)
	out, _, _ = gpuq(t, "estimate", "testdata/too-large.yaml", "--json")
	var got struct {
		Jobs []estimateJSON `json:"jobs"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	s := got.Jobs[0].Suggestions
	if len(s) < 4 || s[0].Tier != 1 || s[2].Tier != 3 || s[3].Tier != 0 || s[0].TotalBytes >= got.Jobs[0].TotalBytes {
		t.Errorf("suggestions: %+v", s)
	}
}

func TestEstimateBadInput(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"estimate"}, "describe the model"},
		{[]string{"estimate", "--params", "7B", "--precision", "nf4"}, "give --lora-rank"},
		{[]string{"estimate", "--params", "lots"}, "--params:"},
		{[]string{"estimate", "--layers", "32"}, "--params: give the parameter count (--params 7B) or the architecture"},
		{[]string{"estimate", "--params", "7B", "--lora-rank", "8"}, "--lora-rank: LoRA needs layers and hidden to count the adapters' parameters, e.g. --layers 32, --hidden 4096"},
		{[]string{"estimate", "--params", "7B", "sweep.yaml"}, "not both"},
		{[]string{"estimate", "a.yaml", "b.yaml"}, "accepts at most 1 arg"},
		{[]string{"estimate", "--model", "qwen3-4"}, `--model: "qwen3-4" is not an architecture gpuq knows (did you mean "qwen3-4b"?)`},
		{[]string{"estimate", "--model-config", "nowhere/config.json"}, "--model-config: open nowhere/config.json"},
		{[]string{"estimate", "--model", "qwen3-4b", "--model-config", "../../plans/testdata/hf/qwen3-4b.json"}, "--model and --model-config: give one"},
		{[]string{"estimate", "--model-config", "../../plans/testdata/hf/qwen3-30b-a3b.json"}, "a mixture-of-experts model"},
	} {
		_, errOut, code := gpuq(t, tt.args...)
		if code != exitBadInput || !strings.Contains(errOut, tt.want) {
			t.Errorf("%v: exit %d, %q; want exit %d and %q", tt.args, code, errOut, exitBadInput, tt.want)
		}
	}
}

// TestLogitBytesAsMeasured: gpuq's bytes per logit are what PyTorch holds for
// train_torch.py's loss at its peak, measured on the CPU (examples/trainers/measure_logits.py).
func TestLogitBytesAsMeasured(t *testing.T) {
	py := pythonWithTorch(t)
	out, err := exec.Command(py, "../../examples/trainers/measure_logits.py", "--json").CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var got map[string]float64
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for precision, b := range got {
		if math.Abs(b-plans.LogitBytes) > 0.5 {
			t.Errorf("%s: PyTorch holds %.2f bytes a logit, gpuq counts %d", precision, b, plans.LogitBytes)
		}
	}
}

// TestEstimateLowerBound: an estimate that lacks activations or logits is a lower
// bound, and says so of its total and of every card it fits: the job may not fit there.
func TestEstimateLowerBound(t *testing.T) {
	out, errOut, code := gpuq(t, "estimate", "--params", "1B", "--gpus", "sim:1x24GiB+1x12GiB")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	schedtest.Golden(t, "estimate_lower_bound.txt", out)
	for _, tt := range []struct {
		missing []string
		fits    []fitJSON
		want    string
	}{
		{nil, []fitJSON{{GPU: 0, PerCard: 2}, {GPU: 1, PerCard: 2}}, "all 2, 2 at once each"},
		{[]string{"seq_len"}, []fitJSON{{GPU: 0, PerCard: 2}, {GPU: 1, PerCard: 2}}, "at best all 2, 2 at once each"},
		{nil, []fitJSON{{GPU: 1, PerCard: 1}}, "GPU 1"},
		{[]string{"seq_len"}, []fitJSON{{GPU: 1, PerCard: 1}}, "at best GPU 1"},
		{[]string{"seq_len"}, nil, "none"},
	} {
		e := estimateJSON{TotalBytes: 10 << 30, Missing: tt.missing, Fits: tt.fits}
		if got := fitsText(e, 2); got != tt.want {
			t.Errorf("missing %v, fits %v: %q, want %q", tt.missing, tt.fits, got, tt.want)
		}
	}
}

// TestEstimateSetupFlags: the flags of the seeds' setups reach the estimate, and the
// help names a flag for every model key.
func TestEstimateSetupFlags(t *testing.T) {
	parts := func(args ...string) map[string]int64 {
		t.Helper()
		out, errOut, code := gpuq(t, append([]string{"estimate", "--model", "qwen3-4b", "--seq-len", "1024", "--micro-batch", "1", "--gpus", "sim:1x24GiB", "--json"}, args...)...)
		if code != exitOK {
			t.Fatalf("%v: exit %d: %s", args, code, errOut)
		}
		var got struct {
			Parts map[string]int64 `json:"parts"`
		}
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatal(err)
		}
		return got.Parts
	}
	if p := parts("--lora-rank", "16", "--frozen-copies", "1"); p["copies"] != p["weights"]-p["gradients"] {
		t.Errorf("a frozen reference copy: %v", p)
	}
	if p := parts("--trainable", "100M", "--offload-optimizer", "--optimizer-state", "bf16"); p["optimizer"] != 0 || p["host"] != 100e6*4 {
		t.Errorf("an offloaded optimizer: %v", p)
	}
	if a, b := parts("--loss", "fused")["logits"], parts("--loss", "chunked")["logits"]; a != 0 || b == 0 {
		t.Errorf("loss fused %d, chunked %d", a, b)
	}
	help, _, _ := gpuq(t, "estimate", "--help")
	for _, k := range plans.ModelKeys() {
		if !strings.Contains(help, "--"+modelFlag(k)+" ") {
			t.Errorf("estimate --help does not name --%s", modelFlag(k))
		}
	}
}

// TestRungsOfAMappingParameterSayItsLeaves: a tier that halves training.batch_size in
// params {training: {batch_size: 32}} is said as training.batch_size=16, by estimate's
// suggestions and by the summary's changed parameters, not as a mapping's address.
func TestRungsOfAMappingParameterSayItsLeaves(t *testing.T) {
	s, err := plans.DecodeSweep("m.yaml", []byte("name: m\ncommand: [train, --config, \"{config}\"]\nconfig: {format: json}\n"+
		"params: {training: {batch_size: 32, gradient_accumulation_steps: 1}}\njobs: [{}]\n"), plans.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	j := &s.Jobs[0]
	var halving string
	for _, step := range rungSteps(j) {
		if strings.Contains(step.Change, "batch_size") {
			halving = step.Change
			break
		}
	}
	if halving != "training.batch_size=16, training.gradient_accumulation_steps=2" {
		t.Errorf("the halving rung is said %q", halving)
	}
	for _, tier := range plans.Tiers(j.Params, j.Ladder) {
		if slices.Contains(tier.Changed, "training.batch_size") {
			if got := changedText(j.Params, tier.Params); got != "training.batch_size=16,training.gradient_accumulation_steps=2" {
				t.Errorf("tier %d's changes are said %q", tier.N, got)
			}
			break
		}
	}
}

// TestChangedTextReadsWhatTheConfigHolds: a key written in a mapping and dotted after
// it is what the dotted one says, once; tier 0 changed nothing.
func TestChangedTextReadsWhatTheConfigHolds(t *testing.T) {
	s, err := plans.DecodeSweep("m.yaml", []byte("name: m\ncommand: [train, --config, \"{config}\"]\nconfig: {format: json}\n"+
		"params: {training: {batch_size: 32, gradient_accumulation_steps: 1, lr: 0.1}}\nmatrix: {training.batch_size: [16, 64]}\n"+
		"oom: {keys: {batch_size: training.batch_size, gradient_accumulation_steps: training.gradient_accumulation_steps}}\n"), plans.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	j := &s.Jobs[0]
	tiers := plans.Tiers(j.Params, j.Ladder)
	if got := changedText(j.Params, tiers[0].Params); got != "-" {
		t.Errorf("tier 0 changed %q", got)
	}
	if got := changedText(j.Params, tiers[1].Params); got != "training.batch_size=8,training.gradient_accumulation_steps=2" {
		t.Errorf("tier 1 changed %q", got)
	}
}
