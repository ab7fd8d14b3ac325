// Package nvidia reads the machine's NVIDIA cards through nvml.Interface: the real NVML
// where a driver is loaded, a simulated machine otherwise (simulated.go), with the same
// code above. The simulated NVML lives here, beside the real one's reader, because
// Open alone chooses it and nothing else reads it: it is an nvml.Interface, not a card.
package nvidia

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/gpu"
)

// Options configure Open.
type Options struct {
	// Ledger is the directory simulated trainers write to (see ledger.go).
	Ledger string
	// Visible is gpuq's own CUDA_VISIBLE_DEVICES, if set: only those cards are used.
	Visible *string
	// Source names where the card list was written (--gpus, a file's gpus), for the
	// error of a card the machine lacks; "" says gpus.
	Source string
	// CardBytes is, for that error on the simulated machine taken where no driver is,
	// the memory of each card of the larger one it suggests: the least a sweep's plan
	// needs; 0 for that machine's own cards.
	CardBytes int64
	// Notice receives, once, the line that says the GPUs are simulated.
	Notice io.Writer
	// RealOnly takes no simulated machine where no driver is: that is an error, which
	// says to give --gpus sim:... A gpuq worker's: its jobs are the daemon's, which
	// would take a node without cards for one with four and fail every job sent there.
	RealOnly bool
	// library returns the NVML to try first; nil means the real one.
	library func() nvml.Interface
	// Root is where /proc and /dev are found; "" means "/". Tests point it at a fake
	// tree.
	Root string
}

// Inventory reads the cards gpuq may use.
type Inventory struct {
	lib       nvml.Interface
	simulated string // the simulated machine's spec, "" for real NVML
	// fallback is the simulated machine taken where no driver is, whose cards a
	// --gpus of indices names.
	fallback plans.GPUSpec
	cards    []int // NVML indices gpuq may use, in order
	root     string
	// last is each card's last good reading, for its identity while it is out of
	// service.
	last map[int]gpu.Card
	// utils is each card's last reading of its processes' utilization and its own,
	// read again once utilEvery has passed (0: at every Read); clock tells when.
	utils     map[int]utilReading
	utilEvery time.Duration
	clock     func() time.Time
	// listed is the processes each card listed at its last reading, and since when.
	listed map[int]listing
}

// ErrUnknownCard is returned when a sweep names a card the machine does not have.
var ErrUnknownCard = errors.New("unknown card")

// unknownCard is an ErrUnknownCard in words of its own, which begin with where the card
// was named, as every error about a file or a flag does ("gla.yaml: gpus lists card
// 4, ..."), not with "unknown card:".
type unknownCard string

func (e unknownCard) Error() string        { return string(e) }
func (e unknownCard) Is(target error) bool { return target == ErrUnknownCard }

