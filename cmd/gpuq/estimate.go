package main

import (
	"bytes"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/gpu"
)

type estimateOptions struct {
	io       ioStreams
	settings *settings
	json     bool
	flags    *pflag.FlagSet
}

func newEstimateCmd(io ioStreams, st *settings) *cobra.Command {
	opts := &estimateOptions{io: io, settings: st}
	cmd := &cobra.Command{
		Use:   "estimate [flags | SWEEP]",
		Short: "Estimate a training job's GPU memory from its model, part by part",
		Long: `Estimate the memory a training job peaks at on each card: weights, gradients, optimizer
state, activations, logits and the CUDA context, and say which cards it fits on.

Describe the model with flags, or give a SWEEP to estimate each of its jobs (memory:
{model: ...} in the sweep takes the same keys as the flags, with _ for -, name: for
--model and config: for --model-config, and its values may name parameters, e.g.
micro_batch: "{batch_size}"). --model-config reads a Hugging Face config.json (layers,
hidden, intermediate, heads, key-value heads, head size, vocabulary, tied embeddings);
--model names a built-in architecture: ` + strings.Join(plans.ArchitectureNames(), ", ") + `.
Flags given beside them win.

A job that fits no card is shown what would make it fit the largest: its next rungs of
the OOM ladder (with a SWEEP), and the usual switches (gradient checkpointing, half the
micro-batch, 8-bit AdamW, LoRA, QLoRA, logits of the last position), each alone.

How it counts (the README's "Memory estimates" has the sources): weights at their
precision (NF4 quantizes the blocks' matmuls; embeddings and head stay 16-bit, fp32
with --prepare-kbit; --quantizer lightning quantizes the head too), gradients of what
trains (all, LoRA's adapters, or --trainable), the optimizer's moments in fp32 or bf16
(--optimizer-state) with an fp32 master copy of 16-bit weights by default; activations
counted tensor by tensor as PyTorch keeps them for the backward pass (a Llama block
26h+8f bytes a token in a full fine-tune, a GPT block Korthikanti's 34h; frozen matmuls
keep no input, bitsandbytes' 4-bit ones did before 0.44 (--bitsandbytes), and a loop
that holds the last step's outputs keeps those into the next step
(--holds-last-step); the largest quantized layer dequantized; under --autocast fp32
residuals and 16-bit weight copies); logits by --loss (upcast 14 bytes each,
fp32-logits 16, chunked 4, fused 0); the allocator's reserve with expandable segments,
as gpuq runs trainers (a 20 MiB and a 2 MiB page a stream); a CUDA context of 500 MiB
(--cuda-context). ZeRO, --split-layers, --offload-optimizer, --offload-params, --ema and
--frozen-copies change what each card holds; what is offloaded is shown as host RAM.
Blocks gpuq does not count itself are described by --layer-params and
--layer-activations. A real run differs by free blocks the allocator cannot reuse and
the framework's workspaces: gpuq learns the measured peak of each shape of job as the
sweep runs.`,
		Example: `  gpuq estimate --model mistral-7b --seq-len 512 --micro-batch 4 --lora-rank 16
  gpuq estimate --model-config ~/models/Qwen3-4B/config.json --seq-len 1024 --micro-batch 2
  gpuq estimate --params 7B --precision bf16 --optimizer adamw
  gpuq estimate --params 7.24B --layers 32 --hidden 4096 --heads 32 --vocab 32000 \
      --seq-len 512 --micro-batch 4 --lora-rank 16
  gpuq estimate --params 7B --precision nf4 --lora-rank 16 --layers 32 --hidden 4096 --json
  gpuq estimate --model llama-3.1-8b --seq-len 2048 --micro-batch 2 --optimizer-state bf16 --loss chunked
  gpuq estimate --model qwen3-4b --seq-len 1024 --micro-batch 1 --lora-rank 16 --frozen-copies 1
  gpuq estimate --model qwen2.5-7b --params 14B --seq-len 4096 --micro-batch 1 --trainable 100M \
      --offload-params --offload-optimizer --gradient-checkpointing
  gpuq estimate examples/sweeps/torch-24g.yaml`,
		Args: maxArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.flags = cmd.Flags()
			if len(args) == 1 {
				if described(cmd.Flags()) {
					return badInput("give a SWEEP or describe a model with flags, not both")
				}
				return runEstimateSweep(opts, args[0])
			}
			if !described(cmd.Flags()) {
				return badInput("describe the model, e.g. gpuq estimate --params 7B --lora-rank 16 --layers 32 --hidden 4096, or give a sweep file")
			}
			return runEstimateFlags(opts)
		},
	}
	f := cmd.Flags()
	f.String("model", "", "a built-in architecture, or its Hugging Face id (Qwen/Qwen3-4B): "+strings.Join(plans.ArchitectureNames(), ", "))
	f.String("model-config", "", "a Hugging Face config.json to read the architecture from")
	f.String("params", "", "parameter count: 7B, 350M, 1.3e9 (or give --layers, --hidden and --vocab)")
	f.String("precision", "bf16", "weights: fp32, bf16, fp16, int8, nf4 or nf4-dq (NF4 with double quantization); int8 and nf4 need --lora-rank or --trainable")
	f.Bool("autocast", false, "fp32 weights with 16-bit matmuls (torch.autocast, AMP: the Trainer's --bf16/--fp16 on a model loaded in fp32); needs --precision fp32")
	f.String("optimizer", "adamw", "adamw, adamw-8bit, sgd (with momentum) or adafactor")
	f.String("optimizer-state", "", "master (an fp32 copy of 16-bit weights and fp32 moments: DeepSpeed, Megatron), fp32 (fp32 moments) or bf16 (moments in bf16, no copy: torchtune, LitGPT bf16-true, the Trainer on a bf16 model); default master for 16-bit weights")
	f.Int("layers", 0, "transformer layers")
	f.Int("hidden", 0, "hidden size")
	f.Int("heads", 0, "attention (query) heads")
	f.Int("kv-heads", 0, "key-value heads, for grouped-query attention (default --heads)")
	f.Int("head-dim", 0, "size of one attention head (default hidden / heads)")
	f.Bool("tied-embeddings", false, "the output head shares the input embedding (default: tied without --ffn, untied with it)")
	f.Int("ffn", 0, "MLP width of a gated (Llama-style) MLP; default a GPT MLP of 4x hidden")
	f.Int("vocab", 0, "vocabulary size")
	f.String("layer-params", "", "parameters of one block, for blocks that are neither Llama's nor GPT's (e.g. 51M)")
	f.String("layer-activations", "", "bytes one token keeps in one block for the backward pass, for such blocks (e.g. 100KiB)")
	f.Int("seq-len", 0, "sequence length")
	f.Int("micro-batch", 0, "sequences per forward pass on one card")
	f.Int("lora-rank", 0, "LoRA rank; 0 = no adapters")
	f.String("lora-targets", "", "matrices LoRA adapts: q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj or all-linear (default q_proj,v_proj)")
	f.String("lora-dropout", "", "the adapters' dropout probability (each adapter with dropout keeps its own copy of its input)")
	f.Bool("prepare-kbit", false, "PEFT's prepare_model_for_kbit_training: what int8/NF4 leave unquantized (embeddings, head, norms) and the adapters in fp32")
	f.String("trainable", "", "without LoRA, the part that trains, the rest frozen: a share (0.02 or 2%), a count (100M) or modules (embeddings, head, norms, attention, mlp, q_proj, ...)")
	f.Bool("gradient-checkpointing", false, "recompute activations in the backward pass")
	f.Int("logits-to-keep", 0, "positions the logits are computed for; 0 = all")
	f.String("loss", "upcast", "how the loss holds the logits: upcast (the model's 16-bit logits, upcast in the loss: 14 bytes a logit), fp32-logits (the model returns fp32 logits, as transformers before 4.45: 16), chunked (torchtune, LitGPT: 4) or fused (Liger, Cut Cross-Entropy: 0)")
	f.String("quantizer", "", "what quantized int8/NF4 weights: transformers (its BitsAndBytesConfig, the default: the blocks' matmuls) or lightning (Lightning Fabric's BitsandbytesPrecision, LitGPT's --quantize: every linear layer, the head too, from fp16)")
	f.String("bitsandbytes", "", "the bitsandbytes version, e.g. 0.42: before 0.44 its 4-bit matmul keeps its input for the backward pass (default a current one)")
	f.Bool("holds-last-step", false, "the training loop keeps the last step's outputs until the next forward pass returns (LitGPT; a loop with out = model(x)): with bitsandbytes before 0.44, that step's matmul inputs stay too")
	f.Bool("fused-qkv", false, "q, k and v are one matrix (LitGPT, GPT-NeoX) whose adapters share one dropped input")
	f.String("attention", "sdpa", "sdpa (flash or memory-efficient kernels) or eager")
	f.Int("zero-stage", 0, "DeepSpeed ZeRO stage (FSDP FULL_SHARD: 3, SHARD_GRAD_OP: 2)")
	f.Int("gpus-per-job", 1, "cards the job is spread over, for ZeRO and --split-layers")
	f.Bool("split-layers", false, "the layers are split over --gpus-per-job cards (accelerate's device_map, pipeline): the heaviest card's memory")
	f.Bool("offload-optimizer", false, "the optimizer's state lives in host RAM (ZeRO-Offload, FSDP CPUOffload)")
	f.Bool("offload-params", false, "the weights and gradients live in host RAM, brought to the card a layer at a time")
	f.Bool("ema", false, "an exponential moving average copy of the weights on the card")
	f.Int("frozen-copies", 0, "frozen instances of the model beside it (a reference or reward model of the same size)")
	f.String("cuda-context", "", "the CUDA context of the process (default 500MiB; ~1.3GiB without lazy loading, CUDA 11.6 and older)")
	f.BoolVar(&opts.json, "json", false, `print {"total_bytes": N, "parts": {...}} (with a SWEEP, {"jobs": [...]})`)
	cmd.RegisterFlagCompletionFunc("model", func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return plans.ArchitectureNames(), cobra.ShellCompDirectiveNoFileComp
	})
	return cmd
}

