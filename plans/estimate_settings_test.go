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
// keep no input (18h + 6f with adapters on q and v), bitsandbytes' 4-bit ones do.
func TestLlamaBlockActivations(t *testing.T) {
	const h, f, tokens, L = 4096.0, 11008.0, 512.0, 32.0
	perToken := func(kv ...any) float64 {
		return float64(model(t, with(llama7B, append([]any{"seq_len", 512, "micro_batch", 1}, kv...)...)...).Estimate().Activations) / tokens / L
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
	// QLoRA: bitsandbytes keeps the inputs of o_proj, the MLP's and down_proj.
	if got, want := perToken("lora_rank", 8, "precision", "nf4"), 18*h+6*f+2*h+2*h+2*f; got != want {
		t.Errorf("QLoRA: %.0f, want %.0f", got, want)
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
