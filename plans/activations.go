package plans

import "slices"

// What the forward pass keeps for the backward one, counted tensor by tensor: each
// operation saves what its backward needs, and only for inputs that need a gradient
// (PyTorch's autograd saves a matmul's input only when its weight trains, its weight
// only when its input needs a gradient). A frozen linear layer (LoRA's base) keeps no
// input; bitsandbytes' int8 matmul is an autograd function that keeps its input whatever
// trains, and so did its 4-bit one before 0.44 (see quantKeepsInputs).

// LogitBytes is what the loss holds at its peak for each logit (one position's score
// of one token of the vocabulary): PyTorch upcasts the 16-bit logits to fp32 for the
// cross-entropy, whose log-softmax keeps its fp32 output for the backward pass; there,
// the gradient coming from the NLL loss and the one the log-softmax hands back are fp32
// too, and all three are alive at once. Measured on the CPU with torch.profiler for
// examples/trainers/train_torch.py (examples/trainers/measure_logits.py): 12.0 bytes a
// logit under bf16 autocast and in fp32 alike. The logits the model returns, which
// the caller holds through the backward pass, come on top (see logitBytes).
const LogitBytes = 12

// logitBytes is what the logits and the loss hold at the peak, per logit, by how the
// trainer computes the loss:
//   - upcast: the model returns its logits in the compute dtype (2 bytes, or 4 in
//     fp32), and the loss upcasts them (LogitBytes): transformers since 4.45, a plain
//     PyTorch loop.
//   - fp32-logits: the model itself returns fp32 logits (4 + LogitBytes), as
//     transformers' Llama, Mistral and Qwen2 did before 4.45 and torchtune's models
//     without a chunked loss do.
//   - chunked: the head and the loss run over chunks of positions, so the gradients
//     are a chunk's: LitGPT's chunked_cross_entropy keeps the 16-bit logits and each
//     chunk's log-softmax at their width (F.cross_entropy does not upcast: 2 + 2);
//     torchtune's CEWithChunkedOutputLoss keeps each chunk's fp32 log-softmax and its
//     recipes free the logits (del logits) before the backward pass (4). Twice the
//     compute width either way.
//   - fused: the head and the loss are one kernel that never holds the logits (Liger's
//     fused linear cross-entropy, Apple's Cut Cross-Entropy).
func (m Model) logitBytes() float64 {
	kept := m.keptLogitBytes()
	switch m.Loss {
	case "chunked":
		return 2 * m.computeBytes()
	case "fused":
		return 0
	}
	return kept + LogitBytes
}

// keptLogitBytes is the width of the logits the model returns and its caller holds
// until the backward pass is over.
func (m Model) keptLogitBytes() float64 {
	if m.Loss == "fp32-logits" {
		return 4
	}
	if m.Loss == "fused" {
		return 0
	}
	return m.computeBytes()
}

// computeBytes is the width of what the matmuls produce: 16 bits, or 32 when fp32
// weights run without autocast.
func (m Model) computeBytes() float64 {
	if m.Precision == "fp32" && !m.Autocast {
		return 4
	}
	return 2
}

// residualBytes is the width of the residual stream between blocks: fp32 under
// autocast (fp32 residual plus a 16-bit branch is fp32), else the compute width.
func (m Model) residualBytes() float64 {
	if m.Autocast {
		return 4
	}
	return m.computeBytes()
}

// activations is what the forward pass keeps for the backward one, and the logits.
//
// Per block, tokenBytes for each token (tokens: seq_len × micro_batch) times layers.
// Full gradient checkpointing keeps each block's input and recomputes one block at a
// time (Korthikanti et al. 2022, §5). The recomputed block comes after the loss's
// backward, but the allocator's cache keeps the loss's blocks, which are of other
// sizes: the two add up in what the card holds. Under autocast each matmul also keeps the 16-bit
// copy of its fp32 weight that it computed with: 2 bytes for each weight of every
// block and of the head.
//
// The logits are b·s·V values, for logits_to_keep positions if set, at logitBytes
// each.
func (m Model) activations() (acts, logits float64, missing []string) {
	for _, k := range []struct {
		name string
		v    int
	}{{"layers", m.Layers}, {"hidden", m.Hidden}, {"seq_len", m.SeqLen}, {"micro_batch", m.MicroBatch}} {
		if k.v == 0 {
			missing = append(missing, k.name)
		}
	}
	if m.Attention == "eager" && m.Heads == 0 && m.LayerActivations == 0 {
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
		logits = b * kept * float64(m.Vocab) * m.logitBytes()
	}
	if slices.ContainsFunc(missing, func(k string) bool { return k != "vocab" }) {
		return 0, logits, missing
	}
	tokens, L := s*b, float64(m.Layers)
	layer := tokens * m.tokenBytes()
	acts = L * layer
	casts := 0.0
	if m.Autocast {
		matmuls := m.params()
		if !m.tied() { // the embedding is looked up, not multiplied
			matmuls -= float64(m.Vocab) * float64(m.Hidden)
		}
		casts = 2 * matmuls
	}
	if m.GradientCheckpointing {
		acts = L*tokens*m.residualBytes()*float64(m.Hidden) + layer
		casts /= max(L, 1) // one block's, recomputed
	}
	return acts + casts + m.dequantized() + m.heldInputs(tokens), logits, missing
}

