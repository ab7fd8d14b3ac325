package plans

// A training job's model state on each card: weights, gradients, optimizer state and
// copies of the model, as precision, sharding, offloading and splitting leave them.

// weightBytes is what one stored weight costs (REFERENCE §4, from EleutherAI's
// "Transformer Math 101"). NF4 stores 4 bits and an fp32 absmax constant for each block
// of 64 weights, 4.5 bits; double quantization stores the constants in 8 bits with an
// fp32 constant for each 256 of them, 4.127 bits (Dettmers et al. 2023, "QLoRA", §3).
func weightBytes(precision string) float64 {
	switch precision {
	case "fp32":
		return 4
	case "int8":
		return 1
	case "nf4":
		return (4 + 32.0/64) / 8
	case "nf4-dq":
		return (4 + 8.0/64 + 32.0/(64*256)) / 8
	}
	return 2
}

// state is the job's weights, gradients, optimizer state and copies of the model on
// each card, and what it offloads to host RAM.
func (m Model) state() parts {
	var e parts
	base := m.baseWeights()
	trained, tb := m.trainable()
	e.weights = base
	if m.LoRARank > 0 {
		e.weights += trained * tb
	}
	e.gradients = trained * tb
	e.optimizer = trained * m.optimizerBytes(tb)
	if m.EMA {
		e.copies += e.weights
	}
	e.copies += float64(m.FrozenCopies) * base
	m.shard(&e, trained, tb)
	m.offload(&e)
	return e
}

// baseWeights is the model's own weights in bytes. int8 and NF4 quantize linear
// layers only: transformers' BitsAndBytesConfig leaves the embeddings, the output head
// and the norms in 16 bits, and PEFT's prepare_model_for_kbit_training casts them to
// fp32; Lightning's BitsandbytesPrecision quantizes the head with the rest.
func (m Model) baseWeights() float64 {
	p := m.params()
	if !m.quantized() {
		return p * weightBytes(m.Precision)
	}
	kept := 0.0
	if m.Hidden > 0 && (m.Vocab > 0 || m.Layers > 0) {
		kept = m.embeddingParams() + m.normParams()
		if m.quantizedHead() {
			kept -= float64(m.Vocab) * float64(m.Hidden)
		}
		kept = min(p, kept)
	}
	return (p-kept)*weightBytes(m.Precision) + kept*m.keptBytes()
}

// quantizedHead says whether the output head is quantized: a head of its own (not the
// embedding's weights) under Lightning's quantizer.
func (m Model) quantizedHead() bool {
	return m.quantized() && m.Quantizer == "lightning" && !m.tied() && m.Vocab > 0
}

// largestQuantized is the most parameters one quantized layer holds: a block's widest
// matrix (q, k and v together where they are one), or the head where it is quantized.
func (m Model) largestQuantized() float64 {
	h := float64(m.Hidden)
	n := h * max(m.queryWidth(), float64(m.ffn()))
	if m.FusedQKV {
		n = max(n, h*(m.queryWidth()+2*m.kvWidth()))
	}
	if m.quantizedHead() {
		n = max(n, float64(m.Vocab)*h)
	}
	return n
}

// keptBytes is the width of what quantization leaves unquantized.
func (m Model) keptBytes() float64 {
	if m.PrepareKbit {
		return 4
	}
	return 2
}

// trainable is how many parameters train and the bytes each weight of them takes:
// LoRA's adapters (16-bit, or fp32 beside fp32 weights, under autocast and after
// prepare_model_for_kbit_training), the part trainable names, or the whole model.
func (m Model) trainable() (count, bytes float64) {
	switch {
	case m.LoRARank > 0:
		bytes = 2
		if m.Precision == "fp32" || m.PrepareKbit {
			bytes = 4
		}
		return m.loraParams(), bytes
	case m.Trainable.set():
		bytes = weightBytes(m.Precision)
		if m.quantized() {
			bytes = m.keptBytes()
		}
		return m.trainableCount(), bytes
	}
	return m.params(), weightBytes(m.Precision)
}

// trainableCount counts what trainable names: a share, a count, or modules of every
// block (attention: its four matrices; mlp: its two or three; norms) and the embedding
// and head.
func (m Model) trainableCount() float64 {
	t := m.Trainable
	p := m.params()
	switch {
	case t.Fraction > 0:
		return t.Fraction * p
	case t.Count > 0:
		return min(t.Count, p)
	}
	n, L := 0.0, float64(m.Layers)
	for _, mod := range t.Modules {
		switch mod {
		case "embeddings":
			n += float64(m.Vocab) * float64(m.Hidden)
		case "head":
			if !m.tied() {
				n += float64(m.Vocab) * float64(m.Hidden)
			}
		case "norms":
			n += m.normParams()
		case "attention":
			n += L * float64(m.Hidden) * m.attentionWidth()
		case "mlp":
			n += L * m.mlpParams()
		default:
			d, k := m.matrix(mod)
			n += L * d * k
		}
	}
	return min(n, p)
}