// modelFlag maps a description key to its flag.
func modelFlag(key string) string {
	switch key {
	case "gpus":
		return "gpus-per-job"
	case "name":
		return "model"
	case "config":
		return "model-config"
	}
	return strings.ReplaceAll(key, "_", "-")
}

func described(f *pflag.FlagSet) bool {
	for _, k := range plans.ModelKeys() {
		if f.Changed(modelFlag(k)) {
			return true
		}
	}
	return false
}

type estimateJSON struct {
	Job        string           `json:"job,omitempty"`
	Name       string           `json:"name,omitempty"`
	Source     string           `json:"source"` // model, declared or probe
	TotalBytes int64            `json:"total_bytes"`
	Parts      *plans.Breakdown `json:"parts,omitempty"`
	Missing    []string         `json:"missing,omitempty"`
	Fits       []fitJSON        `json:"fits"`
	// Suggestions, when it fits no card, are what would make it fit the largest.
	Suggestions []suggestionJSON `json:"suggestions,omitempty"`
}

type suggestionJSON struct {
	// Tier is the OOM ladder's tier this is (its rungs are cumulative); 0 for a switch
	// applied alone.
	Tier       int    `json:"tier,omitempty"`
	Change     string `json:"change"`
	TotalBytes int64  `json:"total_bytes"`
	Fits       bool   `json:"fits"`
}

