package main

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/gpu"
	"github.com/gpuq/gpuq/scheduler/pack"
)

type planOptions struct {
	io       ioStreams
	settings *settings
	sweep    string
	json     bool
}

func newPlanCmd(io ioStreams, st *settings) *cobra.Command {
	opts := &planOptions{io: io, settings: st}
	cmd := &cobra.Command{
		Use:   "plan SWEEP",
		Short: "Validate a sweep and show where its jobs would start, and why the others wait",
		Long: `Validate the sweep file, expand it into jobs, and show the first placement: for each
card the jobs it would start now and the memory left; then every job that would wait,
with the reason. Starts nothing.`,
		Example: `  gpuq plan examples/sweeps/gla.yaml --gpus sim:7x23.52GiB
  gpuq plan sweep.yaml --gpu-plan 1 --json`,
		Args: exactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			opts.sweep = args[0]
			return runPlan(opts)
		},
	}
	cmd.Flags().BoolVar(&opts.json, "json", false, "print one JSON object")
	return cmd
}

func runPlan(opts *planOptions) error {
	p, err := prepare(opts.sweep, opts.settings, opts.io)
	if err != nil {
		return err
	}
	defer p.inv.Close()
	if out := outsideAfter(p.sweep); len(out) > 0 {
		fmt.Fprintln(opts.io.Err, "gpuq: warning:", outsideAfterText(p.sweep, out))
	}
	if note := daemonElsewhere(opts.settings, p); note != "" {
		fmt.Fprintln(opts.io.Err, "gpuq: note:", note)
	}
	eng, _, err := p.engine(opts.settings, nil, 0, nil)
	if err != nil {
		return err
	}
	d, states, err := eng.Preview()
	if err != nil {
		return err
	}
	if opts.json {
		return writeJSON(opts.io.Out, planJSON(p, states, d))
	}
	return printPlan(opts.io, p, states, d)
}

// daemonElsewhere says where a daemon runs on the state directory on another machine
// than the one the plan is for (a simulated one of other cards, other cards of this
// one, or its workers' alone): gpuq plan opens the machine --gpus, GPUQ_GPUS, the
// config file or the sweep's gpus name (see precedence.go), while gpuq submit sends the
// sweep to the daemon that runs. "" where none answers here now (one starting is not
// waited for), or it runs on the plan's machine.
func daemonElsewhere(st *settings, p *prepared) string {
	dir, err := st.stateDir()
	if st.remote() || err != nil {
		return ""
	}
	c, err := api.Dial(dir)
	if err != nil {
		return ""
	}
	m, err := c.Machine()
	if err != nil {
		return ""
	}
	cards, err := p.inv.Inventory.Read() // the machine's, not only the sweep's
	if err != nil {
		return ""
	}
	theirs, ours := machineText(m.Simulated, m.Cards), machineText(p.inv.Simulated(), cards)
	if theirs == ours {
		return ""
	}
	hint := ""
	if len(m.Cards) > 0 {
		hint = fmt.Sprintf(" (--gpus %s plans on the daemon's)", strings.TrimPrefix(theirs, "GPUs "))
	}
	return fmt.Sprintf("the daemon on %s runs on %s; this plan is for %s, as --gpus, GPUQ_GPUS, the config file or the sweep names it%s",
		tildeHome(dir), theirs, ours, hint)
}

// machineText names a machine: its simulated spec, or its cards by index ("GPUs 0,1,3").
func machineText(simulated string, cards []gpu.Card) string {
	switch {
	case simulated != "":
		return simulated
	case len(cards) == 0:
		return "no cards of its own (its workers')"
	}
	idx := make([]string, len(cards))
	for i, c := range cards {
		idx[i] = strconv.Itoa(c.Index)
	}
	return "GPUs " + strings.Join(idx, ",")
}

// starts maps each card index to the jobs the decision starts on it.
func starts(d pack.Decision) map[int][]string {
	out := map[int][]string{}
	for _, pl := range d.Placements {
		for _, c := range pl.Cards {
			out[c] = append(out[c], pl.Job)
		}
	}
	return out
}

// sharingNote says when the sweep's jobs share a card.
func sharingNote(sw *plans.Sweep) string {
	if sw.UtilTarget == plans.UtilTargetOff {
		return "util_target off: memory and slots alone decide how many jobs share a card"
	}
	target := sw.UtilTarget
	if target == 0 {
		target = pack.DefaultTarget
	}
	note := fmt.Sprintf("jobs share a card while their measured utilizations add up to at most %.0f%% of it (util_target), "+
		"an idle card first; ", 100*target)
	if sw.Plan != nil {
		return note + "until a shape is measured (a minute into its first job), the gpu_plan decides"
	}
	return note + "a shape not measured yet runs alone until it is (a minute into its first job)"
}

