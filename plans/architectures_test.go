package plans

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestArchitecturesMatchTheirCards: each built-in architecture, counted from its
// config.json's numbers, has the parameter count its model card publishes.
func TestArchitecturesMatchTheirCards(t *testing.T) {
	for _, a := range Architectures {
		m, err := ModelOf(a.Description(), nil)
		if err != nil {
			t.Fatalf("%s: %v", a.Name, err)
		}
		if got := m.params(); math.Abs(got-a.Published)/a.Published > 0.006 {
			t.Errorf("%s: counted %.3gB, its card says %.3gB (%s)", a.Name, got/1e9, a.Published/1e9, a.Source)
		}
		if !strings.HasPrefix(a.Source, "https://huggingface.co/") {
			t.Errorf("%s: source %q", a.Name, a.Source)
		}
	}
}

// TestGroupedQueryAttentionCounted: k_proj and v_proj are hidden × kv_heads·head_dim.
func TestGroupedQueryAttentionCounted(t *testing.T) {
	llama3 := []any{"layers", 32, "hidden", 4096, "ffn", 14336, "heads", 32, "kv_heads", 8, "vocab", 128256}
	if p := model(t, llama3...).params(); p < 8.02e9 || p > 8.04e9 {
		t.Errorf("Llama-3-8B: %.4gB, want 8.03B (as multi-head attention it would be 8.57B)", p/1e9)
	}
	adapters := func(targets string) float64 {
		return model(t, append(llama3, "lora_rank", 16, "lora_targets", targets)...).loraParams()
	}
	// r·(d+k) a matrix, 32 layers: k_proj is 4096×1024, q_proj 4096×4096.
	if got, want := adapters("k_proj"), 32*16*(4096+1024.0); got != want {
		t.Errorf("LoRA on k_proj: %v adapter parameters, want %v", got, want)
	}
	if got, want := adapters("q_proj"), 32*16*(4096+4096.0); got != want {
		t.Errorf("LoRA on q_proj: %v, want %v", got, want)
	}
	// Qwen3-4B's queries are 32 heads of 128, wider than its hidden size of 2560.
	qwen := model(t, "layers", 36, "hidden", 2560, "ffn", 9728, "heads", 32, "kv_heads", 8, "head_dim", 128, "vocab", 151936, "tied_embeddings", true)
	if got := qwen.params(); got < 4.01e9 || got > 4.03e9 {
		t.Errorf("Qwen3-4B: %.4gB, want 4.02B", got/1e9)
	}
	mha := model(t, "layers", 32, "hidden", 4096, "heads", 32, "seq_len", 512, "micro_batch", 1, "attention", "eager")
	gqa := model(t, "layers", 32, "hidden", 4096, "heads", 32, "kv_heads", 8, "seq_len", 512, "micro_batch", 1, "attention", "eager")
	if a, b := mha.Estimate().Activations, gqa.Estimate().Activations; b >= a || a != int64(32*512*(4096*34+5*32*512)) {
		t.Errorf("activations: multi-head %d (want Korthikanti's 34 + 5as bytes), grouped %d (want fewer)", a, b)
	}
	for _, bad := range [][]any{{"layers", 2, "hidden", 64, "kv_heads", 2}, {"layers", 2, "hidden", 64, "heads", 8, "kv_heads", 3}} {
		if _, err := ModelOf(mapOf(bad...), nil); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

func TestHFConfig(t *testing.T) {
	read := func(name string) []byte {
		data, err := os.ReadFile(filepath.Join("testdata", "hf", name))
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	for _, tt := range []struct {
		file, want string // the description as JSON, or the error
	}{
		{"qwen3-4b.json", `{"layers":36,"hidden":2560,"heads":32,"kv_heads":8,"head_dim":128,"ffn":9728,"tied_embeddings":true,"vocab":151936}`},
		{"llama-3.1-8b.json", `{"layers":32,"hidden":4096,"heads":32,"kv_heads":8,"ffn":14336,"tied_embeddings":false,"vocab":128256}`},
		{"gpt2.json", `{"layers":12,"hidden":768,"heads":12,"tied_embeddings":true,"vocab":50257}`},
		{"text-config.json", `{"layers":34,"hidden":2560,"heads":8,"kv_heads":4,"head_dim":256,"ffn":10240,"tied_embeddings":true,"vocab":262208}`},
		{"qwen3-30b-a3b.json", "a mixture-of-experts model (qwen3_moe, num_experts)"},
	} {
		d, err := hfConfig(read(tt.file))
		got := ""
		if err != nil {
			got = err.Error()
		} else {
			b, _ := d.MarshalJSON()
			got = string(b)
		}
		if !strings.Contains(got, tt.want) {
			t.Errorf("%s:\n  got  %s\n  want %s", tt.file, got, tt.want)
		}
	}
	if _, err := hfConfig([]byte(`{"model_type": "gpt_neox", "num_hidden_layers": 2}`)); err == nil || !strings.Contains(err.Error(), `model_type "gpt_neox"`) {
		t.Errorf("another layout: %v", err)
	}
}

// TestModelByNameOrConfig: a sweep names a built-in architecture (by gpuq's name or
// its Hugging Face id) or a config.json, and its own keys win; the config file is kept
// with the sweep.
func TestModelByNameOrConfig(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "models"), 0o755)
	cfg, _ := os.ReadFile("testdata/hf/qwen3-4b.json")
	os.WriteFile(filepath.Join(dir, "models", "config.json"), cfg, 0o644)
	estimate := func(model string) (int64, *Sweep) {
		t.Helper()
		s, err := DecodeSweep(filepath.Join(dir, "s.yaml"), []byte("name: m\ncommand: [train, \"{config}\"]\njobs: [{}]\nmemory: {model: "+model+"}\n"), Overrides{})
		if err != nil {
			t.Fatal(err)
		}
		return s.Jobs[0].Memory, s
	}
	byName, _ := estimate("{name: qwen3-4b, lora_rank: 16, seq_len: 512, micro_batch: 4}")
	byConfig, s := estimate("{config: models/config.json, lora_rank: 16, seq_len: 512, micro_batch: 4}")
	if byName != byConfig || byName == 0 {
		t.Errorf("by name %s, by config.json %s: want the same", FormatSize(byName), FormatSize(byConfig))
	}
	if _, ok := s.Files[filepath.Join(dir, "models", "config.json")]; !ok {
		t.Errorf("the config.json is not kept with the sweep: %v", s.Files)
	}
	for _, name := range []string{"Qwen/Qwen3-4B", "qwen/qwen3-4b", "someone/Qwen3-4B", "QWEN3-4B"} {
		if by, _ := estimate("{name: " + name + ", lora_rank: 16, seq_len: 512, micro_batch: 4}"); by != byName {
			t.Errorf("by the name %s: %s, want %s", name, FormatSize(by), FormatSize(byName))
		}
	}
	if wider, _ := estimate("{name: qwen3-4b, vocab: 300000, lora_rank: 16, seq_len: 512, micro_batch: 4}"); wider <= byName {
		t.Errorf("the sweep's vocab did not win over the architecture's")
	}
	for _, tt := range []struct{ model, want string }{
		{"{name: qwen3-4}", `memory.model: name: "qwen3-4" is not an architecture gpuq knows (did you mean "qwen3-4b"?)`},
		{"{name: Qwen/Qwen3-30B-A3B}", `memory.model: name: "qwen/qwen3-30b-a3b" is not an architecture gpuq knows`},
		{"{name: qwen3-4b, config: models/config.json}", "name and config: give one"},
		{"{config: models/missing.json}", "memory.model: config: open " + filepath.Join(dir, "models", "missing.json")},
	} {
		_, err := DecodeSweep(filepath.Join(dir, "s.yaml"), []byte("name: m\ncommand: [train]\njobs: [{}]\nmemory: {model: "+tt.model+"}\n"), Overrides{})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s:\n  got  %v\n  want %q", tt.model, err, tt.want)
		}
	}
}