type fitJSON struct {
	GPU       int   `json:"gpu"`
	RoomBytes int64 `json:"room_bytes"`
	// PerCard is how many such jobs the card holds by memory.
	PerCard int64 `json:"per_card"`
}

func runEstimateFlags(opts *estimateOptions) error {
	if opts.flags.Changed("model") && opts.flags.Changed("model-config") {
		return badInput("--model and --model-config: give one, a built-in architecture or a config.json")
	}
	desc := plans.NewMap()
	for _, k := range plans.ModelKeys() {
		fl := opts.flags.Lookup(modelFlag(k))
		if fl.Changed {
			desc.Set(k, fl.Value.String())
		}
	}
	desc, err := plans.ExpandModel(desc, ".", plans.ReadDocument)
	if err != nil {
		return badInput("%s", flagNames(err.Error()))
	}
	m, err := plans.ModelOf(desc, nil)
	if err != nil {
		return badInput("%s", flagNames(err.Error()))
	}
	cards, headroom, err := estimateCards(opts)
	if err != nil {
		return err
	}
	b := m.Estimate()
	est := estimateJSON{Source: "model", TotalBytes: b.Total(), Parts: &b, Missing: b.Missing, Fits: fits(b.Total(), cards, headroom)}
	if len(est.Fits) == 0 {
		est.Suggestions = suggest(nil, m, largestRoom(cards, headroom))
	}
	if opts.json {
		return writeJSON(opts.io.Out, est)
	}
	printEstimate(opts.io, est, cards)
	printSuggestions(opts.io.Out, "", est.Suggestions, cards, headroom)
	return nil
}

