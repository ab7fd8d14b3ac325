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

	Precision             string // weights: fp32, bf16, fp16, int8, nf4
	Optimizer             string // adamw, adamw-8bit, sgd
	LoRARank              int    // 0 = full fine-tune
	LoRATargets           []string
	GradientCheckpointing bool
	// LogitsToKeep is how many positions the logits are computed for, as in
	// transformers' logits_to_keep: 0 = every position.
	LogitsToKeep int
	Attention    string // sdpa (flash or memory-efficient kernels) or eager
	ZeROStage    int    // DeepSpeed ZeRO stage, 0-3
	GPUs         int    // cards the job is spread over, for ZeRO
}

// Breakdown is an estimate, part by part, in bytes per card.
type Breakdown struct {
	Weights     int64 `json:"weights"`
	Gradients   int64 `json:"gradients"`
	Optimizer   int64 `json:"optimizer"`
	Activations int64 `json:"activations"`
	Logits      int64 `json:"logits"`
	Context     int64 `json:"context"`
	// Missing names what the description lacks for activations and logits; the total is
	// then a lower bound.
	Missing []string `json:"-"`
}

// Total is the sum of the parts.
func (b Breakdown) Total() int64 {
	return b.Weights + b.Gradients + b.Optimizer + b.Activations + b.Logits + b.Context
}

// Model description keys, as a sweep writes them; flags use the same names with '-'.
var modelKeys = []string{"name", "config", "params", "layers", "hidden", "heads", "kv_heads", "head_dim", "ffn", "vocab",
	"tied_embeddings", "seq_len", "micro_batch", "precision", "optimizer", "lora_rank", "lora_targets",
	"gradient_checkpointing", "logits_to_keep", "attention", "zero_stage", "gpus"}

var (
	precisions = []string{"fp32", "bf16", "fp16", "int8", "nf4"}
	optimizers = []string{"adamw", "adamw-8bit", "sgd"}
	attentions = []string{"sdpa", "eager"}
	// loraMatrices are the linear layers of a Llama-style block LoRA can adapt.
	loraMatrices  = []string{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}
	defaultTarget = []string{"q_proj", "v_proj"} // PEFT's default for Llama and Mistral
)

// LogitBytes is what the loss holds at its peak for each logit (one position's score
// of one token of the vocabulary): PyTorch upcasts the 16-bit logits to fp32 for the
// cross-entropy, whose log-softmax keeps its fp32 output for the backward pass; there,
// the gradient coming from the NLL loss and the one the log-softmax hands back are fp32
// too, and all three are alive at once. Measured on the CPU with torch.profiler for
// examples/trainers/train_torch.py (examples/trainers/measure_logits.py): 12.0 bytes a
// logit under bf16 autocast and in fp32 alike, against the 4 of one fp32 copy this
// estimate counted before. A trainer that keeps the 16-bit logits too (Hugging Face's
// models return them) holds 2 more, which the headroom and the learned peaks cover.
const LogitBytes = 12

// CUDAContext is what each CUDA process holds before its first tensor: the context with
// lazily loaded modules (the default since CUDA 11.7 / PyTorch 1.13) and cuBLAS/cuDNN
// workspaces; REFERENCE §4 gives 300-500 MiB, and the upper end is taken so that
// several jobs on a card do not each come up short.
const CUDAContext = 500 << 20

// maxEstimate bounds an estimate: a petabyte a card is a typo (a unit given twice:
// 7000000000B is 7e18 parameters), and sizes beyond it would overflow as the packer
// adds them up.
const maxEstimate = 1 << 50

// ModelKeys lists the keys of a model description.
func ModelKeys() []string { return slices.Clone(modelKeys) }