// Open returns the inventory for spec: a simulated machine when spec says so or when no
// NVIDIA driver can be loaded, the real NVML otherwise. Only the cards of spec (every
// card, if it names none) that gpuq's own CUDA_VISIBLE_DEVICES allows are used.
func Open(spec plans.GPUSpec, opt Options) (*Inventory, error) {
	inv := &Inventory{root: opt.Root, last: map[int]gpu.Card{}, utils: map[int]utilReading{}, listed: map[int]listing{}, clock: time.Now}
	if inv.root == "" {
		inv.root = "/"
	}
	if !spec.IsSimulated() {
		newLib := opt.library
		if newLib == nil {
			newLib = func() nvml.Interface { return nvml.New() }
		}
		lib := newLib()
		switch ret := lib.Init(); ret {
		case nvml.SUCCESS:
			inv.lib = lib
			inv.utilEvery = utilEvery
		case nvml.ERROR_LIBRARY_NOT_FOUND, nvml.ERROR_DRIVER_NOT_LOADED:
			if driver := inv.driver(); driver != "" {
				return nil, fmt.Errorf("this machine has an NVIDIA driver (%s), but NVML cannot be loaded (%v): "+
					"install the driver's libnvidia-ml.so.1 where the dynamic loader finds it (in a container, start it "+
					"with the NVIDIA Container Toolkit, e.g. docker run --gpus all, with NVIDIA_DRIVER_CAPABILITIES "+
					"including utility), or pass --gpus sim:4x24GiB to simulate cards", driver, ret)
			}
			if opt.RealOnly {
				return nil, fmt.Errorf("no NVIDIA driver found on this machine (%v): a worker runs its daemon's jobs on real cards; "+
					"run it on a node with GPUs (inside Slurm, one the allocation gave GPUs, with the driver's libnvidia-ml.so.1), "+
					"or pass --gpus sim:4x24GiB to simulate cards", ret)
			}
			inv.fallback, _ = plans.ParseGPUs(plans.DefaultSimulated)
			inv.simulated = plans.DefaultSimulated
			inv.lib = newSimulated(inv.fallback, opt.Ledger)
			if opt.Notice != nil {
				fmt.Fprintf(opt.Notice, "gpuq: no NVIDIA driver found (%v); using SIMULATED GPUs %s. Choose another machine with --gpus sim:COUNTxSIZE.\n", ret, plans.DefaultSimulated)
			}
		default:
			return nil, fmt.Errorf("NVML: %v", ret)
		}
	} else {
		inv.simulated = spec.String()
		inv.lib = newSimulated(spec, opt.Ledger)
		if ret := inv.lib.Init(); ret != nvml.SUCCESS {
			return nil, fmt.Errorf("simulated NVML: %v", ret)
		}
		if opt.Notice != nil {
			fmt.Fprintf(opt.Notice, "gpuq: using SIMULATED GPUs %s (no real card is touched)\n", inv.simulated)
		}
	}
	if spec.IsSimulated() {
		// A simulated machine asked for is not the machine CUDA_VISIBLE_DEVICES speaks of.
		opt.Visible = nil
	}
	if err := inv.choose(spec, opt); err != nil {
		inv.Close()
		return nil, err
	}
	return inv, nil
}

// driver names what shows that an NVIDIA driver is installed, or "" when nothing does.
func (inv *Inventory) driver() string {
	for _, p := range []string{"dev/nvidiactl", "proc/driver/nvidia"} {
		if _, err := os.Stat(filepath.Join(inv.root, p)); err == nil {
			return "/" + p
		}
	}
	return ""
}

func (inv *Inventory) choose(spec plans.GPUSpec, opt Options) error {
	n, ret := inv.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return fmt.Errorf("NVML: counting cards: %v", ret)
	}
	allowed, err := inv.visibleCards(n, opt.Visible)
	if err != nil {
		return err
	}
	if spec.IsSimulated() || spec.Indices == nil {
		return inv.useWholeCards(allowed, opt.Notice)
	}
	what := cmp.Or(opt.Source, "gpus")
	for _, i := range spec.Indices {
		if i >= n {
			return unknownCard(fmt.Sprintf("%s lists card %d, but this machine has %s (0-%d)%s", what, i, plans.Count(n, "card"), n-1, inv.simulatedNote(slices.Max(spec.Indices), opt.CardBytes)))
		}
		if !slices.Contains(allowed, i) {
			return unknownCard(fmt.Sprintf("%s lists card %d, but gpuq runs with CUDA_VISIBLE_DEVICES=%s, which hides it", what, i, *opt.Visible))
		}
		if inv.mig(i) {
			return fmt.Errorf("%s lists card %d, which is in MIG mode: %s", what, i, migAdvice(i))
		}
		inv.cards = append(inv.cards, i)
	}
	return nil
}

// useWholeCards takes every allowed card but those in MIG mode, and says which it
// leaves out. A MIG card's memory figures are its instances' together, and
// CUDA_VISIBLE_DEVICES=<its index> gives a trainer one instance: scheduling on it would
// pack by memory the trainer cannot reach.
func (inv *Inventory) useWholeCards(allowed []int, notice io.Writer) error {
	var mig []int
	for _, i := range allowed {
		if inv.mig(i) {
			mig = append(mig, i)
		} else {
			inv.cards = append(inv.cards, i)
		}
	}
	if len(mig) == 0 {
		return nil
	}
	if len(inv.cards) == 0 {
		return fmt.Errorf("every card is in MIG mode (%v): %s", mig, migAdvice(mig[0]))
	}
	if notice != nil {
		fmt.Fprintf(notice, "gpuq: leaving out card(s) %v, in MIG mode: %s\n", mig, migAdvice(mig[0]))
	}
	return nil
}

