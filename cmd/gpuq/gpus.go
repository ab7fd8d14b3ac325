package main

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuq/gpuq/cmd/gpuq/top"
	"github.com/gpuq/gpuq/launcher"
	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/gpu"
)

type gpusOptions struct {
	io       ioStreams
	settings *settings
	json     bool
}

func newGPUsCmd(io ioStreams, st *settings) *cobra.Command {
	opts := &gpusOptions{io: io, settings: st}
	cmd := &cobra.Command{
		Use:   "gpus",
		Short: "Show the cards gpuq would use: memory, utilization, plan slots, and whose job each process is",
		Long: `Show one row per card: index (as nvidia-smi numbers it), name, memory in use, its
utilization and temperature (NVML's), the slots the plan gives it, whether a daemon
drains it, and its UUID; then one row per process on the cards: its card, pid, memory,
and the gpuq job it belongs to (id and name; "-" for another program's). Reads NVML,
or the simulated machine when there is no NVIDIA driver or --gpus names one. While a
daemon runs, shows the daemon's cards with its plan, drains and headroom, unless --gpus
or --gpu-plan is given. A card NVML cannot read is OUT OF SERVICE, with why; a process
marked (hidden) is one NVML lists but this PID namespace does not have (a container),
whose memory gpuq cannot attribute.`,
		Example: `  gpuq gpus
  gpuq gpus --gpus sim:7x23.52GiB --gpu-plan 2,2,2,2,1,1,1
  gpuq gpus --json`,
		Args: noArgs,
		RunE: func(*cobra.Command, []string) error { return runGPUs(opts) },
	}
	cmd.Flags().BoolVar(&opts.json, "json", false, "print JSON")
	return cmd
}

type gpusCardJSON struct {
	Index      int           `json:"index"`
	Name       string        `json:"name"`
	UUID       string        `json:"uuid"`
	BusID      string        `json:"bus_id"`
	TotalBytes int64         `json:"total_bytes"`
	UsedBytes  int64         `json:"used_bytes"`
	Slots      *int          `json:"slots"`
	Processes  []processJSON `json:"processes"`
	// Utilization (percent) and Temperature (°C) are NVML's; null where it gives none.
	Utilization *int `json:"utilization"`
	Temperature *int `json:"temperature"`
	// Drained: a daemon starts no new job on it (gpuq drain).
	Drained bool `json:"drained,omitempty"`
	// Fault says why the card is out of service; absent when it is in service.
	Fault string `json:"fault,omitempty"`
}

type processJSON struct {
	PID       int    `json:"pid"`
	UsedBytes *int64 `json:"used_bytes"` // null: NVML cannot tell
	// Hidden: this PID namespace has no such process (a container), so whose it is
	// cannot be told.
	Hidden bool `json:"hidden,omitempty"`
	// Job and JobName are the gpuq job it belongs to; absent for a process of none.
	Job     string `json:"job,omitempty"`
	JobName string `json:"job_name,omitempty"`
}

func runGPUs(opts *gpusOptions) error {
	if shown, err := daemonGPUs(opts); shown {
		return err
	}
	ov := opts.settings.overrides()
	spec, err := plans.ParseGPUs(ov.GPUs.Value)
	if err != nil {
		return badInput("%s: %v", ov.GPUs.Source, err)
	}
	var plan plans.GPUPlan
	if ov.Plan.Value != "" {
		if plan, err = plans.ParsePlan(ov.Plan.Value); err != nil {
			return badInput("%s: %v", ov.Plan.Source, err)
		}
	}
	inv, err := opts.settings.openInventory(spec, ov.GPUs.Source, opts.io)
	if err != nil {
		return err
	}
	defer inv.Close()
	cards, err := inv.Read()
	if err != nil {
		return err
	}
	m := machineView{cards: cards, simulated: inv.Simulated(), jobs: localJobs}
	if plan != nil {
		if m.slots, err = plan.For(len(cards)); err != nil {
			return badInput("%s: %v", ov.Plan.Source, err)
		}
	}
	return writeGPUs(opts.io, m, opts.json)
}

