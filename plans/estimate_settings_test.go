package plans

import (
	"math"
	"strings"
	"testing"
)

// llama7B is Llama-2-7B's architecture.
var llama7B = []any{"layers", 32, "hidden", 4096, "ffn", 11008, "heads", 32, "vocab", 32000}

func with(base []any, kv ...any) []any { return append(append([]any{}, base...), kv...) }

// TestLlamaBlockActivations: a Llama block keeps, per token, its norms' fp32 inputs, its
// SwiGLU's three wide tensors and the matmuls' inputs: 26h + 8f bytes in a full
// fine-tune (47.5h for Llama-2-7B), not the 34h of a GPT block; LoRA's frozen matmuls
// keep no input (18h + 6f with adapters on q and v), nor do bitsandbytes' 4-bit ones
// since 0.44; before, they did.
func TestLlamaBlockActivations(t *testing.T) {
	const h, f, tokens, L = 4096.0, 11008.0, 512.0, 32.0
	perToken := func(kv ...any) float64 {
		m := model(t, with(llama7B, append([]any{"seq_len", 512, "micro_batch", 1}, kv...)...)...)
		return (float64(m.Estimate().Activations) - m.dequantized()) / tokens / L
	}
	if got, want := perToken(), 26*h+8*f; got != want {
		t.Errorf("full fine-tune: %.0f bytes a token and layer (%.1fh), want 26h+8f = %.0f", got, got/h, want)
	}
	if got, want := perToken("lora_rank", 8), 18*h+6*f; got != want {
		t.Errorf("LoRA on q and v: %.0f, want 18h+6f = %.0f", got, want)
	}
	// With dropout each adapter keeps its own dropped input and mask: 3h each.
	if got, want := perToken("lora_rank", 8, "lora_dropout", 0.05), 16*h+6*f+2*3*h; got != want {
		t.Errorf("LoRA with dropout: %.0f, want %.0f", got, want)
	}
	// QLoRA: bitsandbytes 0.43 keeps the inputs of o_proj, the MLP's and down_proj (q,
	// k and v's is the adapters'); 0.44 and later keep none.
	if got, want := perToken("lora_rank", 8, "precision", "nf4", "bitsandbytes", "0.43.1"), 18*h+6*f+2*h+2*h+2*f; got != want {
		t.Errorf("QLoRA, bitsandbytes 0.43: %.0f, want %.0f", got, want)
	}
	if got, want := perToken("lora_rank", 8, "precision", "nf4"), 18*h+6*f; got != want {
		t.Errorf("QLoRA, current bitsandbytes: %.0f, want %.0f", got, want)
	}
}

// TestOptimizerState: the optimizer's bytes per trainable parameter, by how it keeps
// its state.
func TestOptimizerState(t *testing.T) {
	for _, tt := range []struct {
		kv   []any
		want float64 // bytes a parameter of weights, gradients and optimizer state
	}{
		{nil, 2 + 2 + 12}, // fp32 master copy and moments
		{[]any{"optimizer_state", "bf16"}, 2 + 2 + 4},     // torchtune, LitGPT bf16-true, Trainer on a bf16 model
		{[]any{"optimizer_state", "fp32"}, 2 + 2 + 8},     // fp32 moments, no copy
		{[]any{"precision", "fp32"}, 4 + 4 + 8},           // AMP: fp32 weights are the master
		{[]any{"optimizer", "adamw-8bit"}, 2 + 2 + 4 + 2}, // copy and two bytes of moments
		{[]any{"optimizer", "adamw-8bit", "optimizer_state", "bf16"}, 2 + 2 + 2},
		{[]any{"optimizer", "adafactor", "precision", "fp32"}, 4 + 4},
		{[]any{"optimizer", "sgd", "optimizer_state", "bf16"}, 2 + 2 + 2},
	} {
		b := model(t, with([]any{"params", "1B"}, tt.kv...)...).Estimate()
		if got := float64(b.Weights+b.Gradients+b.Optimizer) / 1e9; got != tt.want {
			t.Errorf("%v: %.2f bytes a parameter, want %.2f", tt.kv, got, tt.want)
		}
	}
}

// TestQuantizedWeights: NF4 quantizes the blocks' matmuls only (4.5 bits, 4.127 with
// double quantization); the embeddings and head stay 16-bit, or fp32 after PEFT's
// prepare_model_for_kbit_training, which also makes the adapters fp32.
func TestQuantizedWeights(t *testing.T) {
	qlora := with(llama7B, "lora_rank", 8, "lora_targets", "q_proj")
	lora := model(t, qlora...)
	adapters := lora.loraParams()
	kept := 2 * 32000 * 4096.0
	norms := 2*32*4096.0 + 4096
	quantized := lora.params() - kept - norms
	for _, tt := range []struct {
		kv   []any
		want float64
	}{
		{[]any{"precision", "nf4"}, quantized*4.5/8 + (kept+norms)*2 + adapters*2},
		{[]any{"precision", "nf4-dq"}, quantized*(4+8.0/64+32.0/(64*256))/8 + (kept+norms)*2 + adapters*2},
		{[]any{"precision", "nf4", "prepare_kbit", true}, quantized*4.5/8 + (kept+norms)*4 + adapters*4},
	} {
		if got := float64(model(t, with(qlora, tt.kv...)...).Estimate().Weights); math.Abs(got-tt.want) > 1 {
			t.Errorf("%v: weights %.4g, want %.4g", tt.kv, got, tt.want)
		}
	}
}