// ModelOf reads a model description. A value may be a template of the job's parameters
// ("{batch_size}"), filled from params (nil: no parameters).
func ModelOf(desc *Map, params *Map) (Model, error) {
	m := Model{Precision: "bf16", Optimizer: "adamw", Attention: "sdpa", GPUs: 1}
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
		switch k {
		case "params":
			p, err := ParseCount(v)
			if err != nil {
				bad(k, "%v", err)
			}
			m.Params = p
		case "precision":
			m.Precision = oneOf(k, v, precisions, bad)
		case "optimizer":
			m.Optimizer = oneOf(k, v, optimizers, bad)
		case "attention":
			m.Attention = oneOf(k, v, attentions, bad)
		case "lora_targets":
			m.LoRATargets = loraTargets(v, bad)
		case "gradient_checkpointing", "tied_embeddings":
			b, err := strconv.ParseBool(v)
			if err != nil {
				bad(k, "write true or false, not %q", v)
			}
			if k == "tied_embeddings" {
				m.TiedEmbeddings = &b
			} else {
				m.GradientCheckpointing = b
			}
		case "name", "config":
			bad(k, "must be expanded into the keys it gives first (ExpandModel)")
		default:
			lo := 1
			if k == "lora_rank" || k == "logits_to_keep" || k == "zero_stage" {
				lo = 0
			}
			n, err := strconv.Atoi(v)
			if err != nil || n < lo || (k == "zero_stage" && n > 3) {
				want := fmt.Sprintf("a whole number of at least %d", lo)
				if k == "zero_stage" {
					want = "0, 1, 2 or 3"
				}
				bad(k, "%q is not %s", v, want)
				continue
			}
			*m.intField(k) = n
		}
	}
	if len(errs) == 0 {
		errs = m.check()
	}
	if len(errs) > 0 {
		return m, fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return m, nil
}

func (m *Model) intField(k string) *int {
	return map[string]*int{"layers": &m.Layers, "hidden": &m.Hidden, "heads": &m.Heads, "kv_heads": &m.KVHeads, "head_dim": &m.HeadDim, "ffn": &m.FFN,
		"vocab": &m.Vocab, "seq_len": &m.SeqLen, "micro_batch": &m.MicroBatch, "lora_rank": &m.LoRARank,
		"logits_to_keep": &m.LogitsToKeep, "zero_stage": &m.ZeROStage, "gpus": &m.GPUs}[k]
}

// check says what the description lacks to be estimated at all.
func (m *Model) check() []string {
	var errs []string
	if m.Params == 0 && (m.Layers == 0 || m.Hidden == 0) {
		errs = append(errs, "params: give the parameter count (params: 7B) or the architecture (layers and hidden, with vocab)")
	}
	if m.LoRARank > 0 && (m.Layers == 0 || m.Hidden == 0) {
		errs = append(errs, "lora_rank: LoRA needs layers and hidden to count the adapters' parameters, e.g. layers: 32, hidden: 4096")
	}
	if m.LoRARank == 0 && (m.Precision == "int8" || m.Precision == "nf4") {
		errs = append(errs, fmt.Sprintf("precision: %s weights are frozen: give lora_rank (QLoRA) or train in bf16", m.Precision))
	}
	if m.ZeROStage == 3 && (m.Hidden == 0 || (m.Vocab == 0 && m.Layers == 0)) {
		errs = append(errs, "zero_stage: ZeRO-3 holds the largest layer whole: give hidden with vocab or layers")
	}
	if m.ZeROStage > 0 && m.LoRARank > 0 {
		errs = append(errs, "zero_stage: gpuq estimates ZeRO for full fine-tunes only; leave it out with LoRA")
	}
	if (m.KVHeads > 0 || m.HeadDim > 0) && m.Heads == 0 {
		errs = append(errs, "heads: kv_heads and head_dim need the number of query heads, e.g. heads: 32")
	}
	if m.KVHeads > m.Heads || m.KVHeads > 0 && m.Heads%m.KVHeads != 0 {
		errs = append(errs, fmt.Sprintf("kv_heads: %d does not divide heads (%d): grouped-query attention shares each key-value head among a whole number of query heads", m.KVHeads, m.Heads))
	}
	if len(errs) > 0 {
		return errs
	}
	if p, _ := m.parts(); !(p.total() <= maxEstimate) {
		return []string{fmt.Sprintf("the model comes to %.3g bytes a card, more than the %s any card could hold: check params (%.3g parameters) and the sizes for a typo",
			p.total(), FormatSize(maxEstimate), m.params())}
	}
	return nil
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
		p, ok := params.Get(name)
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
		Activations: int64(p.activations), Logits: int64(p.logits), Context: CUDAContext, Missing: missing}
}