// quantKeepsInputs says whether the quantized matmuls keep their inputs for the
// backward pass. bitsandbytes' int8 MatMul8bitLt does (ctx.tensors = (CAt, subA, A),
// bitsandbytes/autograd/_functions.py); its 4-bit MatMul4Bit did until 0.44.0, which
// keeps only the packed weight (ctx.tensors = (None, B)): the input served the weight's
// gradient, which a frozen weight never needs.
func (m Model) quantKeepsInputs() bool {
	if m.Precision == "int8" {
		return true
	}
	major, minor, ok := minorVersion(m.Bitsandbytes)
	return m.quantized() && ok && major == 0 && minor < 44
}

// dequantized is the transient that quantized weights add at the peak: bitsandbytes
// dequantizes a layer's whole weight for each matmul, forward and backward
// (F.dequantize_4bit(B, quant_state).to(A.dtype); the int8 backward likewise), so the
// largest quantized layer is on the card in 16 bits at the peak. The dequantized
// weight comes in the dtype it was quantized from: Lightning quantizes from fp16, and
// the cast to bf16 makes a second copy.
func (m Model) dequantized() float64 {
	if !m.quantized() {
		return 0
	}
	copies := 1.0
	if m.Quantizer == "lightning" {
		copies = 2
	}
	return copies * 2 * m.largestQuantized()
}

// heldInputs is what a loop that holds the last step's outputs (HoldsLastStep) keeps of
// that step while the next one runs its forward pass: bitsandbytes keeps its matmuls'
// inputs as attributes of their autograd nodes (ctx.tensors), not as saved tensors, so
// the backward pass does not free them and they live as long as the graph, which the
// held outputs keep. Every block's quantized matmuls (q, k and v's input, o_proj's,
// the MLP's and down_proj's), none with gradient checkpointing, whose recomputed graph
// is freed block by block, and the head's where it is quantized. Other saved tensors
// are freed by the backward pass; the held logits take no more than the loss holds at
// its own peak.
func (m Model) heldInputs(tokens float64) float64 {
	if !m.HoldsLastStep || !m.quantKeepsInputs() {
		return 0
	}
	c, h := m.computeBytes(), float64(m.Hidden)
	held := 0.0
	if !m.GradientCheckpointing {
		held = float64(m.Layers) * c * (2*h + m.queryWidth() + float64(m.ffn()))
	}
	if m.quantizedHead() {
		held += c * h
	}
	return tokens * held
}

// tokenBytes is what one token leaves in one block for the backward pass: as
// layer_activations gives it, else counted for a Llama block (gated MLP) or a GPT one.
// When a share or a count of the model trains, wherever it is, gradients cross every
// block: the blocks keep what frozen ones do, and that share of what trained ones
// would keep on top.
func (m Model) tokenBytes() float64 {
	if m.LayerActivations > 0 {
		return m.LayerActivations
	}
	if t := m.Trainable; t.Fraction > 0 || t.Count > 0 {
		full := m
		full.Trainable = Trainable{}
		frozen := m.blockBytes()
		return frozen + m.trainableCount()/m.params()*(full.blockBytes()-frozen)
	}
	return m.blockBytes()
}

func (m Model) blockBytes() float64 {
	if m.gated() {
		return m.llamaToken()
	}
	return m.gptToken()
}

// llamaToken counts a Llama block as transformers, torchtune and LitGPT write it
// (c: the compute width, 2 bytes in 16 bits):
//   - each RMSNorm upcasts its input to fp32 and keeps it (4h); a trained norm weight
//     also keeps the normalized input (c·h, fp32 under autocast);
//   - the norm's output is kept once if q/k/v (or gate/up) keep their input (c·h);
//   - SDPA's flash and memory-efficient kernels keep q, k, v and their output, with k
//     and v repeated to every query head (transformers' repeat_kv, torchtune's expand
//     do so before the call): 4·c·q; eager attention keeps q, k, v and the fp32
//     softmax with its 16-bit copy (6·a·s, a heads by s positions);
//   - o_proj's input (c·q) if o_proj keeps it;
//   - the gated MLP: SiLU's input, its output and up_proj's output, which the product
//     keeps (3·c·f), and down_proj's input (c·f) if it keeps it.
//
// A full fine-tune of Llama-2-7B: 26h + 8f = 47.5 bytes a token per hidden unit,
// against the 34 of Korthikanti et al.'s GPT block.
func (m Model) llamaToken() float64 {
	h, q, f, c := float64(m.Hidden), m.queryWidth(), float64(m.ffn()), m.computeBytes()
	norm := 4 * h
	if m.trains("norms") {
		norm += max(c, m.residualBytes()) * h
	}
	t := 2*norm + m.inputs(h, "q_proj", "k_proj", "v_proj") + m.scattered() + m.inputs(q, "o_proj") +
		m.inputs(h, "gate_proj", "up_proj") + 3*c*f + m.inputs(f, "down_proj")
	if m.Attention == "eager" {
		soft := 4.0
		if c < 4 {
			soft += c
		}
		return t + 3*c*q + float64(m.Heads)*float64(m.SeqLen)*soft
	}
	return t + 4*c*q
}

