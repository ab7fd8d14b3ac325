package plans

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Model describes a training job to the memory estimator: what `memory: {model: ...}`
// in a sweep and the flags of `gpuq estimate` say. Sizes are per card.
type Model struct {
	Params float64 // parameters in all; 0 = counted from the architecture

	// The architecture. Activations need Layers, Hidden, SeqLen and MicroBatch (and
	// Heads with eager attention); LoRA needs Layers and Hidden. KVHeads and HeadDim
	// are grouped-query attention's: k_proj and v_proj are Hidden × KVHeads·HeadDim
	// (default Heads: multi-head attention; HeadDim default Hidden/Heads).
	Layers, Hidden, Heads, KVHeads, HeadDim, FFN, Vocab int
	SeqLen, MicroBatch                                  int
	// TiedEmbeddings: the output head shares the input embedding's weights; nil = the
	// layout's default (GPT's tied, Llama's not).
	TiedEmbeddings *bool
	// LayerParams and LayerActivations describe blocks that are neither Llama's nor
	// GPT's (a linear-attention block, say) by their own numbers: the parameters of one
	// block, and the bytes one token leaves in one block for the backward pass.
	LayerParams      float64
	LayerActivations float64

	Precision string // weights: fp32, bf16, fp16, int8, nf4, nf4-dq
	// Autocast: fp32 weights with 16-bit matmuls (torch.autocast, AMP; Hugging Face
	// Trainer's bf16/fp16 flags on a model loaded in fp32).
	Autocast  bool
	Optimizer string // adamw, adamw-8bit, sgd, adafactor
	// OptimizerState is how the optimizer keeps its state: master (an fp32 copy of
	// 16-bit weights and fp32 moments), fp32 (fp32 moments only) or bf16 (moments in
	// bf16, no copy); "" = master for 16-bit weights, fp32 for fp32 ones.
	OptimizerState string
	LoRARank       int // 0 = no adapters
	LoRATargets    []string
	LoRADropout    bool // the adapters' dropout is on: each keeps its own dropped input
	// PrepareKbit: PEFT's prepare_model_for_kbit_training, which casts what int8 and
	// NF4 leave in 16 bits (embeddings, head, norms) and the adapters to fp32.
	PrepareKbit bool
	// Quantizer is what quantized int8 or NF4 weights: transformers (its
	// BitsAndBytesConfig, the default: the blocks' matmuls, from the dtype the model was
	// loaded in) or lightning (Lightning Fabric's BitsandbytesPrecision, LitGPT's: every
	// linear layer, the output head too, from fp16).
	Quantizer string
	// Bitsandbytes is the bitsandbytes version ("0.42"); "" is a current one. Before 0.44
	// its 4-bit matmul keeps its input for the backward pass; from 0.44 on it does not.
	Bitsandbytes string
	// HoldsLastStep: the training loop keeps the last step's outputs until the next
	// step's forward pass returns (LitGPT's logits, a plain loop's out = model(x)).
	HoldsLastStep bool
	// FusedQKV: q, k and v are one matrix (LitGPT's attn, GPT-NeoX's query_key_value),
	// whose adapters share one dropped input.
	FusedQKV bool
	// Trainable, without LoRA, is the part of the model that trains, the rest frozen.
	Trainable             Trainable
	GradientCheckpointing bool
	// LogitsToKeep is how many positions the logits are computed for, as in
	// transformers' logits_to_keep: 0 = every position.
	LogitsToKeep int
	Loss         string // upcast, fp32-logits, chunked or fused: see logitBytes
	Attention    string // sdpa (flash or memory-efficient kernels) or eager
	ZeROStage    int    // DeepSpeed ZeRO stage, 0-3 (FSDP: FULL_SHARD is 3, SHARD_GRAD_OP 2)
	GPUs         int    // cards the job is spread over, for ZeRO and SplitLayers
	// SplitLayers: the layers are split over GPUs cards, one after the other
	// (accelerate's device_map, naive pipeline parallelism).
	SplitLayers      bool
	OffloadOptimizer bool // the optimizer's state lives in host RAM (ZeRO-Offload)
	OffloadParams    bool // the weights live in host RAM, brought in a layer at a time
	EMA              bool // an exponential moving average copy of the weights
	FrozenCopies     int  // frozen instances of the model beside it: a reference, a reward model
	CUDAContext      int64
}

