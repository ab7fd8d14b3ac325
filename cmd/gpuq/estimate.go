package main

import (
	"bytes"
	"fmt"
	"io"
	"regexp"
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

The formulas: 16 bytes a parameter for a mixed-precision AdamW fine-tune (2 weights,
2 gradients, 12 for the fp32 master copy and moments); LoRA trains r(d+k) parameters
for each adapted matrix and keeps the base frozen at its precision's width; activations
follow Korthikanti et al. 2022, s*b*h*34 bytes a layer (plus 5*a*s^2*b with eager
attention; k and v at the key-value heads' width), 2*s*b*h a layer with gradient
checkpointing; logits cost 12 bytes each (b*s*V of them: the fp32 log-softmax output
and two fp32 gradients, as PyTorch's cross-entropy keeps them);
each process holds a CUDA context of about 500 MiB. A real run differs by the
allocator's fragmentation and the framework's workspaces: gpuq learns the measured peak
of each shape of job as the sweep runs.`,
		Example: `  gpuq estimate --model mistral-7b --seq-len 512 --micro-batch 4 --lora-rank 16
  gpuq estimate --model-config ~/models/Qwen3-4B/config.json --seq-len 1024 --micro-batch 2
  gpuq estimate --params 7B --precision bf16 --optimizer adamw
  gpuq estimate --params 7.24B --layers 32 --hidden 4096 --heads 32 --vocab 32000 \
      --seq-len 512 --micro-batch 4 --lora-rank 16
  gpuq estimate --params 7B --precision nf4 --lora-rank 16 --layers 32 --hidden 4096 --json
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
	f.String("precision", "bf16", "weights: fp32, bf16, fp16, int8 or nf4 (int8 and nf4 need --lora-rank)")
	f.String("optimizer", "adamw", "adamw, adamw-8bit or sgd (with momentum)")
	f.Int("layers", 0, "transformer layers")
	f.Int("hidden", 0, "hidden size")
	f.Int("heads", 0, "attention (query) heads")
	f.Int("kv-heads", 0, "key-value heads, for grouped-query attention (default --heads)")
	f.Int("head-dim", 0, "size of one attention head (default hidden / heads)")
	f.Bool("tied-embeddings", false, "the output head shares the input embedding (default: tied without --ffn, untied with it)")
	f.Int("ffn", 0, "MLP width of a gated (Llama-style) MLP; default a GPT MLP of 4x hidden")
	f.Int("vocab", 0, "vocabulary size")
	f.Int("seq-len", 0, "sequence length")
	f.Int("micro-batch", 0, "sequences per forward pass on one card")
	f.Int("lora-rank", 0, "LoRA rank; 0 = a full fine-tune")
	f.String("lora-targets", "", "matrices LoRA adapts: q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj or all-linear (default q_proj,v_proj)")
	f.Bool("gradient-checkpointing", false, "recompute activations in the backward pass")
	f.Int("logits-to-keep", 0, "positions the logits are computed for; 0 = all")
	f.String("attention", "sdpa", "sdpa (flash or memory-efficient kernels) or eager")
	f.Int("zero-stage", 0, "DeepSpeed ZeRO stage (full fine-tunes)")
	f.Int("gpus-per-job", 1, "cards the job is spread over, for ZeRO")
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
	sw, err := plans.LoadSweep(path, opts.settings.overrides())
	if err != nil {
		return err
	}
	for _, w := range sw.Warnings() {
		fmt.Fprintln(opts.io.Err, "gpuq: warning:", w)
	}
	cards, headroom, err := cardsFor(opts, sw.GPUs, opts.settings.gpusSource(sw), sw.Headroom)
	if err != nil {
		return err
	}
	var out []estimateJSON
	for i := range sw.Jobs {
		j := &sw.Jobs[i]
		e := estimateJSON{Job: j.ID, Name: j.Name, Source: "declared", TotalBytes: j.Memory}
		switch {
		case j.Probe:
			e.Source = "probe"
		case j.Model != nil:
			m, _ := plans.ModelOf(j.Model, j.Params) // checked when the sweep was read
			b := m.Estimate()
			e.Source, e.Parts, e.Missing, e.TotalBytes = "model", &b, b.Missing, b.Total()
		}
		e.Fits = fits(e.TotalBytes, cards, headroom)
		if len(e.Fits) == 0 && j.Model != nil {
			m, _ := plans.ModelOf(j.Model, j.Params)
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
		head += "WEIGHTS\tGRADIENTS\tOPTIMIZER\tACTIVATIONS\tLOGITS\tCONTEXT\t"
	}
	fmt.Fprintln(tw, head+"TOTAL\tFITS ON")
	for _, e := range out {
		parts := strings.Repeat("-\t", 6)
		if e.Parts != nil {
			b := e.Parts
			parts = ""
			for _, v := range []int64{b.Weights, b.Gradients, b.Optimizer, b.Activations, b.Logits, b.Context} {
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
			v, _ := t.Params.Get(k)
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
		{"activations", b.Activations}, {"logits", b.Logits}, {"CUDA context", b.Context}} {
		fmt.Fprintf(tw, "%s\t%s\n", p.name, plans.FormatSize(p.v))
	}
	total := plans.FormatSize(e.TotalBytes)
	if len(e.Missing) > 0 {
		total = "at least " + total
	}
	fmt.Fprintf(tw, "total\t%s\n", total)
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
