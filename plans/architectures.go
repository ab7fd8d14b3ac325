package plans

// Model descriptions from elsewhere: a Hugging Face config.json, or a built-in table of
// common architectures, so that `memory: {model: {name: qwen3-4b, ...}}` needs no typing.

import (
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// Architecture is a released model's shape, as its config.json gives it.
type Architecture struct {
	Name   string
	Source string // the config.json the numbers come from
	// Layers, Hidden, FFN, Heads, KVHeads, HeadDim (0: hidden/heads), Vocab, Tied.
	Layers, Hidden, FFN, Heads, KVHeads, HeadDim, Vocab int
	Tied                                                bool
	// Published is the parameter count its model card gives, which the count from the
	// architecture is checked against.
	Published float64
}

// Architectures are common Llama-layout models (gated MLP, RMSNorm, grouped-query
// attention) that fine-tunes start from, by the name `--model` and `name:` take.
var Architectures = []Architecture{
	{"llama-2-7b", hf("meta-llama/Llama-2-7b-hf"), 32, 4096, 11008, 32, 32, 0, 32000, false, 6.74e9},
	{"llama-3-8b", hf("meta-llama/Meta-Llama-3-8B"), 32, 4096, 14336, 32, 8, 0, 128256, false, 8.03e9},
	{"llama-3.1-8b", hf("meta-llama/Llama-3.1-8B"), 32, 4096, 14336, 32, 8, 0, 128256, false, 8.03e9},
	{"llama-3.2-1b", hf("meta-llama/Llama-3.2-1B"), 16, 2048, 8192, 32, 8, 64, 128256, true, 1.24e9},
	{"llama-3.2-3b", hf("meta-llama/Llama-3.2-3B"), 28, 3072, 8192, 24, 8, 128, 128256, true, 3.21e9},
	{"mistral-7b", hf("mistralai/Mistral-7B-v0.1"), 32, 4096, 14336, 32, 8, 0, 32000, false, 7.24e9},
	{"tinyllama-1.1b", hf("TinyLlama/TinyLlama-1.1B-Chat-v1.0"), 22, 2048, 5632, 32, 4, 0, 32000, false, 1.10e9},
	{"qwen2.5-3b", hf("Qwen/Qwen2.5-3B"), 36, 2048, 11008, 16, 2, 0, 151936, true, 3.09e9},
	{"qwen2.5-7b", hf("Qwen/Qwen2.5-7B"), 28, 3584, 18944, 28, 4, 0, 152064, false, 7.61e9},
	{"qwen2.5-14b", hf("Qwen/Qwen2.5-14B"), 48, 5120, 13824, 40, 8, 0, 152064, false, 14.7e9},
	{"qwen3-4b", hf("Qwen/Qwen3-4B"), 36, 2560, 9728, 32, 8, 128, 151936, true, 4.02e9},
	{"qwen3-8b", hf("Qwen/Qwen3-8B"), 36, 4096, 12288, 32, 8, 128, 151936, false, 8.19e9},
	{"qwen3-14b", hf("Qwen/Qwen3-14B"), 40, 5120, 17408, 40, 8, 128, 151936, false, 14.8e9},
	{"gemma-2-2b", hf("google/gemma-2-2b"), 26, 2304, 9216, 8, 4, 256, 256000, true, 2.61e9},
	{"gemma-2-9b", hf("google/gemma-2-9b"), 42, 3584, 14336, 16, 8, 256, 256000, true, 9.24e9},
}

func hf(repo string) string { return hfPrefix + repo + "/blob/main/config.json" }

const hfPrefix = "https://huggingface.co/"

// Repo is the architecture's Hugging Face id: Qwen/Qwen3-4B.
func (a Architecture) Repo() string {
	repo, _, _ := strings.Cut(strings.TrimPrefix(a.Source, hfPrefix), "/blob/")
	return repo
}

// named reports whether n, in lower case, names the architecture: its name, its
// Hugging Face id, or an id whose model part is its name (someone/qwen3-4b), as people
// copy them from the Hub.
func (a Architecture) named(n string) bool {
	return n == a.Name || n == strings.ToLower(a.Repo()) || path.Base(n) == a.Name
}

// ArchitectureNames lists the built-in architectures' names.
func ArchitectureNames() []string {
	names := make([]string, len(Architectures))
	for i, a := range Architectures {
		names[i] = a.Name
	}
	return names
}

// Description is the architecture as model description keys.
func (a Architecture) Description() *Map {
	d := NewMap()
	d.Set("layers", int64(a.Layers))
	d.Set("hidden", int64(a.Hidden))
	d.Set("ffn", int64(a.FFN))
	d.Set("heads", int64(a.Heads))
	d.Set("kv_heads", int64(a.KVHeads))
	if a.HeadDim > 0 {
		d.Set("head_dim", int64(a.HeadDim))
	}
	d.Set("vocab", int64(a.Vocab))
	d.Set("tied_embeddings", a.Tied)
	return d
}

// gatedTypes are the model_type values of Hugging Face configs whose layout is
// Llama's: a gated MLP of three matrices (SwiGLU or GeGLU).
var gatedTypes = []string{"llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3_text", "phi3", "olmo", "olmo2", "granite", "stablelm", "cohere", "internlm2", "yi", "deepseek"}

// hfConfig reads a Hugging Face config.json into model description keys: layers,
// hidden, ffn (intermediate_size), heads, kv_heads, head_dim, vocab, tied_embeddings.
// A multimodal config's text_config is the language model's. Llama-layout models and
// GPT-2 are read; a mixture of experts or another layout is refused, since counting it
// as dense would be wrong.
func hfConfig(data []byte) (*Map, error) {
	doc, err := Decode(data, JSON)
	if err != nil {
		return nil, err
	}
	if tc, ok := doc.Vals["text_config"].(*Map); ok {
		if _, has := doc.Get("num_hidden_layers"); !has {
			doc = tc
		}
	}
	modelType := FormatValue(doc.Vals["model_type"])
	for _, k := range []string{"num_local_experts", "num_experts", "n_routed_experts", "moe_intermediate_size"} {
		if _, ok := doc.Get(k); ok {
			return nil, fmt.Errorf("a mixture-of-experts model (%s, %s): gpuq counts dense models only; describe it with params and the rest by hand", modelType, k)
		}
	}
	d := NewMap()
	take := func(key string, names ...string) {
		for _, n := range names {
			if v, ok := doc.Vals[n].(int64); ok && v > 0 {
				d.Set(key, v)
				return
			}
		}
	}
	switch {
	case modelType == "gpt2":
		take("layers", "n_layer")
		take("hidden", "n_embd")
		take("heads", "n_head")
		take("ffn", "n_inner") // null: 4·hidden, GPT's own
		d.Set("tied_embeddings", true)
	case slices.Contains(gatedTypes, modelType):
		take("layers", "num_hidden_layers")
		take("hidden", "hidden_size")
		take("heads", "num_attention_heads")
		take("kv_heads", "num_key_value_heads")
		take("head_dim", "head_dim")
		take("ffn", "intermediate_size")
		// transformers' own default where the file is silent: Gemma ties, Llama does not.
		tied, ok := doc.Vals["tie_word_embeddings"].(bool)
		if !ok {
			tied = strings.HasPrefix(modelType, "gemma")
		}
		d.Set("tied_embeddings", tied)
	default:
		return nil, fmt.Errorf("model_type %q: gpuq reads the configs of Llama-layout models (%s) and gpt2; describe this one with layers, hidden, ffn, heads and vocab, or params",
			modelType, strings.Join(gatedTypes, ", "))
	}
	take("vocab", "vocab_size")
	var missing []string
	for _, k := range []string{"layers", "hidden", "heads", "vocab"} {
		if _, ok := d.Get(k); !ok {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("it lacks %s", strings.Join(missing, ", "))
	}
	return d, nil
}

// ExpandModel replaces a description's name (a built-in architecture) or config (a
// Hugging Face config.json, relative to dir, read with read) by the keys they give;
// the description's own keys win over them.
func ExpandModel(desc *Map, dir string, read func(path string) ([]byte, error)) (*Map, error) {
	name, hasName := desc.Get("name")
	path, hasConfig := desc.Get("config")
	var from *Map
	switch {
	case hasName && hasConfig:
		return nil, fmt.Errorf("name and config: give one: a built-in architecture or a config.json")
	case hasName:
		n := strings.ToLower(FormatValue(name))
		i := slices.IndexFunc(Architectures, func(a Architecture) bool { return a.named(n) })
		if i < 0 {
			known := ArchitectureNames()
			sort.Strings(known)
			return nil, fmt.Errorf("name: %q is not an architecture gpuq knows%s; it knows %s, or give config: path/to/config.json", n, Suggest(n, known), strings.Join(known, ", "))
		}
		from = Architectures[i].Description()
	case hasConfig:
		p := FormatValue(path)
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		data, err := read(p)
		if err != nil {
			return nil, fmt.Errorf("config: %v", err)
		}
		if from, err = hfConfig(data); err != nil {
			return nil, fmt.Errorf("config: %s: %v", p, err)
		}
	default:
		return desc, nil
	}
	for _, k := range desc.Keys {
		if k != "name" && k != "config" {
			from.Set(k, desc.Vals[k])
		}
	}
	return from, nil
}