// Trainable is the part of a model that trains when it is not LoRA: a share of its
// parameters, a count of them, or modules by name; all zero: the whole model.
type Trainable struct {
	Fraction float64
	Count    float64
	Modules  []string
}

func (t Trainable) set() bool { return t.Fraction > 0 || t.Count > 0 || len(t.Modules) > 0 }

// Breakdown is an estimate, part by part, in bytes per card.
type Breakdown struct {
	Weights     int64 `json:"weights"`
	Gradients   int64 `json:"gradients"`
	Optimizer   int64 `json:"optimizer"`
	Activations int64 `json:"activations"`
	Logits      int64 `json:"logits"`
	// Copies are the EMA copy and frozen model instances.
	Copies int64 `json:"copies"`
	// Reserve is what PyTorch's allocator holds beyond the tensors (see allocatorReserve).
	Reserve int64 `json:"reserve"`
	Context int64 `json:"context"`
	// Host is what the job offloads to host RAM; it is not in Total.
	Host int64 `json:"host,omitempty"`
	// Missing names what the description lacks for activations and logits; the total is
	// then a lower bound.
	Missing []string `json:"-"`
}

// Total is the sum of the parts on the card: what NVML shows of the process at its peak.
func (b Breakdown) Total() int64 {
	return b.Tensors() + b.Reserve + b.Context
}

// Tensors is what the tensors take at the peak: torch.cuda.max_memory_allocated.
func (b Breakdown) Tensors() int64 {
	return b.Weights + b.Gradients + b.Optimizer + b.Activations + b.Logits + b.Copies
}

// Model description keys, as a sweep writes them; flags use the same names with '-'.
var modelKeys = []string{"name", "config", "params", "layers", "hidden", "heads", "kv_heads", "head_dim", "ffn", "vocab",
	"tied_embeddings", "layer_params", "layer_activations", "seq_len", "micro_batch", "precision", "autocast",
	"optimizer", "optimizer_state", "lora_rank", "lora_targets", "lora_dropout", "prepare_kbit", "trainable",
	"gradient_checkpointing", "logits_to_keep", "loss", "attention", "zero_stage", "gpus", "split_layers",
	"offload_optimizer", "offload_params", "ema", "frozen_copies", "cuda_context", "quantizer", "bitsandbytes",
	"holds_last_step", "fused_qkv"}

var (
	precisions      = []string{"fp32", "bf16", "fp16", "int8", "nf4", "nf4-dq"}
	optimizers      = []string{"adamw", "adamw-8bit", "sgd", "adafactor"}
	optimizerStates = []string{"master", "fp32", "bf16"}
	losses          = []string{"upcast", "fp32-logits", "chunked", "fused"}
	attentions      = []string{"sdpa", "eager"}
	quantizers      = []string{"transformers", "lightning"}
	// loraMatrices are the linear layers of a Llama-style block LoRA can adapt.
	loraMatrices  = []string{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}
	defaultTarget = []string{"q_proj", "v_proj"} // PEFT's default for Llama and Mistral
	// trainableModules are what trainable: may name besides the matrices.
	trainableModules = []string{"embeddings", "head", "norms", "attention", "mlp"}
	boolKeys         = []string{"tied_embeddings", "autocast", "lora_dropout", "prepare_kbit", "gradient_checkpointing",
		"split_layers", "offload_optimizer", "offload_params", "ema", "holds_last_step", "fused_qkv"}
)

// CUDAContext is what each CUDA process holds before its first tensor: the context with
// lazily loaded modules (the default since CUDA 11.7 / PyTorch 1.13) and cuBLAS/cuDNN
// workspaces; REFERENCE §4 gives 300-500 MiB, and the upper end is taken so that
// several jobs on a card do not each come up short. Without lazy loading (CUDA 11.6 and
// older) every kernel is loaded at once: Hugging Face's "Model training anatomy"
// measured 1343 MiB on a V100 with CUDA 11.2; cuda_context says so.
const CUDAContext = 500 << 20

