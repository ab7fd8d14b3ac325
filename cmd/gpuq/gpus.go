package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpuq/gpuq/plans"
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
		Short: "Show the cards gpuq would use: memory, processes and plan slots",
		Long: `Show one row per card: index (as nvidia-smi numbers it), name, memory in use, the
processes on it, the slots the plan gives it, and its UUID. Reads NVML, or the simulated
machine when there is no NVIDIA driver or --gpus names one. While a daemon runs, shows
the daemon's cards with its plan and headroom, unless --gpus or --gpu-plan is given.
A card NVML cannot read is OUT OF SERVICE, with why; a process marked (hidden) is one NVML lists but this PID
namespace does not have (a container), whose memory gpuq cannot attribute.`,
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
	// Fault says why the card is out of service; absent when it is in service.
	Fault string `json:"fault,omitempty"`
}

type processJSON struct {
	PID       int    `json:"pid"`
	UsedBytes *int64 `json:"used_bytes"` // null: NVML cannot tell
	// Hidden: this PID namespace has no such process (a container), so whose it is
	// cannot be told.
	Hidden bool `json:"hidden,omitempty"`
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
	var slots []int
	if plan != nil {
		if slots, err = plan.For(len(cards)); err != nil {
			return badInput("%s: %v", ov.Plan.Source, err)
		}
	}
	return writeGPUs(opts.io, cards, slots, inv.Simulated(), opts.json)
}

// writeGPUs prints the cards, one row each, and says once under them when NVML lists
// processes gpuq cannot see.
func writeGPUs(io ioStreams, cards []gpu.Card, slots []int, simulated string, asJSON bool) error {
	if hidden := hiddenProcesses(cards); hidden != "" {
		fmt.Fprintf(io.Err, "gpuq: NVML lists processes this PID namespace does not have (%s; gpuq runs in a container?): "+
			"gpuq cannot attribute GPU memory on this machine, and packs by estimates alone\n", hidden)
	}
	if asJSON {
		out := struct {
			Simulated string         `json:"simulated,omitempty"`
			GPUs      []gpusCardJSON `json:"gpus"`
		}{Simulated: simulated, GPUs: []gpusCardJSON{}}
		for i, c := range cards {
			cj := gpusCardJSON{Index: c.Index, Name: c.Name, UUID: c.UUID, BusID: c.BusID,
				TotalBytes: c.Total, UsedBytes: c.Used, Processes: []processJSON{}, Fault: c.Fault}
			if slots != nil {
				cj.Slots = &slots[i]
			}
			for _, p := range c.Processes {
				pj := processJSON{PID: p.PID, Hidden: p.Hidden}
				if p.Used != gpu.Unknown {
					pj.UsedBytes = &p.Used
				}
				cj.Processes = append(cj.Processes, pj)
			}
			out.GPUs = append(out.GPUs, cj)
		}
		return writeJSON(io.Out, out)
	}
	// On a terminal, the UUID goes first, then processes and names are shortened.
	tw := newFitTable(io.Out, io.width(), 6, 5, 1)
	fmt.Fprintln(tw, "GPU\tNAME\tMEMORY\tUSED / TOTAL GiB\tSLOTS\tPROCESSES\tUUID")
	for i, c := range cards {
		s := "-"
		if slots != nil {
			s = slotsText(slots[i])
		}
		if c.Fault != "" {
			fmt.Fprintf(tw, "%d\t%s\tOUT OF SERVICE\t- / %s\t%s\t%s\t%s\n", c.Index, c.Name, gib(c.Total), s, c.Fault, c.UUID)
			continue
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s / %s\t%s\t%s\t%s\n", c.Index, c.Name, bar(c.Used, c.Total, 10),
			gib(c.Used), gib(c.Total), s, processesText(c.Processes), c.UUID)
	}
	return tw.Flush()
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

func processesText(ps []gpu.Process) string {
	if len(ps) == 0 {
		return "-"
	}
	parts := make([]string, len(ps))
	for i, p := range ps {
		used := "?"
		if p.Used != gpu.Unknown {
			used = strings.ReplaceAll(plans.FormatSize(p.Used), " ", "")
		}
		hidden := ""
		if p.Hidden {
			hidden = "(hidden)"
		}
		parts[i] = fmt.Sprintf("%d%s:%s", p.PID, hidden, used)
	}
	return strings.Join(parts, " ")
}
