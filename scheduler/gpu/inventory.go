// Package gpu is gpuq's view of the machine's cards, through nvml.Interface: the real
// NVML where a driver is loaded, a simulated machine otherwise, with the same code above.
package gpu

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuq/gpuq/plans"
)

// Card is one card at one moment.
type Card struct {
	Index     int // as nvidia-smi numbers it (PCI bus order)
	UUID      string
	Name      string
	BusID     string
	Total     int64
	Used      int64 // as NVML reports it, driver reservations included
	Processes []Process
}

// Process is one compute process on a card.
type Process struct {
	PID  int
	Used int64 // bytes; Unknown where NVML cannot tell (MIG, some containers)
}

// Unknown is a process's memory use when NVML cannot tell.
const Unknown = -1

// Options configure Open.
type Options struct {
	// Ledger is the directory simulated trainers write to (see ledger.go).
	Ledger string
	// Visible is gpuq's own CUDA_VISIBLE_DEVICES, if set: only those cards are used.
	Visible *string
	// Notice receives, once, the line that says the GPUs are simulated.
	Notice io.Writer
	// Library returns the NVML to try first; nil means the real one.
	Library func() nvml.Interface
}

// Inventory reads the cards gpuq may use.
type Inventory struct {
	lib       nvml.Interface
	simulated string // the simulated machine's spec, "" for real NVML
	cards     []int  // NVML indices gpuq may use, in order
}

// ErrUnknownCard is returned when a sweep names a card the machine does not have.
var ErrUnknownCard = errors.New("unknown card")

// Open returns the inventory for spec: a simulated machine when spec says so or when no
// NVIDIA driver can be loaded, the real NVML otherwise. Only the cards of spec (every
// card, if it names none) that gpuq's own CUDA_VISIBLE_DEVICES allows are used.
func Open(spec plans.GPUSpec, opt Options) (*Inventory, error) {
	inv := &Inventory{}
	if !spec.IsSim() {
		newLib := opt.Library
		if newLib == nil {
			newLib = func() nvml.Interface { return nvml.New() }
		}
		lib := newLib()
		switch ret := lib.Init(); ret {
		case nvml.SUCCESS:
			inv.lib = lib
		case nvml.ERROR_LIBRARY_NOT_FOUND, nvml.ERROR_DRIVER_NOT_LOADED:
			fallback, _ := plans.ParseGPUs(plans.DefaultSim)
			inv.simulated = plans.DefaultSim
			inv.lib = newSim(fallback, opt.Ledger)
			if opt.Notice != nil {
				fmt.Fprintf(opt.Notice, "gpuq: no NVIDIA driver found (%v); using SIMULATED GPUs %s. Choose another machine with --gpus sim:COUNTxSIZE.\n", ret, plans.DefaultSim)
			}
		default:
			return nil, fmt.Errorf("NVML: %v", ret)
		}
	} else {
		inv.simulated = spec.String()
		inv.lib = newSim(spec, opt.Ledger)
		if ret := inv.lib.Init(); ret != nvml.SUCCESS {
			return nil, fmt.Errorf("simulated NVML: %v", ret)
		}
		if opt.Notice != nil {
			fmt.Fprintf(opt.Notice, "gpuq: using SIMULATED GPUs %s (no real card is touched)\n", inv.simulated)
		}
	}
	if err := inv.choose(spec, opt.Visible); err != nil {
		inv.Close()
		return nil, err
	}
	return inv, nil
}

func (inv *Inventory) choose(spec plans.GPUSpec, visible *string) error {
	n, ret := inv.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return fmt.Errorf("NVML: counting cards: %v", ret)
	}
	allowed, err := inv.visibleCards(n, visible)
	if err != nil {
		return err
	}
	if spec.IsSim() || spec.Indices == nil {
		inv.cards = allowed
		return nil
	}
	for _, i := range spec.Indices {
		if i >= n {
			return fmt.Errorf("%w: gpus lists card %d, but this machine has %d cards (0-%d)%s", ErrUnknownCard, i, n, n-1, inv.simNote())
		}
		if !slices.Contains(allowed, i) {
			return fmt.Errorf("%w: gpus lists card %d, but gpuq runs with CUDA_VISIBLE_DEVICES=%s, which hides it", ErrUnknownCard, i, *visible)
		}
		inv.cards = append(inv.cards, i)
	}
	return nil
}