// Expandable segments map memory in pages: 20 MiB for the allocator's pool of blocks
// over 1 MiB, 2 MiB for its pool of smaller ones (c10/cuda/CUDACachingAllocator.cpp,
// Note [Expandable Segments]).
const (
	largePage = 20 << 20
	smallPage = 2 << 20
)

// allocatorReserve is what PyTorch's caching allocator holds beyond the tensors at the
// peak, as gpuq runs trainers: with expandable segments (PYTORCH_CUDA_ALLOC_CONF), one
// segment a stream that grows by pages and keeps them mapped, so past the tensors it
// holds the rest of the last page of each pool: up to a large and a small page a
// stream. ZeRO-3 and FSDP gather weights, and offloading copies them in, on a stream of
// their own. Free blocks between live ones (the segment is filled best-fit) are not
// counted: a training step frees in the reverse order it allocates, and what remains is
// the card's headroom's to cover. Without expandable segments the allocator keeps freed
// blocks in segments of their own size, a cache that published runs show at 10-50% over
// the tensors and that no count of the tensors predicts; gpuq does not run trainers so.
func (m Model) allocatorReserve() float64 {
	streams := 1.0
	if m.ZeROStage == 3 || m.OffloadParams {
		streams++
	}
	return streams * (largePage + smallPage)
}

// maxEstimate bounds an estimate: a petabyte a card is a typo (a unit given twice:
// 7000000000B is 7e18 parameters), and sizes beyond it would overflow as the packer
// adds them up.
const maxEstimate = 1 << 50

// ModelKeys lists the keys of a model description.
func ModelKeys() []string { return slices.Clone(modelKeys) }