// TestAutocast: fp32 weights under autocast keep 16-bit activations, but not half of
// fp32's: the residual stream and the norms stay fp32, and each matmul keeps the 16-bit
// copy of its weight, trained or frozen.
func TestAutocast(t *testing.T) {
	bert := []any{"params", "335M", "layers", 24, "hidden", 1024, "heads", 16, "vocab", 2, "logits_to_keep", 1, "seq_len", 512, "micro_batch", 4, "precision", "fp32"}
	fp32 := model(t, bert...).Estimate()
	amp := model(t, with(bert, "autocast", true)...).Estimate()
	casts := int64(2 * 335e6)
	if half := fp32.Activations / 2; amp.Activations-casts <= half {
		t.Errorf("autocast activations %s (less the weight copies), not above half of fp32's %s", FormatSize(amp.Activations-casts), FormatSize(fp32.Activations))
	}
	if amp.Weights+amp.Gradients+amp.Optimizer != fp32.Weights+fp32.Gradients+fp32.Optimizer {
		t.Errorf("autocast changed the model state")
	}
	// Frozen fp32 weights (LoRA on a model loaded in fp32) cost 4 bytes and their copy 2.
	frozen := model(t, with(llama7B, "lora_rank", 8, "precision", "fp32", "autocast", true, "seq_len", 1, "micro_batch", 1)...)
	if b := frozen.Estimate(); b.Weights < int64(4*frozen.params()) || b.Activations < int64(2*(frozen.params()-32000*4096)) {
		t.Errorf("frozen fp32 weights under autocast: weights %s, activations %s", FormatSize(b.Weights), FormatSize(b.Activations))
	}
	if _, err := ModelOf(mapOf("params", "7B", "autocast", true), nil); err == nil || !strings.Contains(err.Error(), "precision: fp32") {
		t.Errorf("autocast of bf16 weights: %v", err)
	}
}

// TestCUDAContextGiven: a CUDA context other than the default, such as the 1343 MiB
// Hugging Face measured on a V100 with CUDA 11.2, is counted as given.
func TestCUDAContextGiven(t *testing.T) {
	if b := model(t, "params", "1B", "cuda_context", "1343MiB").Estimate(); b.Context != 1343<<20 {
		t.Errorf("context %s", FormatSize(b.Context))
	}
}

// TestLoRAWithZeRO: LoRA under ZeRO-3 or FSDP's FULL_SHARD is estimated, the frozen base
// sharded with the rest, two blocks gathered.
func TestLoRAWithZeRO(t *testing.T) {
	lora := with(llama7B, "lora_rank", 64, "lora_targets", "all-linear", "optimizer_state", "bf16")
	one := model(t, lora...).Estimate()
	m := model(t, with(lora, "zero_stage", 3, "gpus", 2)...)
	two := m.Estimate()
	if want := one.Weights/2 + int64(m.gathered()); abs(two.Weights-want) > 2 || abs(two.Optimizer-one.Optimizer/2) > 2 {
		t.Errorf("LoRA over 2 cards with ZeRO-3: weights %s (want %s), optimizer %s", FormatSize(two.Weights), FormatSize(want), FormatSize(two.Optimizer))
	}
}

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}

// TestBitsandbytesInputs: bitsandbytes' 4-bit matmul kept its input for the backward
// pass before 0.44 and does not since; its int8 one keeps it in every version. A
// version gpuq cannot read is refused.
func TestBitsandbytesInputs(t *testing.T) {
	for _, tt := range []struct {
		precision, version string
		keeps              bool
	}{
		{"nf4", "", false}, {"nf4", "0.43.3", true}, {"nf4-dq", "0.42", true}, {"nf4", "0.44.0", false},
		{"nf4", "v0.41.1", true}, {"nf4", "1.0", false}, {"int8", "", true}, {"int8", "0.45", true}, {"bf16", "0.42", false},
	} {
		kv := with(llama7B, "precision", tt.precision, "lora_rank", 8)
		if tt.version != "" {
			kv = with(kv, "bitsandbytes", tt.version)
		}
		if got := model(t, kv...).quantKeepsInputs(); got != tt.keeps {
			t.Errorf("%s with bitsandbytes %q: keeps inputs %v, want %v", tt.precision, tt.version, got, tt.keeps)
		}
	}
	if _, err := ModelOf(mapOf(with(llama7B, "bitsandbytes", "latest")...), nil); err == nil || !strings.Contains(err.Error(), "0.42") {
		t.Errorf("bitsandbytes latest: %v", err)
	}
}