// optimizerBytes is the optimizer's state per trainable parameter whose weight takes
// tb bytes (REFERENCE §4, from "Transformer Math 101"): AdamW keeps two moments, SGD
// with momentum one, Adafactor factored second moments of a row and a column per
// matrix (next to nothing; Shazeer and Stern 2018); bitsandbytes' 8-bit AdamW keeps its
// moments in a byte each (Dettmers et al. 2022, "8-bit Optimizers"). The moments are
// fp32 unless optimizer_state says bf16: PyTorch's optimizers keep them in the
// weights' dtype, so a model loaded in bf16 and trained as it is (torchtune, LitGPT's
// bf16-true, the Hugging Face Trainer on a bf16 model) keeps 4 bytes, not 12.
// optimizer_state master (the default for 16-bit weights: DeepSpeed, Megatron, apex)
// adds an fp32 copy of the weights.
func (m Model) optimizerBytes(tb float64) float64 {
	moment := 4.0
	switch {
	case m.Optimizer == "adamw-8bit":
		moment = 1
	case m.OptimizerState == "bf16":
		moment = 2
	}
	moments := map[string]float64{"adamw": 2, "adamw-8bit": 2, "sgd": 1, "adafactor": 0}[m.Optimizer]
	master := 0.0
	if m.master(tb) {
		master = 4
	}
	return master + moments*moment
}

// master says whether the optimizer keeps an fp32 copy of weights of tb bytes: as
// optimizer_state says, by default for 16-bit ones.
func (m Model) master(tb float64) bool {
	return tb < 4 && (m.OptimizerState == "master" || m.OptimizerState == "")
}

// shard divides the state among the job's cards as DeepSpeed ZeRO does (Rajbhandari et
// al. 2020, "ZeRO", §5; REFERENCE §4): stage 1 the optimizer state, stage 2 the
// gradients too (2P + 18P/N for AdamW), stage 3 the weights and the copies too,
// leaving two of the largest layer gathered at a time (the one computing and the one
// prefetched). Stages 1 and 2 are one optimizer in DeepSpeed (stage_1_and_2.py), which
// keeps each card's partition of the gradients in fp32 beside the master copy at both:
// stage 1 is 4P + 16P/N, never less than stage 2. FSDP's FULL_SHARD is stage 3. Frozen
// weights (LoRA's base) shard at stage 3 like the rest.
func (m Model) shard(e *parts, trained, tb float64) {
	n := float64(max(m.GPUs, 1))
	if m.SplitLayers || m.ZeROStage == 0 {
		return
	}
	e.optimizer /= n
	if m.master(tb) { // fp32 gradient partitions beside the master copy
		e.optimizer += trained * 4 / n
	}
	if m.ZeROStage >= 2 {
		e.gradients /= n
	}
	if m.ZeROStage == 3 {
		e.weights = e.weights/n + m.gathered()
		e.copies /= n
	}
}

// gathered is what the card holds of weights that live elsewhere (sharded, or in host
// RAM): two of the largest layer at the weights' width (with int8 or NF4, at the width
// of the embedding, which is often the largest and stays unquantized).
func (m Model) gathered() float64 {
	width := weightBytes(m.Precision)
	if m.quantized() {
		width = m.keptBytes()
	}
	return 2 * m.largestLayer() * width
}

// offload moves the optimizer's state (ZeRO-Offload, FSDP's CPUOffload) and the
// weights with their gradients (offload_param, CPUOffload(offload_params=True)) to
// host RAM; the card keeps the layers being computed.
func (m Model) offload(e *parts) {
	if m.OffloadOptimizer {
		e.host += e.optimizer
		e.optimizer = 0
	}
	if m.OffloadParams {
		if m.EMA { // the EMA copy lives with the weights
			ema := e.weights
			e.host += ema
			e.copies -= min(e.copies, ema)
		}
		e.host += e.weights + e.gradients
		e.weights, e.gradients = min(e.weights, m.gathered()), 0
	}
}

// largestLayer is the most parameters one module holds: the embedding or a block.
func (m Model) largestLayer() float64 {
	return max(float64(m.Vocab)*float64(m.Hidden), m.layerParams())
}

// split is the heaviest card of a model split layer by layer over GPUs cards
// (accelerate's device_map): its share of the blocks and their activations, with the
// output head and the logits, which the last card holds.
func (m Model) split(e parts) parts {
	k := float64(max(m.GPUs, 1))
	head := 0.0
	if p := m.params(); p > 0 {
		head = min(1, float64(m.Vocab)*float64(m.Hidden)/p)
	}
	share := (1-head)/k + head
	e.weights *= share
	e.gradients *= share
	e.optimizer *= share
	e.copies *= share // host RAM is the job's, whichever card
	e.activations /= k
	return e
}
