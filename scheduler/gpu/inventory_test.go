package gpu

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/gpuq/gpuq/plans"
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
	// A live process (this test) holds 3 GiB on card 2; a dead one's entry is ignored.
	if err := WriteLedger(ledger, 2, os.Getpid(), 3<<30); err != nil {
		t.Fatal(err)
	}
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	if err := WriteLedger(ledger, 2, dead.Process.Pid, 5<<30); err != nil {
		t.Fatal(err)
	}
	cards, err := inv.Snapshot()
	if err != nil {
		t.Fatal(err)
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
	if err := WriteLedger(ledger, 2, os.Getpid(), 0); err != nil {
		t.Fatal(err)
	}
	cards, _ = inv.Snapshot()
	if cards[2].Used != 0 {
		t.Errorf("released entry still counted: %+v", cards[2])
	}
}

func TestFallsBackToSimulatedWithoutDriver(t *testing.T) {
	var notice bytes.Buffer
	noDriver := func() nvml.Interface {
		return &mock.Interface{InitFunc: func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }}
	}
	inv, err := Open(plans.GPUSpec{}, Options{Ledger: t.TempDir(), Notice: &notice, Library: noDriver})
	if err != nil {
		t.Fatal(err)
	}
	defer inv.Close()
	if inv.Simulated() != plans.DefaultSim || inv.Count() != 4 {
		t.Errorf("fallback: %q, %d cards", inv.Simulated(), inv.Count())
	}
	if !strings.Contains(notice.String(), "no NVIDIA driver found") {
		t.Errorf("notice = %q", notice.String())
	}
	_, err = Open(mustSpec(t, "0,5"), Options{Ledger: t.TempDir(), Library: noDriver})
	if !errors.Is(err, ErrUnknownCard) || !strings.Contains(err.Error(), "gpus lists card 5, but this machine has 4 cards (0-3)") {
		t.Errorf("unknown index: %v", err)
	}
}

func TestVisibleDevicesRestrictCards(t *testing.T) {
	spec := mustSpec(t, "sim:4x24GiB")
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
		inv, err := Open(spec, Options{Ledger: t.TempDir(), Visible: &v})
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%q: err = %v", v, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%q: %v", v, err)
		}
		cards, _ := inv.Snapshot()
		var got []int
		for _, c := range cards {
			got = append(got, c.Index)
		}
		if len(got) != len(tt.want) || (len(got) > 0 && got[0] != tt.want[0]) {
			t.Errorf("%q: cards %v, want %v", v, got, tt.want)
		}
		inv.Close()
	}
}

func TestUnavailableProcessMemoryIsUnknown(t *testing.T) {
	dev := &mock.Device{
		GetUUIDFunc:       func() (string, nvml.Return) { return "GPU-x", nvml.SUCCESS },
		GetNameFunc:       func() (string, nvml.Return) { return "NVIDIA A100", nvml.SUCCESS },
		GetPciInfoFunc:    func() (nvml.PciInfo, nvml.Return) { return nvml.PciInfo{}, nvml.SUCCESS },
		GetMemoryInfoFunc: func() (nvml.Memory, nvml.Return) { return nvml.Memory{Total: 40 << 30, Used: 1 << 30}, nvml.SUCCESS },
		GetComputeRunningProcessesFunc: func() ([]nvml.ProcessInfo, nvml.Return) {
			return []nvml.ProcessInfo{{Pid: 42, UsedGpuMemory: ^uint64(0)}}, nvml.SUCCESS
		},
	}
	lib := &mock.Interface{
		InitFunc:                   func() nvml.Return { return nvml.SUCCESS },
		ShutdownFunc:               func() nvml.Return { return nvml.SUCCESS },
		DeviceGetCountFunc:         func() (int, nvml.Return) { return 1, nvml.SUCCESS },
		DeviceGetHandleByIndexFunc: func(int) (nvml.Device, nvml.Return) { return dev, nvml.SUCCESS },
	}
	inv, err := Open(plans.GPUSpec{}, Options{Library: func() nvml.Interface { return lib }})
	if err != nil {
		t.Fatal(err)
	}
	cards, err := inv.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if inv.Simulated() != "" || cards[0].Processes[0].Used != Unknown {
		t.Errorf("got %+v", cards[0])
	}
}