// TestHeldLastStep: a loop that holds the last step's outputs keeps, through the next
// forward pass, the inputs bitsandbytes (before 0.44) kept on its autograd nodes: every
// block's four quantized matmul inputs, or with gradient checkpointing none but the
// quantized head's; nothing with a current bitsandbytes or unquantized weights.
func TestHeldLastStep(t *testing.T) {
	const h, f, tokens, L = 4096.0, 11008.0, 512.0, 32.0
	qlora := with(llama7B, "precision", "nf4", "lora_rank", 8, "seq_len", 512, "micro_batch", 1, "bitsandbytes", "0.42")
	held := func(kv ...any) float64 {
		without := model(t, with(qlora, kv...)...).Estimate().Activations
		holding := model(t, with(qlora, append(kv, "holds_last_step", true)...)...).Estimate().Activations
		return float64(holding - without)
	}
	if got, want := held(), tokens*L*2*(2*h+h+f); got != want {
		t.Errorf("held: %.0f bytes, want %.0f", got, want)
	}
	if got := held("gradient_checkpointing", true); got != 0 {
		t.Errorf("held with gradient checkpointing: %.0f bytes, want none", got)
	}
	if got, want := held("gradient_checkpointing", true, "quantizer", "lightning"), tokens*2*h; got != want {
		t.Errorf("held with checkpointing, quantized head: %.0f, want the head's input %.0f", got, want)
	}
	if got := held("bitsandbytes", "0.44"); got != 0 {
		t.Errorf("held with bitsandbytes 0.44: %.0f bytes, want none", got)
	}
}

// TestLightningQuantizer: Lightning's BitsandbytesPrecision quantizes the output head
// with the blocks, and dequantizes through fp16: two 16-bit copies of the largest
// quantized layer, the head, at the peak; transformers' leaves the head 16-bit and
// dequantizes a block's widest matrix once.
func TestLightningQuantizer(t *testing.T) {
	const h, V, f = 4096.0, 32000.0, 11008.0
	base := with(llama7B, "precision", "nf4", "lora_rank", 8)
	hf, lightning := model(t, base...), model(t, with(base, "quantizer", "lightning")...)
	if got, want := hf.Estimate().Weights-lightning.Estimate().Weights, int64(V*h*(2-4.5/8)); abs(got-want) > 1 {
		t.Errorf("the quantized head saves %d bytes, want %d", got, want)
	}
	if got, want := hf.dequantized(), 2*h*f; got != want {
		t.Errorf("transformers dequantizes %.0f bytes, want down_proj's %.0f", got, want)
	}
	if got, want := lightning.dequantized(), 2*2*V*h; got != want {
		t.Errorf("Lightning dequantizes %.0f bytes, want the head twice in 16 bits, %.0f", got, want)
	}
	if got := model(t, llama7B...).dequantized(); got != 0 {
		t.Errorf("bf16 weights dequantize %.0f bytes", got)
	}
}

// TestFusedQKV: with q, k and v one matrix, their adapters share one dropped input;
// adapters on some but not all of them keep their output, scattered into the matrix's
// width (LitGPT's index_copy); on all three, nothing is scattered.
func TestFusedQKV(t *testing.T) {
	const h, tokens, L = 4096.0, 512.0, 32.0
	perToken := func(kv ...any) float64 {
		return float64(model(t, with(llama7B, append([]any{"seq_len", 512, "micro_batch", 1, "lora_rank", 8, "lora_dropout", 0.05}, kv...)...)...).Estimate().Activations) / tokens / L
	}
	separate, fused := perToken(), perToken("fused_qkv", true)
	if got, want := separate-fused, 2*3*h-3*h-2*(h+h); got != want {
		t.Errorf("q and v fused: %.0f bytes a token and layer fewer, want %.0f (one dropped copy, the q and v outputs kept)", got, want)
	}
	all := []any{"lora_targets", "q_proj,k_proj,v_proj"}
	if got, want := perToken(all...)-perToken(append(all, "fused_qkv", true)...), 3*3*h-3*h; got != want {
		t.Errorf("q, k and v fused: %.0f fewer, want %.0f", got, want)
	}
}

// TestAllocatorReserve: with expandable segments the allocator holds, past the tensors,
// the rest of a 20 MiB and a 2 MiB page a stream; ZeRO-3 and parameter offloading add
// their own stream. The total is the tensors, the reserve and the context.
func TestAllocatorReserve(t *testing.T) {
	for _, tt := range []struct {
		kv   []any
		want int64
	}{
		{nil, 22 << 20},
		{[]any{"zero_stage", 3, "gpus", 2}, 44 << 20},
		{[]any{"offload_params", true}, 44 << 20},
		{[]any{"zero_stage", 2, "gpus", 2}, 22 << 20},
	} {
		b := model(t, with(llama7B, tt.kv...)...).Estimate()
		if b.Reserve != tt.want || b.Total() != b.Tensors()+b.Reserve+b.Context {
			t.Errorf("%v: reserve %s, want %s; total %d of tensors %d", tt.kv, FormatSize(b.Reserve), FormatSize(tt.want), b.Total(), b.Tensors())
		}
	}
}
