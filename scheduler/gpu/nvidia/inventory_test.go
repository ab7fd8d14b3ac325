package nvidia

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/gpu"
)

func mustSpec(t *testing.T, s string) plans.GPUSpec {
	t.Helper()
	spec, err := plans.ParseGPUs(s)
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

func TestSimulatedMachineReadsLedger(t *testing.T) {
	ledger := t.TempDir()
	var notice bytes.Buffer
	inv, err := Open(mustSpec(t, "sim:2x80GiB+1x24GiB"), Options{Ledger: ledger, Notice: &notice})
	if err != nil {
		t.Fatal(err)
	}
	defer inv.Close()
	if !strings.Contains(notice.String(), "SIMULATED GPUs sim:2x80GiB+1x24GiB") {
		t.Errorf("notice = %q", notice.String())
	}
	// A live process (this test) holds 3 GiB on card 2 and keeps 60% of it busy; a dead
	// one's entry is ignored.
	if err := writeLedgerUtil(ledger, 2, os.Getpid(), 3<<30, "0.6"); err != nil {
		t.Fatal(err)
	}
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	if err := writeLedger(ledger, 2, dead.Process.Pid, 5<<30); err != nil {
		t.Fatal(err)
	}
	// Another process that has exited left its entry long ago: it is removed, so that
	// no process that takes its pid later holds its memory. The fresh one is kept
	// (a process that took the pid may have just written it).
	long := exec.Command("true")
	if err := long.Run(); err != nil {
		t.Fatal(err)
	}
	if err := writeLedger(ledger, 1, long.Process.Pid, 7<<30); err != nil {
		t.Fatal(err)
	}
	old := filepath.Join(ledger, fmt.Sprintf("1-%d", long.Process.Pid))
	if err := os.Chtimes(old, time.Time{}, time.Now().Add(-2*staleAfter)); err != nil {
		t.Fatal(err)
	}
	cards, err := inv.Read()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(old); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the old entry of a process that has exited is still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(ledger, fmt.Sprintf("2-%d", dead.Process.Pid))); err != nil {
		t.Errorf("the fresh entry of a process that has exited was removed: %v", err)
	}
	if cards[1].Used != 0 {
		t.Errorf("card 1 counts a process that has exited: %+v", cards[1])
	}
	if len(cards) != 3 || cards[0].Total != 80<<30 || cards[2].Total != 24<<30 {
		t.Fatalf("cards: %+v", cards)
	}
	c := cards[2]
	if c.Used != 3<<30 || len(c.Processes) != 1 || c.Processes[0].PID != os.Getpid() || c.Processes[0].Used != 3<<30 {
		t.Errorf("card 2: %+v", c)
	}
	if !strings.HasPrefix(c.UUID, "GPU-") || c.BusID != "00000000:03:00.0" || !strings.Contains(c.Name, "Simulated") {
		t.Errorf("identity: %+v", c)
	}
	if c.Utilization != 60 || c.Processes[0].Util != 60 || cards[0].Utilization != 0 || c.Temperature <= cards[0].Temperature {
		t.Errorf("a simulated card with a trainer is as busy as it keeps it (60%%) and warmer: %d%% (process %d%%) %d°C, an idle one %d%% %d°C",
			c.Utilization, c.Processes[0].Util, c.Temperature, cards[0].Utilization, cards[0].Temperature)
	}
	// Another (the test's parent) asking 80% more: the card is all busy, each process
	// gets its share.
	if err := writeLedgerUtil(ledger, 2, os.Getppid(), 1<<30, "0.8"); err != nil {
		t.Fatal(err)
	}
	cards, _ = inv.Read()
	utils := map[int]int{}
	for _, p := range cards[2].Processes {
		utils[p.PID] = p.Util
	}
	if cards[2].Utilization != 100 || utils[os.Getpid()] != 43 || utils[os.Getppid()] != 57 {
		t.Errorf("oversubscribed: card %d%%, processes %v; want 100%%, 43%% and 57%%", cards[2].Utilization, utils)
	}
	if err := writeLedger(ledger, 2, os.Getppid(), 0); err != nil {
		t.Fatal(err)
	}
	if err := writeLedger(ledger, 2, os.Getpid(), 0); err != nil {
		t.Fatal(err)
	}
	cards, _ = inv.Read()
	if cards[2].Used != 0 {
		t.Errorf("released entry still counted: %+v", cards[2])
	}
}