func (inv *Inventory) simNote() string {
	if inv.simulated != "" {
		return fmt.Sprintf(" (simulated: %s; pass --gpus sim:7x24GiB for a larger one)", inv.simulated)
	}
	return ""
}

// visibleCards applies gpuq's own CUDA_VISIBLE_DEVICES: entries are indices or UUID
// prefixes (GPU-…); as in CUDA, an entry that matches nothing hides every later one.
func (inv *Inventory) visibleCards(n int, visible *string) ([]int, error) {
	var all []int
	for i := range n {
		all = append(all, i)
	}
	if visible == nil {
		return all, nil
	}
	var out []int
	for _, e := range strings.Split(*visible, ",") {
		e = strings.TrimSpace(e)
		idx := -1
		if i, err := strconv.Atoi(e); err == nil && i >= 0 && i < n {
			idx = i
		} else if strings.HasPrefix(e, "GPU-") || strings.HasPrefix(e, "MIG-") {
			for i := range n {
				if uuid, _ := inv.uuid(i); strings.HasPrefix(uuid, e) {
					idx = i
				}
			}
		}
		if idx < 0 {
			break
		}
		if !slices.Contains(out, idx) {
			out = append(out, idx)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("gpuq runs with CUDA_VISIBLE_DEVICES=%q, which hides every card: unset it or list cards gpuq may use", *visible)
	}
	return out, nil
}

func (inv *Inventory) uuid(i int) (string, nvml.Return) {
	d, ret := inv.lib.DeviceGetHandleByIndex(i)
	if ret != nvml.SUCCESS {
		return "", ret
	}
	return d.GetUUID()
}

// Simulated returns the simulated machine's spec, or "" when the cards are real.
func (inv *Inventory) Simulated() string { return inv.simulated }

// Count is the number of cards gpuq may use.
func (inv *Inventory) Count() int { return len(inv.cards) }

// Snapshot reads every card gpuq may use, in order.
func (inv *Inventory) Snapshot() ([]Card, error) {
	out := make([]Card, 0, len(inv.cards))
	for _, i := range inv.cards {
		c, err := inv.read(i)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

func (inv *Inventory) read(i int) (Card, error) {
	fail := func(what string, ret nvml.Return) (Card, error) {
		return Card{}, fmt.Errorf("NVML: card %d: %s: %v", i, what, ret)
	}
	d, ret := inv.lib.DeviceGetHandleByIndex(i)
	if ret != nvml.SUCCESS {
		return fail("handle", ret)
	}
	c := Card{Index: i}
	if c.UUID, ret = d.GetUUID(); ret != nvml.SUCCESS {
		return fail("uuid", ret)
	}
	if c.Name, ret = d.GetName(); ret != nvml.SUCCESS {
		return fail("name", ret)
	}
	if pci, ret := d.GetPciInfo(); ret == nvml.SUCCESS {
		c.BusID = busID(pci.BusId[:])
	}
	mem, ret := d.GetMemoryInfo()
	if ret != nvml.SUCCESS {
		return fail("memory", ret)
	}
	c.Total, c.Used = int64(mem.Total), int64(mem.Used)
	procs, ret := d.GetComputeRunningProcesses()
	if ret != nvml.SUCCESS && ret != nvml.ERROR_NOT_SUPPORTED {
		return fail("processes", ret)
	}
	for _, p := range procs {
		used := int64(Unknown)
		// NVML says "not available" with all bits set (REFERENCE.md §3).
		if p.UsedGpuMemory != math.MaxUint64 && p.UsedGpuMemory <= uint64(c.Total) {
			used = int64(p.UsedGpuMemory)
		}
		c.Processes = append(c.Processes, Process{PID: int(p.Pid), Used: used})
	}
	return c, nil
}

func busID(b []int8) string {
	var s strings.Builder
	for _, c := range b {
		if c == 0 {
			break
		}
		s.WriteByte(byte(c))
	}
	return s.String()
}

// Close releases NVML.
func (inv *Inventory) Close() {
	if inv.lib != nil {
		inv.lib.Shutdown()
	}
}