// ModelOf reads a model description. A value may be a template of the job's parameters
// ("{batch_size}"), filled from params (nil: no parameters).
func ModelOf(desc *Map, params *Map) (Model, error) {
	m := Model{Precision: "bf16", Optimizer: "adamw", Attention: "sdpa", Loss: "upcast", GPUs: 1, CUDAContext: CUDAContext}
	var errs []string
	bad := func(key, format string, args ...any) {
		errs = append(errs, key+": "+fmt.Sprintf(format, args...))
	}
	for _, k := range desc.Keys {
		if !slices.Contains(modelKeys, k) {
			bad(k, "unknown key%s; a model has %s", Suggest(k, modelKeys), strings.Join(modelKeys, ", "))
			continue
		}
		v, err := fill(desc.Vals[k], params)
		if err != nil {
			bad(k, "%v", err)
			continue
		}
		m.set(k, v, bad)
	}
	if len(errs) == 0 {
		errs = m.check()
	}
	if len(errs) > 0 {
		return m, fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return m, nil
}

// set reads one key's value, filled, into m.
func (m *Model) set(k, v string, bad func(string, string, ...any)) {
	switch k {
	case "params", "layer_params":
		p, err := ParseCount(v)
		if err != nil {
			bad(k, "%v", err)
		}
		*map[string]*float64{"params": &m.Params, "layer_params": &m.LayerParams}[k] = p
	case "layer_activations", "cuda_context":
		n, err := ParseSize(v)
		if err != nil || n <= 0 {
			bad(k, "%q is not a size: write e.g. %s", v, map[string]string{"layer_activations": "40KiB (bytes a token keeps in one block)", "cuda_context": "1.3GiB"}[k])
		}
		if k == "cuda_context" {
			m.CUDAContext = n
		} else {
			m.LayerActivations = float64(n)
		}
	case "precision":
		m.Precision = oneOf(k, v, precisions, bad)
	case "optimizer":
		m.Optimizer = oneOf(k, v, optimizers, bad)
	case "optimizer_state":
		m.OptimizerState = oneOf(k, v, optimizerStates, bad)
	case "loss":
		m.Loss = oneOf(k, v, losses, bad)
	case "attention":
		m.Attention = oneOf(k, v, attentions, bad)
	case "quantizer":
		m.Quantizer = oneOf(k, v, quantizers, bad)
	case "bitsandbytes":
		if _, _, ok := minorVersion(v); !ok {
			bad(k, "%q is not a version: write e.g. 0.42 or 0.43.1", v)
		}
		m.Bitsandbytes = v
	case "lora_targets":
		m.LoRATargets = loraTargets(v, bad)
	case "trainable":
		m.Trainable = parseTrainable(v, bad)
	case "lora_dropout":
		// A probability, as PEFT writes it, or a yes or no.
		if p, err := strconv.ParseFloat(v, 64); err == nil && p >= 0 && p < 1 {
			m.LoRADropout = p > 0
			return
		}
		b, err := strconv.ParseBool(v)
		if err != nil {
			bad(k, "write the dropout probability (0.05) or false, not %q", v)
		}
		m.LoRADropout = b
	case "name", "config":
		bad(k, "must be expanded into the keys it gives first (ExpandModel)")
	default:
		if slices.Contains(boolKeys, k) {
			b, err := strconv.ParseBool(v)
			if err != nil {
				bad(k, "write true or false, not %q", v)
			}
			m.setBool(k, b)
			return
		}
		m.setInt(k, v, bad)
	}
}

func (m *Model) setBool(k string, b bool) {
	if k == "tied_embeddings" {
		m.TiedEmbeddings = &b
		return
	}
	*map[string]*bool{"autocast": &m.Autocast, "lora_dropout": &m.LoRADropout, "prepare_kbit": &m.PrepareKbit,
		"gradient_checkpointing": &m.GradientCheckpointing, "split_layers": &m.SplitLayers,
		"offload_optimizer": &m.OffloadOptimizer, "offload_params": &m.OffloadParams, "ema": &m.EMA,
		"holds_last_step": &m.HoldsLastStep, "fused_qkv": &m.FusedQKV}[k] = b
}

func (m *Model) setInt(k, v string, bad func(string, string, ...any)) {
	lo := 1
	if k == "lora_rank" || k == "logits_to_keep" || k == "zero_stage" || k == "frozen_copies" {
		lo = 0
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || (k == "zero_stage" && n > 3) {
		want := fmt.Sprintf("a whole number of at least %d", lo)
		if k == "zero_stage" {
			want = "0, 1, 2 or 3"
		}
		bad(k, "%q is not %s", v, want)
		return
	}
	*map[string]*int{"layers": &m.Layers, "hidden": &m.Hidden, "heads": &m.Heads, "kv_heads": &m.KVHeads, "head_dim": &m.HeadDim, "ffn": &m.FFN,
		"vocab": &m.Vocab, "seq_len": &m.SeqLen, "micro_batch": &m.MicroBatch, "lora_rank": &m.LoRARank,
		"logits_to_keep": &m.LogitsToKeep, "zero_stage": &m.ZeROStage, "gpus": &m.GPUs, "frozen_copies": &m.FrozenCopies}[k] = n
}

// check says what the description lacks to be estimated at all.
func (m *Model) check() []string {
	var errs []string
	add := func(cond bool, msg string) {
		if cond {
			errs = append(errs, msg)
		}
	}
	arch := m.Layers > 0 && m.Hidden > 0
	add(m.Params == 0 && !arch, "params: give the parameter count (params: 7B) or the architecture (layers and hidden, with vocab)")
	add(m.LoRARank > 0 && !arch, "lora_rank: LoRA needs layers and hidden to count the adapters' parameters, e.g. layers: 32, hidden: 4096")
	add(m.LoRARank == 0 && !m.Trainable.set() && m.quantized(),
		fmt.Sprintf("precision: %s weights are frozen: give lora_rank (QLoRA), trainable (the part that trains), or train in bf16", m.Precision))
	add(m.LoRARank > 0 && m.Trainable.set(), "trainable: LoRA trains its adapters; give lora_rank or trainable, not both")
	add(len(m.Trainable.Modules) > 0 && !arch, "trainable: modules are counted from the architecture: give layers and hidden (and vocab), or a count (trainable: 100M)")
	add(m.ZeROStage == 3 && (m.Hidden == 0 || (m.Vocab == 0 && m.Layers == 0)) && m.LayerParams == 0,
		"zero_stage: ZeRO-3 holds the largest layer whole: give hidden with vocab or layers")
	add(m.OffloadParams && m.Hidden == 0 && m.LayerParams == 0, "offload_params: the card holds a layer or two at a time: give hidden with layers (or layer_params)")
	add(m.SplitLayers && m.GPUs < 2, "split_layers: a model split over cards needs gpus: 2 or more (a sweep's gpus_per_job gives it)")
	add(m.Autocast && m.Precision != "fp32", fmt.Sprintf("autocast: autocast runs fp32 weights in 16 bits; with %s weights leave it out, or write precision: fp32", m.Precision))
	add(m.OptimizerState != "" && m.OptimizerState != "fp32" && m.Precision == "fp32" && m.LoRARank == 0,
		"optimizer_state: fp32 weights need no master copy and keep fp32 moments: leave it out")
	add((m.KVHeads > 0 || m.HeadDim > 0) && m.Heads == 0, "heads: kv_heads and head_dim need the number of query heads, e.g. heads: 32")
	add(m.KVHeads > m.Heads || m.KVHeads > 0 && m.Heads%m.KVHeads != 0,
		fmt.Sprintf("kv_heads: %d does not divide heads (%d): grouped-query attention shares each key-value head among a whole number of query heads", m.KVHeads, m.Heads))
	if len(errs) > 0 {
		return errs
	}
	if p, _ := m.parts(); !(p.total() <= maxEstimate) {
		return []string{fmt.Sprintf("the model comes to %.3g bytes a card, more than the %s any card could hold: check params (%.3g parameters) and the sizes for a typo",
			p.total(), FormatSize(maxEstimate), m.params())}
	}
	return nil
}

// quantized says whether the weights are stored in int8 or NF4, and so frozen.
func (m Model) quantized() bool {
	return m.Precision == "int8" || strings.HasPrefix(m.Precision, "nf4")
}

// fill turns a description value into text, filling its placeholders from params.
func fill(v any, params *Map) (string, error) {
	if list, ok := v.([]any); ok {
		parts := make([]string, len(list))
		for i, e := range list {
			s, err := fill(e, params)
			if err != nil {
				return "", err
			}
			parts[i] = s
		}
		return strings.Join(parts, ","), nil
	}
	if !isScalar(v) {
		return "", fmt.Errorf("write a number, a word or a {parameter}, not a %s", kindOf(v))
	}
	s := FormatValue(v)
	out, err := Expand(s, func(name string) (string, bool) {
		if params == nil {
			return "", false
		}
		p, ok := params.Param(name)
		return FormatValue(p), ok
	})
	if mp, ok := err.(*missingPlaceholder); ok {
		var keys []string
		if params != nil {
			keys = params.Keys
		}
		return "", fmt.Errorf("no parameter fills {%s}%s", mp.name, Suggest(mp.name, keys))
	}
	return out, err
}

func oneOf(key, v string, allowed []string, bad func(string, string, ...any)) string {
	v = strings.ToLower(v)
	if !slices.Contains(allowed, v) {
		bad(key, "%q is not one of %s%s", v, strings.Join(allowed, ", "), Suggest(v, allowed))
	}
	return v
}

func loraTargets(v string, bad func(string, string, ...any)) []string {
	if v == "all-linear" {
		return slices.Clone(loraMatrices)
	}
	var out []string
	for _, t := range splitList(v) {
		name := t
		if !strings.HasSuffix(name, "_proj") {
			name += "_proj"
		}
		if !slices.Contains(loraMatrices, name) {
			bad("lora_targets", "%q is not a matrix gpuq counts: use %s or all-linear", t, strings.Join(loraMatrices, ", "))
			continue
		}
		out = append(out, name)
	}
	return out
}

// parseTrainable reads what trains: a share (0.02 or 2%), a count (100M) or module names.
func parseTrainable(v string, bad func(string, string, ...any)) Trainable {
	t := strings.TrimSpace(v)
	if pct, ok := strings.CutSuffix(t, "%"); ok {
		if f, err := strconv.ParseFloat(pct, 64); err == nil {
			if !(f > 0 && f <= 100) {
				bad("trainable", "%q: a share is above 0%% and at most 100%%", v)
			}
			return Trainable{Fraction: f / 100}
		}
	}
	if f, err := strconv.ParseFloat(t, 64); err == nil {
		if !(f > 0 && f <= 1) {
			bad("trainable", "%q: a share is above 0 and at most 1 (0.02 or 2%%); write a count with its unit (100M)", v)
		}
		return Trainable{Fraction: f}
	}
	if n, err := ParseCount(t); err == nil {
		return Trainable{Count: n}
	}
	known := append(slices.Clone(trainableModules), loraMatrices...)
	var out Trainable
	for _, name := range splitList(t) {
		if !slices.Contains(known, name) {
			bad("trainable", "%q is neither a share (0.02, 2%%), a count (100M) nor a module gpuq counts (%s)%s", name, strings.Join(known, ", "), Suggest(name, known))
			continue
		}
		out.Modules = append(out.Modules, name)
	}
	return out
}

// minorVersion reads the major and minor numbers of a version: 0.42, 0.43.1, v0.44.0.
func minorVersion(v string) (major, minor int, ok bool) {
	parts := strings.Split(strings.TrimPrefix(strings.TrimSpace(v), "v"), ".")
	if len(parts) < 2 {
		return 0, 0, false
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(parts[1])
	return major, minor, err1 == nil && err2 == nil && major >= 0 && minor >= 0
}

// ParseCount reads a parameter count: 7B, 1.3e9, 350M, 7000000000.
func ParseCount(s string) (float64, error) {
	t := strings.TrimSpace(s)
	mult := 1.0
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'K', 'k':
			mult = 1e3
		case 'M', 'm':
			mult = 1e6
		case 'B', 'b', 'G', 'g':
			mult = 1e9
		case 'T', 't':
			mult = 1e12
		}
		if mult != 1 {
			t = t[:n-1]
		}
	}
	f, err := strconv.ParseFloat(t, 64)
	// !(f > 0) refuses NaN too.
	if err != nil || !(f > 0) || math.IsInf(f*mult, 0) {
		return 0, fmt.Errorf("%q is not a parameter count: write e.g. 7B, 350M or 1.3e9", s)
	}
	return f * mult, nil
}

// Estimate is the memory the job peaks at on each of its cards.
func (m Model) Estimate() Breakdown {
	p, missing := m.parts()
	return Breakdown{Weights: int64(p.weights), Gradients: int64(p.gradients), Optimizer: int64(p.optimizer),
		Activations: int64(p.activations), Logits: int64(p.logits), Copies: int64(p.copies), Reserve: int64(p.reserve),
		Context: m.CUDAContext, Host: int64(p.host), Missing: missing}
}

// parts are an estimate's parts before they are whole bytes: in float64 a description
// that is far too large stays far too large, where int64 would wrap around to a
// negative size that fits every card.
type parts struct {
	weights, gradients, optimizer, activations, logits, copies, reserve, context, host float64
}

func (p parts) total() float64 {
	return p.weights + p.gradients + p.optimizer + p.activations + p.logits + p.copies + p.reserve + p.context
}

func (m Model) parts() (parts, []string) {
	e := m.state()
	var missing []string
	e.activations, e.logits, missing = m.activations()
	e.context = float64(m.CUDAContext)
	e.reserve = m.allocatorReserve()
	if m.SplitLayers {
		e = m.split(e)
	}
	return e, missing
}

// params is the parameter count: as given, or counted from the architecture. Without
// ffn, as Kaplan et al. 2020 ("Scaling Laws for Neural Language Models", §2.1) count a
// GPT block: 12·L·h² (4h² attention, an MLP of two h×4h matrices) plus the V·h
// embedding. With ffn, the Llama layout whose matrix names lora_targets uses: a gated MLP
// of three h×ffn matrices, two RMSNorm weights a layer, and an untied output head,
// 2·V·h (Llama-2-7B: 6.74B). Either way the attention is q_proj and o_proj of h × the
// query width and, with grouped-query attention, k_proj and v_proj of h × the
// key-value width (Ainslie et al. 2023, "GQA"): Llama-3-8B's 8 key-value heads of 32
// make them a quarter of q_proj. Biases (Qwen2's q, k, v) are left out. A block
// described by layer_params counts as that many.
func (m Model) params() float64 {
	if m.Params > 0 {
		return m.Params
	}
	return float64(m.Layers)*m.layerParams() + m.normParams() + m.embeddingParams()
}

// layerParams is one block's parameters, norms left out.
func (m Model) layerParams() float64 {
	if m.LayerParams > 0 {
		return m.LayerParams
	}
	h := float64(m.Hidden)
	return h*m.attentionWidth() + m.mlpParams()
}

// attentionWidth is the attention's four matrices' widths added up: q_proj and o_proj
// of the query width, k_proj and v_proj of the key-value width; times hidden, their
// parameters.
func (m Model) attentionWidth() float64 { return 2*m.queryWidth() + 2*m.kvWidth() }

// mlpParams is the MLP's: three h×ffn matrices when gated, else two h×4h.
func (m Model) mlpParams() float64 {
	h := float64(m.Hidden)
	if m.FFN > 0 {
		return 3 * h * float64(m.FFN)
	}
	return 2 * h * float64(m.ffn())
}

// normParams is the Llama layout's RMSNorm weights, two a layer and a final one.
func (m Model) normParams() float64 {
	if m.FFN == 0 && m.LayerParams == 0 {
		return 0
	}
	h := float64(m.Hidden)
	return 2*h*float64(m.Layers) + h
}

// embeddingParams is the embedding and, untied, the output head: V·h each.
func (m Model) embeddingParams() float64 {
	e := float64(m.Vocab) * float64(m.Hidden)
	if !m.tied() {
		e *= 2
	}
	return e
}

// tied says whether the output head is the input embedding: as given, else GPT's is
// and Llama's is not.
func (m Model) tied() bool {
	if m.TiedEmbeddings != nil {
		return *m.TiedEmbeddings
	}
	return m.FFN == 0 && m.LayerParams == 0
}

// gated says whether the block is Llama's (a gated MLP, RMSNorm, no dropout) rather
// than GPT's (an MLP of 4h, LayerNorm, dropout).
func (m Model) gated() bool { return m.FFN > 0 }

// headDim is the width of one attention head.
func (m Model) headDim() int {
	switch {
	case m.HeadDim > 0:
		return m.HeadDim
	case m.Heads > 0:
		return m.Hidden / m.Heads
	}
	return 0
}

// queryWidth is q_proj's output (and o_proj's input): heads × head_dim, which need not
// be the hidden size (Qwen3-4B: 32 × 128 over 2560).
func (m Model) queryWidth() float64 {
	if m.Heads == 0 {
		return float64(m.Hidden)
	}
	return float64(m.Heads * m.headDim())
}

// kvWidth is k_proj's and v_proj's output: kv_heads × head_dim.
func (m Model) kvWidth() float64 {
	if m.KVHeads == 0 {
		return m.queryWidth()
	}
	return float64(m.KVHeads * m.headDim())
}

// ffn is the MLP's width: as given, or GPT's 4h.
func (m Model) ffn() int {
	if m.FFN > 0 {
		return m.FFN
	}
	return 4 * m.Hidden
}

// targets are the matrices LoRA adapts.
func (m Model) targets() []string {
	if len(m.LoRATargets) == 0 {
		return defaultTarget
	}
	return m.LoRATargets
}

// loraParams counts the adapters: r·(d+k) for each adapted d×k matrix of each layer
// (Hu et al. 2021, "LoRA", §4.1). q_proj and o_proj are h × the query width, k_proj
// and v_proj h × the key-value width, the MLP's h×ffn.
func (m Model) loraParams() float64 {
	r := float64(m.LoRARank)
	per := 0.0
	for _, t := range m.targets() {
		d, k := m.matrix(t)
		per += r * (d + k)
	}
	return per * float64(m.Layers)
}

// matrix is the shape of one of a block's matrices.
func (m Model) matrix(name string) (in, out float64) {
	h := float64(m.Hidden)
	switch name {
	case "gate_proj", "up_proj", "down_proj":
		return h, float64(m.ffn())
	case "k_proj", "v_proj":
		return h, m.kvWidth()
	}
	return h, m.queryWidth()
}