func TestFallsBackToSimulatedWithoutDriver(t *testing.T) {
	var notice bytes.Buffer
	noDriver := func() nvml.Interface {
		return &mock.Interface{InitFunc: func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }}
	}
	inv, err := Open(plans.GPUSpec{}, Options{Ledger: t.TempDir(), Notice: &notice, library: noDriver, Root: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer inv.Close()
	if inv.Simulated() != plans.DefaultSimulated || inv.Count() != 4 {
		t.Errorf("fallback: %q, %d cards", inv.Simulated(), inv.Count())
	}
	if !strings.Contains(notice.String(), "no NVIDIA driver found") {
		t.Errorf("notice = %q", notice.String())
	}
	_, err = Open(mustSpec(t, "0,5"), Options{Ledger: t.TempDir(), library: noDriver, Root: t.TempDir()})
	if !errors.Is(err, ErrUnknownCard) || !strings.Contains(err.Error(), "gpus lists card 5, but this machine has 4 cards (0-3)") {
		t.Errorf("unknown index: %v", err)
	}
	// The machine it says to simulate has every card named, not the first missing one.
	_, err = Open(mustSpec(t, "0,4,6,5"), Options{Ledger: t.TempDir(), library: noDriver, Root: t.TempDir()})
	if !errors.Is(err, ErrUnknownCard) || !strings.HasPrefix(err.Error(), "gpus lists card 4") || !strings.Contains(err.Error(), "--gpus sim:7x24GiB for a larger one") {
		t.Errorf("unknown indices: %v", err)
	}
	// Given the least cards a sweep needs, those; the error begins with where the cards
	// were named, not "unknown card:".
	_, err = Open(mustSpec(t, "0,4,6,5"), Options{Ledger: t.TempDir(), library: noDriver, Root: t.TempDir(), Source: "gla.yaml: gpus", CardBytes: 21 << 30})
	if want := "gla.yaml: gpus lists card 4, but this machine has 4 cards (0-3) (simulated: sim:4x24GiB; pass --gpus sim:7x21GiB, or larger cards: the least on which its gpu_plan holds its estimates)"; !errors.Is(err, ErrUnknownCard) || err.Error() != want {
		t.Errorf("unknown indices of a sweep: %v; want %q", err, want)
	}
}

// TestAWorkerTakesNoSimulatedMachineUnasked: where no driver is, a worker's cards
// (RealOnly) are not the four simulated ones gpuq run and the daemon fall back to: the
// daemon would send real jobs there, each to fail. A simulated machine it names is
// its own.
func TestAWorkerTakesNoSimulatedMachineUnasked(t *testing.T) {
	noDriver := func() nvml.Interface {
		return &mock.Interface{InitFunc: func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }}
	}
	var notice bytes.Buffer
	inv, err := Open(plans.GPUSpec{}, Options{Ledger: t.TempDir(), Notice: &notice, library: noDriver, Root: t.TempDir(), RealOnly: true})
	if err == nil {
		inv.Close()
		t.Fatalf("a worker without a driver took %s", inv.Simulated())
	}
	if !strings.Contains(err.Error(), "no NVIDIA driver found") || !strings.Contains(err.Error(), "--gpus sim:4x24GiB") {
		t.Errorf("the error %q does not say what to do", err)
	}
	if notice.Len() > 0 {
		t.Errorf("it said it simulates: %q", notice.String())
	}
	inv, err = Open(mustSpec(t, "sim:2x24GiB"), Options{Ledger: t.TempDir(), library: noDriver, Root: t.TempDir(), RealOnly: true})
	if err != nil {
		t.Fatalf("a simulated machine asked for: %v", err)
	}
	inv.Close()
}