// gptToken counts a GPT block (LayerNorm, an MLP of two matrices with GELU, dropout
// after the attention and the MLP) as Korthikanti et al. 2022 (§4.1) do: per token,
// 34 bytes per hidden unit in 16 bits, plus 5·a·s for the attention matrix (the
// softmax, its dropout mask and output) with eager attention. Of the 34: the two
// LayerNorms' inputs (4), their outputs kept by the QKV and first MLP matmul (4), q, k
// and v (6), the attention projection's input (2), the MLP's GELU input and output (16)
// and two dropout masks (2). SDPA keeps its output (2) instead of the attention
// matrix. Under autocast LayerNorm runs in fp32 on the fp32 residual stream, and the
// softmax in fp32.
func (m Model) gptToken() float64 {
	h, q, kv, f, c := float64(m.Hidden), m.queryWidth(), m.kvWidth(), float64(m.ffn()), m.computeBytes()
	t := 2*m.residualBytes()*h + m.inputs(h, "q_proj", "k_proj", "v_proj") + m.scattered() + c*(q+2*kv) +
		m.inputs(q, "o_proj") + h + m.inputs(h, "up_proj") + c*f + m.inputs(f, "down_proj") + h
	if m.Attention == "eager" {
		soft := c
		if m.Autocast {
			soft = 4
		}
		return t + float64(m.Heads)*float64(m.SeqLen)*(soft+1+c)
	}
	return t + c*q
}

// inputs is what a tensor of width bytes-per-unit width, fed to the named matrices,
// leaves behind: kept once (c·width) if one of them keeps its input (a trained
// weight, a bitsandbytes matmul that keeps its input, or a LoRA adapter without
// dropout, whose first matrix trains), and for each adapter with dropout its own
// dropped copy and mask ((c+1)·width); with FusedQKV, q, k and v are one matrix whose
// adapters share one dropped copy.
func (m Model) inputs(width float64, names ...string) float64 {
	c := m.computeBytes()
	kept, dropped, fused := false, 0.0, false
	for _, n := range names {
		adapted := m.LoRARank > 0 && slices.Contains(m.targets(), n)
		if adapted && !m.LoRADropout || m.trains(n) || m.quantKeepsInputs() {
			kept = true
		}
		switch {
		case adapted && m.LoRADropout && m.FusedQKV && slices.Contains(qkv, n):
			fused = true
		case adapted && m.LoRADropout:
			dropped += (c + 1) * width
		}
	}
	if fused {
		dropped += (c + 1) * width
	}
	if kept {
		return c*width + dropped
	}
	return dropped
}

// qkv are the attention's input projections, one matrix in some layouts (FusedQKV).
var qkv = []string{"q_proj", "k_proj", "v_proj"}

// scattered is what adapters on some but not all of a fused q, k and v keep: LitGPT's
// LoRAQKVLinear scatters their output into the matrix's width with index_copy, whose
// backward formula refers to its source (grad.index_select(...).expand_as(source)), so
// autograd keeps the adapted widths' output.
func (m Model) scattered() float64 {
	if !m.FusedQKV || m.LoRARank == 0 {
		return 0
	}
	width, n := 0.0, 0
	for _, name := range qkv {
		if slices.Contains(m.targets(), name) {
			_, out := m.matrix(name)
			width += out
			n++
		}
	}
	if n == len(qkv) { // all three: the output is the matrix's, nothing scattered
		return 0
	}
	return m.computeBytes() * width
}

// trains says whether a block's module trains its own weights: every one in a full
// fine-tune, none under LoRA or when a share or a count trains (see tokenBytes),
// those trainable names otherwise.
func (m Model) trains(module string) bool {
	t := m.Trainable
	switch {
	case m.LoRARank > 0, t.Fraction > 0, t.Count > 0:
		return false
	case !t.set():
		return !m.quantized()
	}
	group := "attention"
	switch module {
	case "gate_proj", "up_proj", "down_proj":
		group = "mlp"
	case "norms":
		group = "norms"
	}
	return slices.Contains(t.Modules, module) || slices.Contains(t.Modules, group)
}