func migAdvice(i int) string {
	return fmt.Sprintf("gpuq schedules whole cards only; turn MIG off (sudo nvidia-smi -i %d -mig 0) or list the other cards with --gpus", i)
}

// mig reports whether card i is in MIG mode.
func (inv *Inventory) mig(i int) bool {
	d, ret := inv.lib.DeviceGetHandleByIndex(i)
	if ret != nvml.SUCCESS {
		return false
	}
	current, _, ret := d.GetMigMode()
	return ret == nvml.SUCCESS && current == nvml.DEVICE_MIG_ENABLE
}

// simulatedNote says, on the simulated machine taken where no driver is, how to
// simulate one with card i (the highest a sweep names): of the same cards, or, given
// the least cards a sweep's plan needs (need), of those, or larger ones. The same
// cards are gpuq's guess, not the sweep's: gla.yaml, written for 7 cards of 23.52 GiB,
// was told to pass sim:7x24GiB.
func (inv *Inventory) simulatedNote(i int, need int64) string {
	sim := inv.fallback.Simulated
	if len(sim) == 0 {
		return ""
	}
	if need > 0 {
		larger := plans.GPUSpec{Simulated: []plans.SimulatedCards{{Count: i + 1, Bytes: need}}}
		return fmt.Sprintf(" (simulated: %s; pass --gpus %s, or larger cards: the least on which its gpu_plan holds its estimates)", inv.simulated, larger)
	}
	larger := plans.GPUSpec{Simulated: []plans.SimulatedCards{{Count: i + 1, Bytes: sim[len(sim)-1].Bytes}}}
	return fmt.Sprintf(" (simulated: %s; pass --gpus %s for a larger one)", inv.simulated, larger)
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

// Read reads every card gpuq may use, in order. A card NVML cannot read is out of
// service (its Fault says why) for this reading; the others are read as usual, and the
// next reading tries it again.
func (inv *Inventory) Read() ([]gpu.Card, error) {
	out := make([]gpu.Card, 0, len(inv.cards))
	for _, i := range inv.cards {
		c, err := inv.readRetrying(i)
		if err != nil {
			c = inv.last[i]
			c.Index, c.Used, c.Processes, c.Fault = i, 0, nil, err.Error()
			c.Utilization, c.Temperature, c.Busy, c.BusyOver = gpu.NoReading, gpu.NoReading, 0, 0
		} else {
			inv.last[i] = c
		}
		out = append(out, c)
	}
	return out, nil
}

// readRetrying reads card i, again at once after an error that may pass (a timeout, an
// unknown error); a lost card or a refused permission will not.
func (inv *Inventory) readRetrying(i int) (gpu.Card, error) {
	var err *readError
	for range 3 {
		c, e := inv.readCard(i)
		if e == nil {
			return c, nil
		}
		if err = e; slices.Contains(lasting, e.ret) {
			break
		}
	}
	return gpu.Card{}, err
}

// lasting are the NVML errors that no retry mends.
var lasting = []nvml.Return{nvml.ERROR_GPU_IS_LOST, nvml.ERROR_NO_PERMISSION, nvml.ERROR_RESET_REQUIRED,
	nvml.ERROR_NOT_FOUND, nvml.ERROR_UNINITIALIZED}

type readError struct {
	card int
	what string
	ret  nvml.Return
}

func (e *readError) Error() string {
	return fmt.Sprintf("NVML: card %d: %s: %v", e.card, e.what, e.ret)
}

func (inv *Inventory) readCard(i int) (gpu.Card, *readError) {
	fail := func(what string, ret nvml.Return) (gpu.Card, *readError) {
		return gpu.Card{}, &readError{card: i, what: what, ret: ret}
	}
	d, ret := inv.lib.DeviceGetHandleByIndex(i)
	if ret != nvml.SUCCESS {
		return fail("handle", ret)
	}
	c := gpu.Card{Index: i}
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
	// For people to look at (gpuq top, metrics): a card that cannot tell is still used.
	c.Utilization, c.Temperature = gpu.NoReading, gpu.NoReading
	if u, ret := d.GetUtilizationRates(); ret == nvml.SUCCESS {
		c.Utilization = int(u.Gpu)
	}
	if t, ret := d.GetTemperature(nvml.TEMPERATURE_GPU); ret == nvml.SUCCESS {
		c.Temperature = int(t)
	}
	for _, list := range []struct {
		what string
		get  func() ([]nvml.ProcessInfo, nvml.Return)
	}{{"processes", d.GetComputeRunningProcesses}, {"MPS processes", d.GetMPSComputeRunningProcesses}} {
		procs, ret := list.get()
		if ret != nvml.SUCCESS && ret != nvml.ERROR_NOT_SUPPORTED && ret != nvml.ERROR_NOT_FOUND {
			return fail(list.what, ret)
		}
		for _, p := range procs {
			if !slices.ContainsFunc(c.Processes, func(q gpu.Process) bool { return q.PID == int(p.Pid) }) {
				c.Processes = append(c.Processes, inv.process(p, c.Total))
			}
		}
	}
	inv.readUtil(i, d, &c)
	return c, nil
}

// utilWindow is how far back a reading of each process's utilization looks: NVML
// keeps samples a few times a second, and their mean over half a minute says more of a
// trainer than one instant (a data loader's stall, an evaluation).
const utilWindow = 30 * time.Second

// utilEvery is how often the real NVML is asked again for a card's processes'
// utilization and its own samples. nvmlDeviceGetProcessUtilization and
// nvmlDeviceGetSamples are its slow calls, about 2.5 ms each a card on an H200 where
// each other reading of a card takes microseconds, and a daemon reads its cards in every
// round: 5 ms a card and round while trainers run. What they read, a mean over
// utilWindow, moves little in a few seconds, and the engine samples
// it from a minute into an attempt (scheduler.UtilAfter). Between readings a process
// keeps its figure, and one that started since has none (as it would have had few
// samples). The simulated NVML costs nothing and is read every time.
const utilEvery = 5 * time.Second

// utilReading is a card's utilization as last read: its processes', by PID, in
// percent, and its own mean (busy, over the time over; 0: no samples) since the card
// came to list the processes it listed then (since).
type utilReading struct {
	at    time.Time
	of    map[uint32]int
	busy  int
	over  time.Duration
	since time.Time
}

// listing is the processes a card listed (their PIDs, in order), and since when.
type listing struct {
	pids  []int
	since time.Time
}

// listedSince is since when card i has listed procs, as its readings have seen it.
func (inv *Inventory) listedSince(i int, procs []gpu.Process, now time.Time) time.Time {
	l, ok := inv.listed[i]
	same := ok && len(l.pids) == len(procs)
	for k := 0; same && k < len(procs); k++ {
		same = slices.Contains(l.pids, procs[k].PID)
	}
	if !same {
		l = listing{since: now}
		for _, p := range procs {
			l.pids = append(l.pids, p.PID)
		}
		inv.listed[i] = l
	}
	return l.since
}

// readUtil gives each process of card c (at NVML index i) its utilization
// (Process.Util): the mean of NVML's samples of its SM utilization over the last
// utilWindow (nvmlDeviceGetProcessUtilization, where the driver keeps them); NoReading
// where there are none. And it gives the card its own mean (Card.Busy) over the samples
// since it came to list the processes it lists (nvmlDeviceGetSamples), at most
// utilWindow back: a trainer alone on a card keeps it as busy as that, which its
// process's SM figure has read from the same to well below (README, "On a real
// machine"). Both are as last read (see utilEvery). A card without a process is not
// asked (asked of the cards short trainers leave empty, the call held a daemon to two
// thirds of the trainers it starts a second), and forgets its last reading, whose PIDs
// may come again.
func (inv *Inventory) readUtil(i int, d nvml.Device, c *gpu.Card) {
	procs := c.Processes
	for k := range procs {
		procs[k].Util = gpu.NoReading
	}
	now := inv.clock()
	since := inv.listedSince(i, procs, now)
	if len(procs) == 0 {
		delete(inv.utils, i)
		return
	}
	r, ok := inv.utils[i]
	if !ok || now.Sub(r.at) >= inv.utilEvery {
		r = utilReading{at: now, of: readProcessUtil(d, now), since: since}
		from := now.Add(-utilWindow)
		if since.After(from) {
			from = since
		}
		r.busy, r.over = readBusy(d, from, now)
		// NVML stamps its samples by the wall clock; since is read by the monotonic one
		// too, which a step of the wall clock does not move.
		r.over = min(r.over, now.Sub(since))
		inv.utils[i] = r
	}
	for k := range procs {
		if u, ok := r.of[uint32(procs[k].PID)]; ok {
			procs[k].Util = u
		}
	}
	if r.since.Equal(since) && r.over > 0 {
		c.Busy, c.BusyOver = r.busy, r.over
	}
}

// readBusy is the mean of NVML's samples of a card's utilization taken after from, in
// percent, and the time from the first of them to now; 0 and 0 where there are none.
func readBusy(d nvml.Device, from, now time.Time) (busy int, over time.Duration) {
	after := uint64(from.UnixMicro())
	typ, samples, ret := d.GetSamples(nvml.GPU_UTILIZATION_SAMPLES, after)
	if ret != nvml.SUCCESS {
		return 0, 0
	}
	var sum float64
	n, first := 0, uint64(math.MaxUint64)
	for _, s := range samples {
		v, ok := sampleValue(typ, s.SampleValue)
		if !ok || s.TimeStamp <= after || v < 0 || v > 100 {
			continue
		}
		sum, n, first = sum+v, n+1, min(first, s.TimeStamp)
	}
	if n == 0 {
		return 0, 0
	}
	return int(math.Round(sum / float64(n))), max(now.Sub(time.UnixMicro(int64(first))), 0)
}

// sampleValue is a sample's value as NVML's union holds it, by its type.
func sampleValue(typ nvml.ValueType, v [8]byte) (float64, bool) {
	switch typ {
	case nvml.VALUE_TYPE_DOUBLE:
		return math.Float64frombits(binary.NativeEndian.Uint64(v[:])), true
	case nvml.VALUE_TYPE_UNSIGNED_INT:
		return float64(binary.NativeEndian.Uint32(v[:4])), true
	case nvml.VALUE_TYPE_SIGNED_INT:
		return float64(int32(binary.NativeEndian.Uint32(v[:4]))), true
	case nvml.VALUE_TYPE_UNSIGNED_LONG, nvml.VALUE_TYPE_UNSIGNED_LONG_LONG:
		return float64(binary.NativeEndian.Uint64(v[:])), true
	case nvml.VALUE_TYPE_SIGNED_LONG_LONG:
		return float64(int64(binary.NativeEndian.Uint64(v[:]))), true
	case nvml.VALUE_TYPE_UNSIGNED_SHORT:
		return float64(binary.NativeEndian.Uint16(v[:2])), true
	}
	return 0, false
}

// readProcessUtil asks NVML for the mean SM utilization of each process of a card with
// samples over the last utilWindow, by PID: none where the driver keeps no samples.
func readProcessUtil(d nvml.Device, now time.Time) map[uint32]int {
	samples, ret := d.GetProcessUtilization(uint64(now.Add(-utilWindow).UnixMicro()))
	if ret != nvml.SUCCESS {
		return nil
	}
	sum, n := map[uint32]uint64{}, map[uint32]uint64{}
	for _, s := range samples {
		if s.SmUtil <= 100 {
			sum[s.Pid] += uint64(s.SmUtil)
			n[s.Pid]++
		}
	}
	out := make(map[uint32]int, len(n))
	for pid, k := range n {
		out[pid] = int((sum[pid] + k/2) / k)
	}
	return out
}

// process is what NVML says of one process. Its memory is unknown where NVML says "not
// available" (all bits set, REFERENCE.md §3), or 0: a process with a CUDA context holds
// hundreds of MiB, and some containers report 0 for every process.
func (inv *Inventory) process(p nvml.ProcessInfo, total int64) gpu.Process {
	used := int64(gpu.Unknown)
	if p.UsedGpuMemory != math.MaxUint64 && p.UsedGpuMemory > 0 && p.UsedGpuMemory <= uint64(total) {
		used = int64(p.UsedGpuMemory)
	}
	_, err := os.Stat(filepath.Join(inv.root, "proc", strconv.Itoa(int(p.Pid))))
	return gpu.Process{PID: int(p.Pid), Used: used, Hidden: errors.Is(err, os.ErrNotExist)}
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