func TestVisibleDevicesRestrictCards(t *testing.T) {
	// Four cards seen through NVML (here simulated): CUDA_VISIBLE_DEVICES speaks of
	// the real machine; a simulated one asked for with --gpus ignores it.
	real := func() nvml.Interface { return newSimulated(mustSpec(t, "sim:4x24GiB"), t.TempDir()) }
	for _, tt := range []struct {
		visible string
		want    []int
		wantErr string
	}{
		{"2,0", []int{2, 0}, ""},
		{"GPU-51a1a7ed-0000-4000-8000-000000000003", []int{3}, ""},
		{"1,7,2", []int{1}, ""}, // as in CUDA, an invalid entry hides the rest
		{"", nil, "hides every card"},
	} {
		v := tt.visible
		inv, err := Open(plans.GPUSpec{}, Options{library: real, Visible: &v})
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%q: err = %v", v, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%q: %v", v, err)
		}
		cards, _ := inv.Read()
		var got []int
		for _, c := range cards {
			got = append(got, c.Index)
		}
		if len(got) != len(tt.want) || (len(got) > 0 && got[0] != tt.want[0]) {
			t.Errorf("%q: cards %v, want %v", v, got, tt.want)
		}
		inv.Close()
	}
	v := "1"
	inv, err := Open(mustSpec(t, "sim:4x24GiB"), Options{Ledger: t.TempDir(), Visible: &v})
	if err != nil {
		t.Fatal(err)
	}
	defer inv.Close()
	if cards, _ := inv.Read(); len(cards) != 4 {
		t.Errorf("a simulated machine with CUDA_VISIBLE_DEVICES=1 has %d cards, want its 4", len(cards))
	}
}

// card is a real card as go-nvml's mock plays it: procs are its compute processes, mps
// its MPS clients; memErr, if set, answers GetMemoryInfo.
type card struct {
	uuid       string
	total      uint64
	procs, mps []nvml.ProcessInfo
	util       []nvml.ProcessUtilizationSample // nil: the driver keeps none
	busy       []nvml.Sample                   // the card's utilization; nil: the driver keeps none
	now        func() time.Time                // the samples taken by then are given; nil: all
	// junk: GetSamples also gives what go-nvml leaves past the samples NVML wrote
	// (zeroes) and a sample out of range, stamped now.
	junk        bool
	mig         bool
	memErr      func() nvml.Return
	handleErr   nvml.Return
	memoryCalls int
	utilCalls   int // GetProcessUtilization's
}

func (c *card) device() *mock.Device {
	return &mock.Device{
		GetUUIDFunc:    func() (string, nvml.Return) { return c.uuid, nvml.SUCCESS },
		GetNameFunc:    func() (string, nvml.Return) { return "NVIDIA A100-SXM4-40GB", nvml.SUCCESS },
		GetPciInfoFunc: func() (nvml.PciInfo, nvml.Return) { return nvml.PciInfo{}, nvml.SUCCESS },
		GetUtilizationRatesFunc: func() (nvml.Utilization, nvml.Return) {
			return nvml.Utilization{Gpu: 87}, nvml.SUCCESS
		},
		GetTemperatureFunc: func(nvml.TemperatureSensors) (uint32, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED },
		GetMemoryInfoFunc: func() (nvml.Memory, nvml.Return) {
			c.memoryCalls++
			if c.memErr != nil {
				if ret := c.memErr(); ret != nvml.SUCCESS {
					return nvml.Memory{}, ret
				}
			}
			return nvml.Memory{Total: c.total, Used: 1 << 30}, nvml.SUCCESS
		},
		GetComputeRunningProcessesFunc: func() ([]nvml.ProcessInfo, nvml.Return) { return c.procs, nvml.SUCCESS },
		GetProcessUtilizationFunc: func(uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
			c.utilCalls++
			if c.util == nil {
				return nil, nvml.ERROR_NOT_SUPPORTED
			}
			return c.util, nvml.SUCCESS
		},
		GetSamplesFunc: func(typ nvml.SamplingType, lastSeen uint64) (nvml.ValueType, []nvml.Sample, nvml.Return) {
			if c.busy == nil || typ != nvml.GPU_UTILIZATION_SAMPLES {
				return 0, nil, nvml.ERROR_NOT_SUPPORTED
			}
			var out []nvml.Sample
			for _, s := range c.busy {
				if s.TimeStamp > lastSeen && (c.now == nil || s.TimeStamp <= uint64(c.now().UnixMicro())) {
					out = append(out, s)
				}
			}
			if c.junk && c.now != nil {
				bad := nvml.Sample{TimeStamp: uint64(c.now().UnixMicro())}
				binary.NativeEndian.PutUint32(bad.SampleValue[:4], 250)
				out = append(out, bad, nvml.Sample{}, nvml.Sample{})
			}
			return nvml.VALUE_TYPE_UNSIGNED_INT, out, nvml.SUCCESS
		},
		GetMPSComputeRunningProcessesFunc: func() ([]nvml.ProcessInfo, nvml.Return) { return c.mps, nvml.SUCCESS },
		GetMigModeFunc: func() (int, int, nvml.Return) {
			if c.mig {
				return nvml.DEVICE_MIG_ENABLE, nvml.DEVICE_MIG_ENABLE, nvml.SUCCESS
			}
			return nvml.DEVICE_MIG_DISABLE, nvml.DEVICE_MIG_DISABLE, nvml.SUCCESS
		},
	}
}