func printPlan(io ioStreams, p *prepared, states []pack.CardState, d pack.Decision) error {
	sw := p.sweep
	machine := plans.Count(len(p.cards), "card")
	if sim := p.inv.Simulated(); sim != "" {
		machine += ", SIMULATED " + sim
	}
	slots := p.slots()
	planText := plans.GPUPlan(slots).String()
	// The machine's plan (GPUQ_GPU_PLAN, the config file's gpu_plan) is said where it
	// is what limits a card, below the sweep's default.
	machineLimits := false
	for i, c := range p.cards {
		machineLimits = machineLimits || p.machine[i] < p.limit[c.Index]
	}
	switch {
	case sw.Plan == nil && machineLimits:
		planText += " (the machine's: GPUQ_GPU_PLAN or the config file's gpu_plan)"
	case sw.Plan == nil:
		planText += " (default: " + defaultPlanNote(sw) + ")"
	}
	width := io.width()
	head := []string{fmt.Sprintf("sweep %s: %s on %s", sw.Name, plans.Count(len(sw.Jobs), "job"), machine),
		fmt.Sprintf("plan %s, headroom %s", planText, sw.Headroom), "order: " + orderText(sw.Order),
		"oom ladder: " + laddersText(sw)}
	if note := memoryNote(sw); note != "" {
		head = append(head, "memory: "+note)
	}
	head = append(head, "sharing: "+sharingNote(sw))
	for _, l := range head {
		fmt.Fprintln(io.Out, wrap(l, width-2, "  "))
	}
	fmt.Fprintln(io.Out)

	byID := jobsByID(sw)
	on := starts(d)
	tw := newFitTable(io.Out, width, 1, 4)
	fmt.Fprintln(tw, "GPU\tNAME\tFREE GiB\tSLOTS\tSTARTS\tLEFT GiB")
	for i, c := range states {
		var left int64 = c.Free()
		leftText := ""
		for _, id := range on[c.Index] {
			left -= byID[id].Memory
			if unknownMemory(byID[id]) {
				leftText = "?" // what the job will take is not known
			}
		}
		jobs := strings.Join(on[c.Index], " ")
		if jobs == "" {
			jobs = "-"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", c.Index, p.cards[i].Name, gib(max(c.Free(), 0)), slotsText(slots[i]), jobs,
			cmp.Or(leftText, gib(max(left, 0))))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(io.Out, "\n%d of %d jobs start now", len(d.Placements), len(sw.Jobs))
	blocked := blockedJobs(sw)
	if d.Waiting.Len()+len(blocked) == 0 {
		fmt.Fprintln(io.Out, ".")
		return nil
	}
	fmt.Fprintf(io.Out, "; %d wait:\n", d.Waiting.Len()+len(blocked))
	tw = newFitTable(io.Out, width, 1, 0).cutStarts(0)
	fmt.Fprintln(tw, "JOB\tNAME\tESTIMATE\tWAITS BECAUSE")
	for w := range d.Waiting.All() {
		j := byID[w.Job]
		why := string(w.Reason) + ": " + w.Detail
		if r := d.Reservation; r != nil && w.Job == r.Job {
			why += fmt.Sprintf("; %s reserved for it", plans.CardsOn(r.Worker, r.Cards))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", j.ID, j.Name, estimateText(j), why)
	}
	for _, j := range blocked {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", j.ID, j.Name, estimateText(j), "after: "+afterWhy(j))
	}
	return tw.Flush()
}

// orderText says in what order the jobs start.
func orderText(o plans.Order) string {
	if o == plans.FIFO {
		return "fifo (within a priority, in submission order)"
	}
	return string(o) + " (within a priority, largest memory × learned duration first; by memory until durations are learned)"
}

// laddersText says what an OOM does to the sweep's jobs: their ladder when they share
// one, with the keys it found.
func laddersText(sw *plans.Sweep) string {
	text := ladderOf(sw.Jobs[0])
	for _, j := range sw.Jobs[1:] {
		if ladderOf(j) != text {
			return "differs by job (plan --json lists each)"
		}
	}
	return text
}

func ladderOf(j plans.Job) string {
	steps := rungTexts(j)
	if len(steps) == 0 {
		return "none: an OOM fails the job"
	}
	return strings.Join(steps, "; then ")
}

func rungTexts(j plans.Job) []string {
	out := []string{}
	for _, r := range j.Ladder {
		s := r.String()
		if r.Repeat {
			s += " (repeats)"
		}
		out = append(out, s)
	}
	return out
}

func defaultPlanNote(sw *plans.Sweep) string {
	if sw.SlotPlan()[0] == plans.NoSlotLimit {
		return "every job has an estimate, so memory alone decides"
	}
	return "one job per card, since some jobs have no memory estimate"
}

// estimateText is a job's estimate in plan's listing: "-" where it has none.
func estimateText(j plans.Job) string {
	s := "-"
	switch {
	case j.Memory > 0:
		s = plans.FormatSize(j.Memory)
	case j.Probe:
		s = "probe"
	}
	if j.GPUsPerJob > 1 {
		s += fmt.Sprintf(" ×%d cards", j.GPUsPerJob)
	}
	return s
}

// unknownMemory reports whether nothing says what a job's memory will be: no estimate
// and no probe to measure it.
func unknownMemory(j plans.Job) bool { return j.Memory == 0 && !j.Probe }

// memoryNote says how many of a sweep's jobs have no memory estimate, and what that
// means for the plan; "" when every job has one.
func memoryNote(sw *plans.Sweep) string {
	n := 0
	for _, j := range sw.Jobs {
		if unknownMemory(j) {
			n++
		}
	}
	if n == 0 {
		return ""
	}
	of := fmt.Sprintf("%d of %d jobs", n, len(sw.Jobs))
	if n == len(sw.Jobs) {
		of = "any job"
	}
	return fmt.Sprintf("not known for %s (no memory: for them): slots alone place them, and LEFT GiB "+
		"cannot count them (?); write memory: 10GiB, {model: ...} or probe to pack them by memory", of)
}

func jobsByID(sw *plans.Sweep) map[string]plans.Job {
	m := make(map[string]plans.Job, len(sw.Jobs))
	for _, j := range sw.Jobs {
		m[j.ID] = j
	}
	return m
}

type planOutput struct {
	Sweep string `json:"sweep"`
	Order string `json:"order"`
	// UtilTarget is how much of a card's compute the jobs sharing it may ask for
	// together; null: none (memory and slots alone decide).
	UtilTarget *float64        `json:"util_target"`
	Simulated  string          `json:"simulated,omitempty"`
	GPUs       []planGPU       `json:"gpus"`
	Placements []planPlacement `json:"placements"`
	Waiting    []planWait      `json:"waiting"`
	Jobs       []planJob       `json:"jobs"`
}

type planGPU struct {
	Index      int      `json:"index"`
	Name       string   `json:"name"`
	TotalBytes int64    `json:"total_bytes"`
	FreeBytes  int64    `json:"free_bytes"`
	LeftBytes  int64    `json:"left_bytes"`
	Slots      *int     `json:"slots"` // null: memory alone decides
	Jobs       []string `json:"jobs"`
}

type planPlacement struct {
	Job  string `json:"job"`
	GPU  int    `json:"gpu"`
	GPUs []int  `json:"gpus"`
}

type planWait struct {
	Job    string `json:"job"`
	Reason string `json:"reason"`
	Detail string `json:"detail"`
	// ReservedGPUs are the cards reserved for it, the first job that waits.
	ReservedGPUs []int `json:"reserved_gpus,omitempty"`
}

type planJob struct {
	ID            string     `json:"id"`
	Name          string     `json:"name"`
	Params        *plans.Map `json:"params"`
	EstimateBytes int64      `json:"estimate_bytes"`
	GPUsPerJob    int        `json:"gpus_per_job"`
	Priority      int        `json:"priority"`
	// Ladder is what each OOM changes, in order.
	Ladder []string `json:"ladder"`
}

func planJSON(p *prepared, states []pack.CardState, d pack.Decision) planOutput {
	out := planOutput{Sweep: p.sweep.Name, Order: string(p.sweep.Order), Simulated: p.inv.Simulated(),
		Placements: []planPlacement{}, Waiting: []planWait{}, Jobs: []planJob{}}
	if t := p.sweep.UtilTarget; t != plans.UtilTargetOff {
		t = cmp.Or(t, pack.DefaultTarget)
		out.UtilTarget = &t
	}
	byID := jobsByID(p.sweep)
	on := starts(d)
	slots := p.slots()
	for i, c := range states {
		g := planGPU{Index: c.Index, Name: p.cards[i].Name, TotalBytes: c.Total, FreeBytes: max(c.Free(), 0), Jobs: []string{}}
		if slots[i] != plans.NoSlotLimit {
			g.Slots = &slots[i]
		}
		left := c.Free()
		for _, id := range on[c.Index] {
			g.Jobs = append(g.Jobs, id)
			left -= byID[id].Memory
		}
		g.LeftBytes = max(left, 0)
		out.GPUs = append(out.GPUs, g)
	}
	for _, pl := range d.Placements {
		out.Placements = append(out.Placements, planPlacement{Job: pl.Job, GPU: pl.Cards[0], GPUs: pl.Cards})
	}
	for w := range d.Waiting.All() {
		pw := planWait{Job: w.Job, Reason: string(w.Reason), Detail: w.Detail}
		if r := d.Reservation; r != nil && w.Job == r.Job {
			pw.ReservedGPUs = r.Cards
		}
		out.Waiting = append(out.Waiting, pw)
	}
	for _, j := range blockedJobs(p.sweep) {
		out.Waiting = append(out.Waiting, planWait{Job: j.ID, Reason: "after", Detail: afterWhy(j)})
	}
	for _, j := range p.sweep.Jobs {
		out.Jobs = append(out.Jobs, planJob{ID: j.ID, Name: j.Name, Params: j.Params, EstimateBytes: j.Memory, GPUsPerJob: j.GPUsPerJob,
			Priority: j.Priority, Ladder: rungTexts(j)})
	}
	return out
}