// machineView is what gpuq gpus shows: cards as read, the plan's slots on each (nil:
// no plan), which are drained (nil: none), whether they are simulated, and whose each
// process is.
type machineView struct {
	cards     []gpu.Card
	slots     []int
	drained   []bool
	simulated string
	// jobs says which gpuq job a process of a card belongs to, and its name; "" for
	// none.
	jobs func(c gpu.Card, p gpu.Process) (job, name string)
	// workers are the daemon's workers (gpuq worker), linked or away, with their cards.
	workers []api.WorkerInfo
	now     time.Time
}

// localJobs tells a process's job by what it inherited (GPUQ_JOB_ID, GPUQ_JOB_NAME):
// of any gpuq of this user on this machine, daemon or gpuq run.
func localJobs(c gpu.Card, p gpu.Process) (string, string) {
	if c.Worker != "" || p.Hidden {
		return "", ""
	}
	job, name, _ := launcher.JobOf(p.PID)
	return job, name
}

// writeGPUs prints the cards, one row each, then their processes, one row each with
// the job it is of, and says once under them when NVML lists processes gpuq cannot
// see.
func writeGPUs(io ioStreams, m machineView, asJSON bool) error {
	if hidden := hiddenProcesses(m.cards); hidden != "" {
		fmt.Fprintf(io.Err, "gpuq: NVML lists processes this PID namespace does not have (%s; gpuq runs in a container?): "+
			"gpuq cannot attribute GPU memory on this machine, and packs by estimates alone\n", hidden)
	}
	if asJSON {
		return writeJSON(io.Out, m.json())
	}
	if len(m.cards) == 0 { // a daemon whose cards are its workers': their table, or none at all with none linked yet
		return m.writeWorkers(io)
	}
	// On a terminal, the UUID goes first, then names are shortened; why a card is out
	// of service follows the table. Narrower still (60 columns), where even names cut
	// to their least leave too little room: the bar (USED / TOTAL says it in numbers),
	// then the temperature, the slots and the utilization go, leaving what a card is,
	// its memory and whether it takes jobs.
	tw := newFitTable(io.Out, io.width(), 8, 1, 7).squeezing(2, 5, 6, 4)
	fmt.Fprintln(tw, "GPU\tNAME\tMEMORY\tUSED / TOTAL GiB\tUTIL\tTEMP\tSLOTS\tSTATE\tUUID")
	for i, c := range m.cards {
		s := "-"
		if m.slots != nil {
			s = slotsText(m.slots[i])
		}
		if c.Fault != "" {
			fmt.Fprintf(tw, "%d\t%s\t-\t- / %s\t-\t-\t%s\tOUT OF SERVICE\t%s\n", c.Index, c.Name, gib(c.Total), s, c.UUID)
			continue
		}
		st := "-"
		if m.drained != nil && m.drained[i] {
			st = "drained"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s / %s\t%s\t%s\t%s\t%s\t%s\n", c.Index, c.Name, bar(c.Used, c.Total, 10),
			gib(c.Used), gib(c.Total), top.Percent(c.Utilization), top.Celsius(c.Temperature), s, st, c.UUID)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, c := range m.cards {
		if c.Fault != "" {
			fmt.Fprintln(io.Out, "  "+wrap(fmt.Sprintf("GPU %d is out of service: %s", c.Index, c.Fault), io.width()-4, "    "))
		}
	}
	if err := m.writeWorkers(io); err != nil {
		return err
	}
	return m.writeProcesses(io)
}

// cardSize is a card's memory as gpuq gpus lists a worker's cards and drain's
// completion offers them ("24.00 GiB"); "" for one known by index alone (its worker not
// heard from since the daemon started, whose attempts run there).
func cardSize(g api.GPUInfo) string {
	if g.TotalBytes == 0 {
		return ""
	}
	return gib(g.TotalBytes) + " GiB"
}

// writeWorkers prints the daemon's workers: linked or away (and since when it was last
// heard), draining, the attempts held running there, and their cards, which drain and
// undrain name as WORKER:INDEX.
func (m machineView) writeWorkers(io ioStreams) error {
	if len(m.workers) == 0 {
		return nil
	}
	if len(m.cards) > 0 {
		fmt.Fprintln(io.Out)
	}
	tw := newTable(io.Out)
	fmt.Fprintln(tw, "WORKER	STATE	HEARD	RUNNING	CARDS")
	for _, w := range m.workers {
		state := "linked"
		switch {
		case !w.Connected:
			state = "away"
		case w.Draining:
			state = "draining"
		}
		var cards []string
		for _, g := range w.GPUs {
			card := fmt.Sprintf("%s:%d", w.Name, g.Index)
			if size := cardSize(g); size != "" {
				card += " " + size
			}
			if g.Drained {
				card += " drained"
			}
			cards = append(cards, card)
		}
		ago := max(m.now.Sub(w.Heard), 0).Round(time.Second).String() + " ago"
		heard := ago
		if w.Unheard {
			heard = "not since the daemon started " + ago
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", w.Name, state, heard, w.Running, cmp.Or(strings.Join(cards, ", "), "-"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, w := range m.workers {
		if w.OtherBuild {
			fmt.Fprintln(io.Out, "  "+wrap(fmt.Sprintf("worker %s runs gpuq %s, another build than the daemon's (its log names both): "+
				"it speaks the same worker link, but what each does of a job may differ; run one gpuq on both", w.Name, w.Version), io.width()-4, "    "))
		}
	}
	return nil
}

// writeProcesses prints every process on the cards: its card, pid, memory, and the gpuq
// job it is of (id and name), "-" for another's.
func (m machineView) writeProcesses(io ioStreams) error {
	tw := newFitTable(io.Out, io.width(), 4, 3).cutNames(4).cutStarts(3)
	listed := false
	for _, c := range m.cards {
		for _, p := range c.Processes {
			if !listed {
				fmt.Fprintln(io.Out)
				fmt.Fprintln(tw, "GPU\tPID\tMEMORY\tJOB\tNAME")
				listed = true
			}
			job, name := m.jobs(c, p)
			pid := strconv.Itoa(p.PID)
			if p.Hidden {
				pid += " (hidden)"
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", c.Index, pid, processMemory(p), cmp.Or(job, "-"), cmp.Or(name, "-"))
		}
	}
	if !listed {
		return nil
	}
	return tw.Flush()
}

// json is the machine as gpuq gpus --json prints it.
func (m machineView) json() any {
	out := struct {
		Simulated string           `json:"simulated,omitempty"`
		GPUs      []gpusCardJSON   `json:"gpus"`
		Workers   []api.WorkerInfo `json:"workers,omitempty"`
	}{Simulated: m.simulated, GPUs: []gpusCardJSON{}, Workers: m.workers}
	reading := func(v int) *int {
		if v == gpu.NoReading {
			return nil
		}
		return &v
	}
	for i, c := range m.cards {
		cj := gpusCardJSON{Index: c.Index, Name: c.Name, UUID: c.UUID, BusID: c.BusID, TotalBytes: c.Total, UsedBytes: c.Used,
			Processes: []processJSON{}, Utilization: reading(c.Utilization), Temperature: reading(c.Temperature), Fault: c.Fault}
		if m.slots != nil {
			cj.Slots = &m.slots[i]
		}
		if m.drained != nil {
			cj.Drained = m.drained[i]
		}
		for _, p := range c.Processes {
			pj := processJSON{PID: p.PID, Hidden: p.Hidden}
			pj.Job, pj.JobName = m.jobs(c, p)
			if p.Used != gpu.Unknown {
				pj.UsedBytes = &p.Used
			}
			cj.Processes = append(cj.Processes, pj)
		}
		out.GPUs = append(out.GPUs, cj)
	}
	return out
}

// hiddenProcesses names the processes NVML lists that this PID namespace does not
// have, "pid N on GPU i, ..."; "" when there is none.
func hiddenProcesses(cards []gpu.Card) string {
	var parts []string
	for _, c := range cards {
		for _, p := range c.Processes {
			if p.Hidden {
				parts = append(parts, fmt.Sprintf("pid %d on GPU %d", p.PID, c.Index))
			}
		}
	}
	return strings.Join(parts, ", ")
}

// processMemory is what a process holds on its card, "?" where NVML cannot tell.
func processMemory(p gpu.Process) string {
	if p.Used == gpu.Unknown {
		return "?"
	}
	return strings.ReplaceAll(plans.FormatSize(p.Used), " ", "")
}