// machine is NVML over cards.
func machine(cards ...*card) func() nvml.Interface {
	return func() nvml.Interface {
		return &mock.Interface{
			InitFunc:           func() nvml.Return { return nvml.SUCCESS },
			ShutdownFunc:       func() nvml.Return { return nvml.SUCCESS },
			DeviceGetCountFunc: func() (int, nvml.Return) { return len(cards), nvml.SUCCESS },
			DeviceGetHandleByIndexFunc: func(i int) (nvml.Device, nvml.Return) {
				if cards[i].handleErr != nvml.SUCCESS {
					return nil, cards[i].handleErr
				}
				return cards[i].device(), nvml.SUCCESS
			},
		}
	}
}

// procRoot is a fake root whose /proc has the given pids.
func procRoot(t *testing.T, pids ...int) string {
	t.Helper()
	root := t.TempDir()
	for _, pid := range pids {
		if err := os.MkdirAll(filepath.Join(root, "proc", strconv.Itoa(pid)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// TestProcessReadings: NVML's "not available" and a 0 are unknown, never a size; a PID
// this namespace cannot see is hidden; MPS clients count too, once.
func TestProcessReadings(t *testing.T) {
	c := &card{uuid: "GPU-a", total: 40 << 30,
		procs: []nvml.ProcessInfo{{Pid: 42, UsedGpuMemory: ^uint64(0)}, {Pid: 43, UsedGpuMemory: 0}, {Pid: 44, UsedGpuMemory: 5 << 30}, {Pid: 99, UsedGpuMemory: 3 << 30}},
		mps:   []nvml.ProcessInfo{{Pid: 45, UsedGpuMemory: 2 << 30}, {Pid: 44, UsedGpuMemory: 5 << 30}}}
	inv, err := Open(plans.GPUSpec{}, Options{library: machine(c), Root: procRoot(t, 42, 43, 44, 45)})
	if err != nil {
		t.Fatal(err)
	}
	defer inv.Close()
	cards, err := inv.Read()
	if err != nil {
		t.Fatal(err)
	}
	none := gpu.NoReading
	want := []gpu.Process{{PID: 42, Used: gpu.Unknown, Util: none}, {PID: 43, Used: gpu.Unknown, Util: none}, {PID: 44, Used: 5 << 30, Util: none},
		{PID: 99, Used: 3 << 30, Hidden: true, Util: none}, {PID: 45, Used: 2 << 30, Util: none}}
	if inv.Simulated() != "" || !slices.Equal(cards[0].Processes, want) {
		t.Errorf("processes %+v\nwant      %+v", cards[0].Processes, want)
	}
	// Where the driver keeps samples of each process's SM utilization, its mean over
	// them; none for a process without (read again once utilEvery has passed).
	c.util = []nvml.ProcessUtilizationSample{{Pid: 44, SmUtil: 50}, {Pid: 44, SmUtil: 71}, {Pid: 42, SmUtil: 100}}
	now := time.Now().Add(utilEvery)
	inv.clock = func() time.Time { return now }
	cards, _ = inv.Read()
	want[0].Util, want[2].Util = 100, 61
	if !slices.Equal(cards[0].Processes, want) {
		t.Errorf("with utilization samples: %+v\nwant      %+v", cards[0].Processes, want)
	}
	// What NVML gives of utilisation and temperature, and what it does not.
	if cards[0].Utilization != 87 || cards[0].Temperature != gpu.NoReading {
		t.Errorf("utilization %d, temperature %d: want 87 and no reading", cards[0].Utilization, cards[0].Temperature)
	}
}

// TestADriverWithoutNVMLIsAnError: simulated cards only where there is no driver at
// all; a driver whose library cannot be loaded (a container without it) says how to
// fix it.
func TestADriverWithoutNVMLIsAnError(t *testing.T) {
	noLibrary := func() nvml.Interface {
		return &mock.Interface{InitFunc: func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }}
	}
	for _, driver := range []string{"dev/nvidiactl", "proc/driver/nvidia"} {
		root := t.TempDir()
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(driver)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, driver), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Open(plans.GPUSpec{}, Options{Ledger: t.TempDir(), library: noLibrary, Root: root})
		if err == nil || !strings.Contains(err.Error(), "/"+driver) || !strings.Contains(err.Error(), "libnvidia-ml.so.1") ||
			!strings.Contains(err.Error(), "--gpus sim:") {
			t.Errorf("%s: err = %v", driver, err)
		}
	}
}

// TestMIGCardsAreRefused: a card in MIG mode is never scheduled by its parent's index:
// left out, with a notice, of every card; an error when named or when it is all there is.
func TestMIGCardsAreRefused(t *testing.T) {
	cards := []*card{{uuid: "GPU-0", total: 40 << 30}, {uuid: "GPU-1", total: 40 << 30, mig: true}, {uuid: "GPU-2", total: 40 << 30}}
	var notice bytes.Buffer
	inv, err := Open(plans.GPUSpec{}, Options{library: machine(cards...), Notice: &notice, Root: procRoot(t)})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := inv.Read()
	if len(got) != 2 || got[0].Index != 0 || got[1].Index != 2 || !strings.Contains(notice.String(), "leaving out card(s) [1], in MIG mode") {
		t.Errorf("cards %+v, notice %q", got, notice.String())
	}
	if _, err := Open(mustSpec(t, "0,1"), Options{library: machine(cards...), Root: procRoot(t)}); err == nil ||
		!strings.Contains(err.Error(), "card 1, which is in MIG mode") || !strings.Contains(err.Error(), "nvidia-smi -i 1 -mig 0") {
		t.Errorf("naming a MIG card: %v", err)
	}
	if _, err := Open(plans.GPUSpec{}, Options{library: machine(cards[1]), Root: procRoot(t)}); err == nil || !strings.Contains(err.Error(), "every card is in MIG mode") {
		t.Errorf("only MIG cards: %v", err)
	}
}

// TestOneCardsErrorTakesItOutOfService: a lost card, or one NVML may not read, is out of
// service with the reason, keeping what it was known as; the others are read as usual; an
// error that passes is retried at once, one that lasts is not.
func TestOneCardsErrorTakesItOutOfService(t *testing.T) {
	lost := false
	timeouts := 0
	cards := []*card{
		{uuid: "GPU-0", total: 40 << 30, memErr: func() nvml.Return {
			if lost {
				return nvml.ERROR_GPU_IS_LOST
			}
			return nvml.SUCCESS
		}},
		{uuid: "GPU-1", total: 80 << 30, memErr: func() nvml.Return {
			if timeouts > 0 {
				timeouts--
				return nvml.ERROR_TIMEOUT
			}
			return nvml.SUCCESS
		}},
		{uuid: "GPU-2", total: 24 << 30, handleErr: nvml.ERROR_NO_PERMISSION},
	}
	inv, err := Open(plans.GPUSpec{}, Options{library: machine(cards...), Root: procRoot(t)})
	if err != nil {
		t.Fatal(err)
	}
	snap := func() []gpu.Card {
		t.Helper()
		got, err := inv.Read()
		if err != nil || len(got) != 3 {
			t.Fatalf("snapshot: %v, %+v", err, got)
		}
		return got
	}
	got := snap()
	if got[0].Fault != "" || got[1].Fault != "" || !strings.Contains(got[2].Fault, "ERROR_NO_PERMISSION") || got[2].Index != 2 {
		t.Errorf("first reading: %+v", got)
	}
	lost, timeouts = true, 2
	cards[0].memoryCalls = 0
	got = snap()
	if c := got[0]; !strings.Contains(c.Fault, "card 0: memory: ERROR_GPU_IS_LOST") || c.UUID != "GPU-0" || c.Total != 40<<30 || cards[0].memoryCalls != 1 {
		t.Errorf("lost card: %+v after %d reads", c, cards[0].memoryCalls)
	}
	if got[1].Fault != "" || got[1].Total != 80<<30 {
		t.Errorf("a timeout twice, then an answer: %+v", got[1])
	}
	lost = false
	if got = snap(); got[0].Fault != "" {
		t.Errorf("card 0 answers again: %+v", got[0])
	}
}

// TestProcessUtilReadEvery: NVML's slow call for the processes' utilization is made for
// a card with processes, at most once every utilEvery, each process keeping its
// figure in between; never for a card without. The simulated NVML is read every time.
func TestProcessUtilReadEvery(t *testing.T) {
	busy := &card{uuid: "GPU-a", total: 40 << 30, procs: []nvml.ProcessInfo{{Pid: 44, UsedGpuMemory: 5 << 30}},
		util: []nvml.ProcessUtilizationSample{{Pid: 44, SmUtil: 40}}}
	idle := &card{uuid: "GPU-b", total: 40 << 30, util: []nvml.ProcessUtilizationSample{}}
	inv, err := Open(plans.GPUSpec{}, Options{library: machine(busy, idle), Root: procRoot(t, 44)})
	if err != nil {
		t.Fatal(err)
	}
	defer inv.Close()
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	inv.clock = func() time.Time { return now }
	read := func(when string, wantUtil, wantCalls int) {
		t.Helper()
		cards, err := inv.Read()
		if err != nil {
			t.Fatal(err)
		}
		if got := cards[0].Processes[0].Util; got != wantUtil || busy.utilCalls != wantCalls {
			t.Errorf("%s: utilization %d after %d calls, want %d after %d", when, got, busy.utilCalls, wantUtil, wantCalls)
		}
		if idle.utilCalls != 0 {
			t.Errorf("%s: a card without a process was asked for its processes' utilization %d times", when, idle.utilCalls)
		}
	}
	read("first", 40, 1)
	busy.util = []nvml.ProcessUtilizationSample{{Pid: 44, SmUtil: 90}}
	now = now.Add(utilEvery - time.Millisecond)
	read("before utilEvery", 40, 1)
	now = now.Add(time.Millisecond)
	read("at utilEvery", 90, 2)
	busy.util = nil // the driver stops keeping samples
	now = now.Add(utilEvery)
	read("without samples", gpu.NoReading, 3)
	now = now.Add(time.Second)
	read("without samples, asked again", gpu.NoReading, 3)
	// A card left without processes forgets its reading: the next one there is asked
	// for at once, its PID perhaps one the last reading had.
	procs := busy.procs
	busy.procs, busy.util = nil, []nvml.ProcessUtilizationSample{{Pid: 44, SmUtil: 70}}
	if _, err := inv.Read(); err != nil || busy.utilCalls != 3 {
		t.Fatalf("a card without processes: %v, %d calls, want none more than 3", err, busy.utilCalls)
	}
	busy.procs = procs
	now = now.Add(time.Second)
	read("a process again on a card that had none", 70, 4)

	sim, err := Open(plans.GPUSpec{Simulated: []plans.SimulatedCards{{Count: 1, Bytes: 24 << 30}}}, Options{Ledger: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer sim.Close()
	if sim.utilEvery != 0 {
		t.Errorf("the simulated NVML is read again only every %s", sim.utilEvery)
	}
}

// TestCardBusySinceItsProcesses: a card's own utilization is the mean of NVML's samples
// of it since it came to list the processes it lists, at most utilWindow back, as last
// read; none while the list has changed since that reading.
func TestCardBusySinceItsProcesses(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	failing := false
	c := &card{uuid: "GPU-a", total: 40 << 30, procs: []nvml.ProcessInfo{{Pid: 44, UsedGpuMemory: 5 << 30}},
		util: []nvml.ProcessUtilizationSample{{Pid: 44, SmUtil: 20}}, junk: true,
		memErr: func() nvml.Return {
			if failing {
				return nvml.ERROR_GPU_IS_LOST
			}
			return nvml.SUCCESS
		}}
	// A sample a second: 100% before its process came (another's), then 40%, then 60%.
	for s := -60; s <= 120; s++ {
		v := uint32(100)
		switch {
		case s >= 20:
			v = 60
		case s > 0:
			v = 40
		}
		sample := nvml.Sample{TimeStamp: uint64(t0.Add(time.Duration(s) * time.Second).UnixMicro())}
		binary.NativeEndian.PutUint32(sample.SampleValue[:4], v)
		c.busy = append(c.busy, sample)
	}
	inv, err := Open(plans.GPUSpec{}, Options{library: machine(c), Root: procRoot(t, 44, 45)})
	if err != nil {
		t.Fatal(err)
	}
	defer inv.Close()
	now := t0
	inv.clock = func() time.Time { return now }
	c.now = inv.clock
	read := func(at time.Duration, wantBusy int, wantOver time.Duration) {
		t.Helper()
		now = t0.Add(at)
		cards, err := inv.Read()
		if err != nil {
			t.Fatal(err)
		}
		if got := cards[0]; got.Busy != wantBusy || got.BusyOver != wantOver {
			t.Errorf("at %s: busy %d%% over %s, want %d%% over %s", at, got.Busy, got.BusyOver, wantBusy, wantOver)
		}
	}
	read(0, 0, 0)                            // its processes were first seen now: nothing since
	read(utilEvery, 40, 4*time.Second)       // the samples since, not before
	read(30*time.Second, 47, 29*time.Second) // 19 of 40% and 11 of 60%
	read(50*time.Second, 60, 29*time.Second) // half a minute back at most
	read(52*time.Second, 60, 29*time.Second) // as last read, until utilEvery has passed
	failing = true
	read(52*time.Second, 0, 0) // out of service: no figure of its own
	failing = false
	read(52*time.Second, 60, 29*time.Second)
	c.procs = append(c.procs, nvml.ProcessInfo{Pid: 45, UsedGpuMemory: 1 << 30})
	read(53*time.Second, 0, 0)            // another process since: that reading no longer says
	read(55*time.Second, 60, time.Second) // read again: since the list changed
	c.procs = []nvml.ProcessInfo{{Pid: 45, UsedGpuMemory: 1 << 30}, {Pid: 44, UsedGpuMemory: 5 << 30}}
	read(60*time.Second, 60, 6*time.Second) // the same processes, listed in another order
	c.busy = nil
	read(70*time.Second, 0, 0) // the driver keeps no samples
}

// TestSampleValue: NVML's samples are a union read by their type.
func TestSampleValue(t *testing.T) {
	var v [8]byte
	binary.NativeEndian.PutUint64(v[:], math.Float64bits(42.5))
	if got, ok := sampleValue(nvml.VALUE_TYPE_DOUBLE, v); !ok || got != 42.5 {
		t.Errorf("double: %v %v", got, ok)
	}
	binary.NativeEndian.PutUint64(v[:], 0)
	binary.NativeEndian.PutUint32(v[:4], 73)
	for _, typ := range []nvml.ValueType{nvml.VALUE_TYPE_UNSIGNED_INT, nvml.VALUE_TYPE_SIGNED_INT, nvml.VALUE_TYPE_UNSIGNED_LONG, nvml.VALUE_TYPE_UNSIGNED_LONG_LONG, nvml.VALUE_TYPE_SIGNED_LONG_LONG, nvml.VALUE_TYPE_UNSIGNED_SHORT} {
		if got, ok := sampleValue(typ, v); !ok || got != 73 {
			t.Errorf("type %d: %v %v", typ, got, ok)
		}
	}
	if _, ok := sampleValue(nvml.VALUE_TYPE_COUNT, v); ok {
		t.Error("a type NVML does not define was read")
	}
}

// TestSimulatedCardBusy: the simulated card is as busy as its trainers all along.
func TestSimulatedCardBusy(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	samples := everySecond(uint64(now.Add(-10*time.Second).UnixMicro()), now, 55)
	if len(samples) != 10 || samples[9].TimeStamp != uint64(now.UnixMicro()) || samples[0].TimeStamp != uint64(now.Add(-9*time.Second).UnixMicro()) {
		t.Fatalf("samples %+v: want ten, a second apart, the last now", samples)
	}
	if got := everySecond(0, now, 55); len(got) != int(utilWindow/time.Second) {
		t.Errorf("since ever: %d samples, want utilWindow's", len(got))
	}
	if busy, over := readBusy(&mock.Device{GetSamplesFunc: func(nvml.SamplingType, uint64) (nvml.ValueType, []nvml.Sample, nvml.Return) {
		return nvml.VALUE_TYPE_UNSIGNED_INT, samples, nvml.SUCCESS
	}}, now.Add(-time.Minute), now); busy != 55 || over != 9*time.Second {
		t.Errorf("busy %d over %s, want 55 over 9s", busy, over)
	}
}