// suggest lists what would make a job fit a card of room bytes: the rungs given (its
// ladder's next tiers), then the usual switches applied to its model.
func suggest(rungs []suggestionJSON, m plans.Model, room int64) []suggestionJSON {
	out := rungs
	for _, s := range m.Switches() {
		out = append(out, suggestionJSON{Change: s.Change, TotalBytes: s.Model.Estimate().Total()})
	}
	for i := range out {
		out[i].Fits = out[i].TotalBytes > 0 && out[i].TotalBytes <= room
	}
	return out
}

// largestRoom is the most a card offers a job when idle, after headroom.
func largestRoom(cards []gpu.Card, headroom plans.Headroom) int64 {
	var most int64
	for _, c := range cards {
		most = max(most, headroom.Room(c.Total))
	}
	return most
}

// printSuggestions says what would make a job (or, with a SWEEP, the jobs named) fit
// the largest card.
func printSuggestions(w io.Writer, jobs string, sugg []suggestionJSON, cards []gpu.Card, headroom plans.Headroom) {
	if len(sugg) == 0 {
		return
	}
	room := largestRoom(cards, headroom)
	what := "It fits no card"
	if jobs != "" {
		what = jobs + " fit no card"
	}
	fmt.Fprintf(w, "\n%s; the largest has %s after headroom.\n", what, plans.FormatSize(room))
	tw := newTable(w)
	heading := ""
	for _, s := range sugg {
		verdict := "still too large"
		if s.Fits {
			verdict = "fits"
		}
		change := s.Change
		h := "The usual switches, each alone:"
		if s.Tier > 0 {
			h, change = "The OOM ladder, one rung more per OOM:", fmt.Sprintf("tier %d: %s", s.Tier, s.Change)
			if s.Tier > 1 {
				change = fmt.Sprintf("tier %d: + %s", s.Tier, s.Change)
			}
		}
		if h != heading {
			heading = h
			fmt.Fprintln(tw, h) // no tab: each list aligns on its own
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", change, plans.FormatSize(s.TotalBytes), verdict)
	}
	tw.Flush()
}

// flagNames rewrites the description keys in an error as the flags that set them: the
// key a problem is about ("layers: ..." at the start of each) as "--layers: ...", an
// example ("e.g. layers: 32") as it is typed, "--layers 32".
func flagNames(msg string) string {
	for _, k := range plans.ModelKeys() {
		flag, key := "--"+modelFlag(k), regexp.QuoteMeta(k)
		msg = regexp.MustCompile(`(^|; )`+key+`:`).ReplaceAllString(msg, "${1}"+flag+":")
		msg = regexp.MustCompile(`(^|[\s(,])`+key+`: `).ReplaceAllString(msg, "${1}"+flag+" ")
		if strings.Contains(k, "_") {
			msg = regexp.MustCompile(`(\s)`+key+`\b`).ReplaceAllString(msg, "${1}"+flag)
		}
	}
	return msg
}

func runEstimateSweep(opts *estimateOptions, path string) error {
	// The sweep and the machine as gpuq run and gpuq plan read them (see prepare).
	sw, err := plans.LoadSweep(path, opts.settings.runOverrides())
	if err != nil {
		return err
	}
	for _, w := range sw.Warnings() {
		fmt.Fprintln(opts.io.Err, "gpuq: warning:", w)
	}
	spec, source, err := machineSpec(sw, opts.settings.machineOverrides())
	if err != nil {
		return err
	}
	cards, headroom, err := cardsFor(opts, spec, source, sw.Headroom)
	if err != nil {
		return err
	}
	if sw.GPUs.Indices != nil {
		cards = slices.DeleteFunc(cards, func(c gpu.Card) bool { return !slices.Contains(sw.GPUs.Indices, c.Index) })
	}
	var out []estimateJSON
	for i := range sw.Jobs {
		j := &sw.Jobs[i]
		e := estimateJSON{Job: j.ID, Name: j.Name, Source: "declared", TotalBytes: j.Memory}
		switch {
		case j.Probe:
			e.Source = "probe"
		case j.Model != nil:
			m, _ := j.ModelAt(j.Params) // checked when the sweep was read
			b := m.Estimate()
			e.Source, e.Parts, e.Missing, e.TotalBytes = "model", &b, b.Missing, b.Total()
		}
		e.Fits = fits(e.TotalBytes, cards, headroom)
		if len(e.Fits) == 0 && j.Model != nil {
			m, _ := j.ModelAt(j.Params)
			e.Suggestions = suggest(rungSteps(j), m, largestRoom(cards, headroom))
		}
		out = append(out, e)
	}
	if opts.json {
		return writeJSON(opts.io.Out, map[string]any{"jobs": out})
	}
	defer printJobSuggestions(opts.io.Out, out, cards, headroom)
	var full bytes.Buffer
	if err := printEstimates(&full, out, len(cards), 0); err != nil {
		return err
	}
	if width := opts.io.width(); width > 0 && maxWidth(full.String()) > width {
		// The parts do not fit this terminal: each job's total, and where to find them.
		if err := printEstimates(opts.io.Out, out, len(cards), width); err != nil {
			return err
		}
		fmt.Fprintln(opts.io.Out, "(each estimate's parts: a wider terminal, or --json)")
		return nil
	}
	_, err = full.WriteTo(opts.io.Out)
	return err
}

// printEstimates prints a sweep's estimates as a table: with their parts, or, to fit
// a terminal width cells wide, without.
func printEstimates(w io.Writer, out []estimateJSON, cards, width int) error {
	withParts := width == 0
	tw := newFitTable(w, width, 1, 0).cutStarts(0)
	head := "JOB\tNAME\tSOURCE\t"
	if withParts {
		head += "WEIGHTS\tGRADIENTS\tOPTIMIZER\tACTIVATIONS\tLOGITS\tRESERVE\tCONTEXT\t"
	}
	fmt.Fprintln(tw, head+"TOTAL\tFITS ON")
	for _, e := range out {
		parts := strings.Repeat("-\t", 7)
		if e.Parts != nil {
			b := e.Parts
			parts = ""
			for _, v := range []int64{b.Weights, b.Gradients, b.Optimizer, b.Activations, b.Logits, b.Reserve, b.Context} {
				parts += plans.FormatSize(v) + "\t"
			}
		}
		if !withParts {
			parts = ""
		}
		total := plans.FormatSize(e.TotalBytes)
		if e.Source == "probe" {
			total = "measured"
		} else if e.TotalBytes == 0 {
			total = "unknown"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s%s\t%s\n", e.Job, e.Name, e.Source, parts, total, fitsText(e, cards))
	}
	return tw.Flush()
}

func rungSteps(j *plans.Job) []suggestionJSON {
	var out []suggestionJSON
	tiers := plans.Tiers(j.Params, j.Ladder)
	for _, t := range tiers[1:min(len(tiers), 4)] {
		var changed []string
		for _, k := range t.Changed {
			v, _ := t.Params.Param(k)
			changed = append(changed, k+"="+plans.FormatValue(v))
		}
		out = append(out, suggestionJSON{Tier: t.N, Change: strings.Join(changed, ", "), TotalBytes: j.MemoryAt(t.Params)})
	}
	return out
}

// printJobSuggestions says, once for each set of jobs alike, what would make the jobs
// that fit no card fit the largest.
func printJobSuggestions(w io.Writer, jobs []estimateJSON, cards []gpu.Card, headroom plans.Headroom) {
	var order []string
	same := map[string][]string{}
	by := map[string][]suggestionJSON{}
	for _, e := range jobs {
		if len(e.Suggestions) == 0 {
			continue
		}
		key := fmt.Sprint(e.Suggestions)
		if _, ok := same[key]; !ok {
			order = append(order, key)
			by[key] = e.Suggestions
		}
		same[key] = append(same[key], e.Job)
	}
	for _, key := range order {
		ids := same[key]
		name := "job " + ids[0]
		if len(ids) > 1 {
			name = fmt.Sprintf("jobs %s and %d more like it", ids[0], len(ids)-1)
		}
		printSuggestions(w, name, by[key], cards, headroom)
	}
}

func estimateCards(opts *estimateOptions) ([]gpu.Card, plans.Headroom, error) {
	ov := opts.settings.overrides()
	spec, err := plans.ParseGPUs(ov.GPUs.Value)
	if err != nil {
		return nil, plans.Headroom{}, badInput("%s: %v", ov.GPUs.Source, err)
	}
	return cardsFor(opts, spec, ov.GPUs.Source, plans.DefaultHeadroom)
}

// cardsFor reads the cards of spec, written in source, and the headroom the machine's
// settings give (or def).
func cardsFor(opts *estimateOptions, spec plans.GPUSpec, source string, def plans.Headroom) ([]gpu.Card, plans.Headroom, error) {
	headroom := def
	if ov := opts.settings.overrides().Headroom; ov.Value != "" {
		h, err := plans.ParseHeadroom(ov.Value)
		if err != nil {
			return nil, headroom, badInput("%s: %v", ov.Source, err)
		}
		headroom = h
	}
	inv, err := opts.settings.openInventory(spec, source, opts.io)
	if err != nil {
		return nil, headroom, err
	}
	defer inv.Close()
	cards, err := inv.Read()
	return cards, headroom, err
}

// fits lists the cards that hold a job of total bytes when idle, after headroom.
func fits(total int64, cards []gpu.Card, headroom plans.Headroom) []fitJSON {
	out := []fitJSON{}
	for _, c := range cards {
		room := headroom.Room(c.Total)
		if total > 0 && total <= room {
			out = append(out, fitJSON{GPU: c.Index, RoomBytes: room, PerCard: room / total})
		}
	}
	return out
}

func fitsText(e estimateJSON, cards int) string {
	if e.TotalBytes == 0 {
		return "-"
	}
	if len(e.Fits) == 0 {
		return "none"
	}
	var gpus []string
	for _, f := range e.Fits {
		gpus = append(gpus, fmt.Sprint(f.GPU))
	}
	if len(e.Missing) > 0 { // a lower bound: it may not fit where this does
		if len(e.Fits) == cards {
			return fmt.Sprintf("at best all %d, %d at once each", cards, e.Fits[0].PerCard)
		}
		return "at best GPU " + strings.Join(gpus, ",")
	}
	if len(e.Fits) == cards {
		return fmt.Sprintf("all %d, %d at once each", cards, e.Fits[0].PerCard)
	}
	return "GPU " + strings.Join(gpus, ",")
}

func printEstimate(io ioStreams, e estimateJSON, cards []gpu.Card) {
	tw := newTable(io.Out)
	b := e.Parts
	for _, p := range []struct {
		name string
		v    int64
	}{{"weights", b.Weights}, {"gradients", b.Gradients}, {"optimizer state", b.Optimizer},
		{"activations", b.Activations}, {"logits", b.Logits}, {"EMA and frozen copies", b.Copies},
		{"allocator reserve", b.Reserve}, {"CUDA context", b.Context}} {
		size := plans.FormatSize(p.v)
		switch {
		case p.v == 0 && p.name == "EMA and frozen copies":
			continue
		case p.v == 0 && len(e.Missing) > 0 && (p.name == "activations" || p.name == "logits"):
			size = "-" // not counted: unknown, not nothing
		}
		fmt.Fprintf(tw, "%s\t%s\n", p.name, size)
	}
	total := plans.FormatSize(e.TotalBytes)
	if len(e.Missing) > 0 {
		total = "at least " + total
	}
	fmt.Fprintf(tw, "total\t%s\n", total)
	if b.Host > 0 {
		fmt.Fprintf(tw, "host RAM (offloaded)\t%s\n", plans.FormatSize(b.Host))
	}
	tw.Flush()
	if len(e.Missing) > 0 {
		var flags []string
		for _, k := range e.Missing {
			flags = append(flags, "--"+modelFlag(k))
		}
		fmt.Fprintf(io.Out, "\na lower bound: activations or logits need %s\n", strings.Join(flags, ", "))
	}
	fmt.Fprintln(io.Out)
	fitting := map[int]fitJSON{}
	for _, f := range e.Fits {
		fitting[f.GPU] = f
	}
	for _, c := range cards {
		f, ok := fitting[c.Index]
		switch {
		case ok && len(e.Missing) > 0: // the rest may not fit
			fmt.Fprintf(io.Out, "GPU %d (%s, %s): the known part fits, at most %d at once\n", c.Index, c.Name,
				plans.FormatSize(c.Total), f.PerCard)
		case ok:
			fmt.Fprintf(io.Out, "GPU %d (%s, %s): fits, %d at once by memory\n", c.Index, c.Name, plans.FormatSize(c.Total), f.PerCard)
		default:
			fmt.Fprintf(io.Out, "GPU %d (%s, %s): does not fit\n", c.Index, c.Name, plans.FormatSize(c.Total))
		}
	}
}