// parts are an estimate's parts before they are whole bytes: in float64 a description
// that is far too large stays far too large, where int64 would wrap around to a
// negative size that fits every card.
type parts struct {
	weights, gradients, optimizer, activations, logits float64
}

func (p parts) total() float64 {
	return p.weights + p.gradients + p.optimizer + p.activations + p.logits + CUDAContext
}

func (m Model) parts() (parts, []string) {
	p := m.params()
	var e parts
	if m.LoRARank > 0 {
		trainable := m.loraParams()
		// Adapters are trained in 16-bit, like a bf16 model's weights.
		e.weights = p*weightBytes(m.Precision) + trainable*2
		e.gradients = trainable * 2
		e.optimizer = trainable * optimizerBytes(m.Optimizer, "bf16")
	} else {
		e.weights, e.gradients, e.optimizer = m.modelState(p)
	}
	var missing []string
	e.activations, e.logits, missing = m.activations()
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
// make them a quarter of q_proj. Biases (Qwen2's q, k, v) are left out.
func (m Model) params() float64 {
	if m.Params > 0 {
		return m.Params
	}
	h, L, V := float64(m.Hidden), float64(m.Layers), float64(m.Vocab)
	attention := 2*h*m.queryWidth() + 2*h*m.kvWidth()
	layer, norms := attention+2*h*float64(m.ffn()), 0.0
	if m.FFN > 0 {
		layer, norms = attention+3*h*float64(m.FFN), 2*h*L+h
	}
	embeddings := V * h
	if !m.tied() {
		embeddings *= 2
	}
	return L*layer + norms + embeddings
}

// tied says whether the output head is the input embedding: as given, else GPT's is
// and Llama's is not.
func (m Model) tied() bool {
	if m.TiedEmbeddings != nil {
		return *m.TiedEmbeddings
	}
	return m.FFN == 0
}

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

// loraParams counts the adapters: r·(d+k) for each adapted d×k matrix of each layer
// (Hu et al. 2021, "LoRA", §4.1). q_proj and o_proj are h × the query width, k_proj
// and v_proj h × the key-value width, the MLP's h×ffn.
func (m Model) loraParams() float64 {
	h, f, r := float64(m.Hidden), float64(m.ffn()), float64(m.LoRARank)
	targets := m.LoRATargets
	if len(targets) == 0 {
		targets = defaultTarget
	}
	per := 0.0
	for _, t := range targets {
		switch t {
		case "gate_proj", "up_proj", "down_proj":
			per += r * (h + f)
		case "k_proj", "v_proj":
			per += r * (h + m.kvWidth())
		default:
			per += r * (h + m.queryWidth())
		}
	}
	return per * float64(m.Layers)
}

// weightBytes is what one weight costs (REFERENCE §4, from EleutherAI's "Transformer
// Math 101"): NF4 stores 4 bits plus a block-wise absmax constant, about 0.55 bytes
// with double quantization (Dettmers et al. 2023, "QLoRA", §3).
func weightBytes(precision string) float64 {
	switch precision {
	case "fp32":
		return 4
	case "int8":
		return 1
	case "nf4":
		return 0.55
	}
	return 2
}

// optimizerBytes is the optimizer's state per trainable parameter (REFERENCE §4, from
// "Transformer Math 101"): in mixed precision AdamW keeps an fp32 master copy and two
// fp32 moments (12 bytes), 8-bit Adam quantizes the moments (6), SGD with momentum keeps
// the master copy and one moment (8). Training in fp32 needs no master copy.
func optimizerBytes(optimizer, precision string) float64 {
	master := 4.0
	if precision == "fp32" {
		master = 0
	}
	switch optimizer {
	case "adamw-8bit":
		return master + 2
	case "sgd":
		return master + 4
	}
	return master + 8
}

// modelState is a full fine-tune's weights, gradients and optimizer state per card. A
// mixed-precision AdamW run costs 16 bytes a parameter, as HF accelerate's
// `estimate-memory` reports ("~4x the fp32 model size"). DeepSpeed ZeRO over N cards
// (Rajbhandari et al. 2020, "ZeRO", §5; REFERENCE §4): stage 1 partitions the optimizer
// state, stage 2 also the gradients, 2P + 18P/N in all for AdamW, stage 3 also the
// weights, leaving 4× the largest layer gathered at a time plus 18P/N.
func (m Model) modelState(p float64) (weights, grads, opt float64) {
	wb := weightBytes(m.Precision)
	ob := optimizerBytes(m.Optimizer, m.Precision)
	n := float64(max(m.GPUs, 1))
	switch m.ZeROStage {
	case 1:
		return p * wb, p * wb, p * ob / n
	case 2:
		// REFERENCE's 18P/N is gradients and AdamW's 16 bytes of state; another
		// optimizer changes the state's share.
		return p * wb, p * wb / n, p * (ob + 4) / n
	case 3:
		return 4*m.largestLayer() + p*wb/n, p * wb / n, p * (ob + 4) / n
	}
	return p * wb, p * wb, p * ob
}

// largestLayer is the most parameters one module holds: the embedding or a block.
func (m Model) largestLayer() float64 {
	h := float64(m.Hidden)
	mlp := 2 * h * float64(m.ffn())
	if m.FFN > 0 {
		mlp = 3 * h * float64(m.FFN)
	}
	return max(float64(m.Vocab)*h, 2*h*(m.queryWidth()+m.kvWidth())+mlp)
}

// activations is what the forward pass keeps for the backward one, and the logits.
//
// Per transformer layer, in 16 bits and without tensor or sequence parallelism,
// Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large Transformer
// Models", §4.1) count s·b·h·(34 + 5·a·s/h) bytes. The 5·a·s/h term is the attention
// matrix (scores, softmax, dropout); SDPA's flash and memory-efficient kernels, PyTorch's
// default for transformers, never store it. Of the 34, the attention block's 11 are
// the QKV input (2), Q and K (4), V (2), the output projection's input (2) and a dropout
// mask (1): Q and the projection's input are the query width wide, K and V the
// key-value width, so with grouped-query attention and a head size other than h/a the
// 34 becomes 26 + 4·q/h + 4·kv/h. With LoRA the frozen linear layers need not keep
// their inputs: the output projection's (2·q/h), the MLP's first linear layer's (2) and
// its second's (8) are dropped unless adapted. Full gradient checkpointing keeps each
// layer's 2·s·b·h input and recomputes one layer at a time. Training in fp32 doubles
// all of it.
//
// The logits are b·s·V values, for logits_to_keep positions if set, at LogitBytes each
// (see there).
func (m Model) activations() (acts, logits float64, missing []string) {
	for _, k := range []struct {
		name string
		v    int
	}{{"layers", m.Layers}, {"hidden", m.Hidden}, {"seq_len", m.SeqLen}, {"micro_batch", m.MicroBatch}} {
		if k.v == 0 {
			missing = append(missing, k.name)
		}
	}
	if m.Attention == "eager" && m.Heads == 0 {
		missing = append(missing, "heads")
	}
	if m.Vocab == 0 {
		missing = append(missing, "vocab")
	}
	s, b := float64(m.SeqLen), float64(m.MicroBatch)
	if m.Vocab > 0 && m.SeqLen > 0 && m.MicroBatch > 0 {
		kept := s
		if m.LogitsToKeep > 0 {
			kept = min(s, float64(m.LogitsToKeep))
		}
		logits = b * kept * float64(m.Vocab) * LogitBytes
	}
	if slices.ContainsFunc(missing, func(k string) bool { return k != "vocab" }) {
		return 0, logits, missing
	}
	h, L := float64(m.Hidden), float64(m.Layers)
	q, kv := m.queryWidth()/h, m.kvWidth()/h
	perToken := 26 + 4*q + 4*kv
	if m.LoRARank > 0 {
		targets := m.LoRATargets
		if len(targets) == 0 {
			targets = defaultTarget
		}
		adapted := func(name string) bool { return slices.Contains(targets, name) }
		if !adapted("o_proj") {
			perToken -= 2 * q
		}
		if !adapted("gate_proj") && !adapted("up_proj") { // one input for both
			perToken -= 2
		}
		if !adapted("down_proj") {
			perToken -= 8
		}
	}
	layer := s * b * h * perToken
	if m.Attention == "eager" {
		layer += 5 * float64(m.Heads) * s * s * b
	}
	total := L * layer
	if m.GradientCheckpointing {
		total = L*2*s*b*h + layer
	}
	if m.Precision == "fp32" {
		total *= 2
	}
	return total, logits, missing
}

// Switch is a common change that lowers a job's memory, with the job as it would be.
type Switch struct {
	Change string // as a person says it
	Model  Model
}

// defaultLoRARank is the rank the LoRA switches suggest: PEFT users' usual 16, the
// seed notes' too.
const defaultLoRARank = 16

// Switches are the usual ways to make a job need less memory, each applied alone to m;
// those that change nothing for m are left out: gradient checkpointing, half the
// micro-batch with twice the accumulation, 8-bit AdamW, LoRA, QLoRA (NF4 weights), and
// logits for the last position only (a classifier's).
func (m Model) Switches() []Switch {
	var out []Switch
	add := func(change string, edit func(*Model)) {
		s := m
		edit(&s)
		out = append(out, Switch{Change: change, Model: s})
	}
	arch := m.Layers > 0 && m.Hidden > 0
	if !m.GradientCheckpointing && arch && m.SeqLen > 0 && m.MicroBatch > 0 {
		add("gradient checkpointing", func(s *Model) { s.GradientCheckpointing = true })
	}
	if m.MicroBatch > 1 {
		add(fmt.Sprintf("micro-batch %d, accumulation ×2", m.MicroBatch/2), func(s *Model) { s.MicroBatch /= 2 })
	}
	if m.LoRARank == 0 && m.Optimizer == "adamw" {
		add("8-bit AdamW (bitsandbytes)", func(s *Model) { s.Optimizer = "adamw-8bit" })
	}
	if m.LoRARank == 0 && arch && m.ZeROStage == 0 {
		add(fmt.Sprintf("LoRA r=%d on q_proj, v_proj", defaultLoRARank), func(s *Model) { s.LoRARank, s.LoRATargets = defaultLoRARank, nil })
	}
	if m.Precision != "nf4" && arch && m.ZeROStage == 0 {
		add("QLoRA: NF4 weights, LoRA r="+strconv.Itoa(max(m.LoRARank, defaultLoRARank)), func(s *Model) {
			s.Precision = "nf4"
			if s.LoRARank == 0 {
				s.LoRARank, s.LoRATargets = defaultLoRARank, nil
			}
		})
	}
	if m.Vocab > 0 && m.SeqLen > 1 && m.MicroBatch > 0 && m.LogitsToKeep != 1 {
		add("logits of the last position only (logits_to_keep: 1; a classifier)", func(s *Model) { s.LogitsToKeep = 1 })
	}
	return out
}
