package nvidia

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/gpuq/gpuq/plans"
)

// newSimulated returns a simulated machine behind nvml.Interface. Memory in use and the
// processes on each card are read from the ledger on every call, so the scheduler sees
// what simulated trainers really hold, exactly as it would see real ones through NVML.
// Only the calls the inventory makes are implemented; the mock panics on any other,
// which a test would catch at once.
func newSimulated(spec plans.GPUSpec, ledger string) nvml.Interface {
	var devs []nvml.Device
	for _, group := range spec.Simulated {
		for range group.Count {
			devs = append(devs, simulatedDevice(len(devs), group.Bytes, ledger))
		}
	}
	return &mock.Interface{
		InitFunc:                   func() nvml.Return { return nvml.SUCCESS },
		ShutdownFunc:               func() nvml.Return { return nvml.SUCCESS },
		SystemGetDriverVersionFunc: func() (string, nvml.Return) { return "simulated", nvml.SUCCESS },
		DeviceGetCountFunc:         func() (int, nvml.Return) { return len(devs), nvml.SUCCESS },
		DeviceGetHandleByIndexFunc: func(i int) (nvml.Device, nvml.Return) {
			if i < 0 || i >= len(devs) {
				return nil, nvml.ERROR_INVALID_ARGUMENT
			}
			return devs[i], nvml.SUCCESS
		},
	}
}

func simulatedDevice(index int, total int64, ledger string) nvml.Device {
	held := func() ([]ledgerEntry, nvml.Return) {
		all, err := readLedger(ledger)
		if err != nil {
			return nil, nvml.ERROR_UNKNOWN
		}
		var mine []ledgerEntry
		for _, e := range all {
			if e.Card == index {
				mine = append(mine, e)
			}
		}
		return mine, nvml.SUCCESS
	}
	name := "Simulated GPU " + strings.ReplaceAll(plans.FormatSize(total), " ", "")
	return &mock.Device{
		GetIndexFunc: func() (int, nvml.Return) { return index, nvml.SUCCESS },
		GetUUIDFunc: func() (string, nvml.Return) {
			return fmt.Sprintf("GPU-51a1a7ed-0000-4000-8000-%012d", index), nvml.SUCCESS
		},
		GetNameFunc: func() (string, nvml.Return) { return name, nvml.SUCCESS },
		GetPciInfoFunc: func() (nvml.PciInfo, nvml.Return) {
			var p nvml.PciInfo
			for i, c := range fmt.Sprintf("00000000:%02X:00.0", index+1) {
				p.BusId[i] = int8(c)
			}
			return p, nvml.SUCCESS
		},
		GetMemoryInfoFunc: func() (nvml.Memory, nvml.Return) {
			es, ret := held()
			var used uint64
			for _, e := range es {
				used += uint64(e.Bytes)
			}
			free := uint64(0)
			if used < uint64(total) {
				free = uint64(total) - used
			}
			return nvml.Memory{Total: uint64(total), Used: used, Free: free}, ret
		},
		GetMigModeFunc: func() (int, int, nvml.Return) { return 0, 0, nvml.ERROR_NOT_SUPPORTED },
		// The card is as busy as its trainers' utilizations add up to, at most all of it
		// (their sim_gpu_util: see simtrain.py and the README, "Simulated trainers"); each
		// process as its own, scaled down by its share where they add up to more.
		GetUtilizationRatesFunc: func() (nvml.Utilization, nvml.Return) {
			es, ret := held()
			if len(es) == 0 {
				return nvml.Utilization{}, ret
			}
			return nvml.Utilization{Gpu: uint32(percent(min(1, sumUtil(es)))), Memory: 40}, ret
		},
		GetProcessUtilizationFunc: func(uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
			es, ret := held()
			if ret != nvml.SUCCESS || len(es) == 0 {
				return nil, cmpRet(ret, nvml.ERROR_NOT_FOUND)
			}
			share := 1 / max(1, sumUtil(es))
			out := make([]nvml.ProcessUtilizationSample, len(es))
			for i, e := range es {
				out[i] = nvml.ProcessUtilizationSample{Pid: uint32(e.PID), SmUtil: uint32(percent(e.Util * share))}
			}
			return out, nvml.SUCCESS
		},
		// The card's utilization as it is now, a sample a second since lastSeen (at most
		// half a minute back): a simulated trainer keeps its card as busy all along.
		GetSamplesFunc: func(typ nvml.SamplingType, lastSeen uint64) (nvml.ValueType, []nvml.Sample, nvml.Return) {
			es, ret := held()
			if ret != nvml.SUCCESS || typ != nvml.GPU_UTILIZATION_SAMPLES {
				return nvml.VALUE_TYPE_UNSIGNED_INT, nil, cmpRet(ret, nvml.ERROR_NOT_SUPPORTED)
			}
			return nvml.VALUE_TYPE_UNSIGNED_INT, everySecond(lastSeen, time.Now(), uint32(percent(min(1, sumUtil(es))))), nvml.SUCCESS
		},
		GetTemperatureFunc: func(nvml.TemperatureSensors) (uint32, nvml.Return) {
			es, ret := held()
			return uint32(34 + 8*min(len(es), 5)), ret
		},
		GetMPSComputeRunningProcessesFunc: func() ([]nvml.ProcessInfo, nvml.Return) {
			return nil, nvml.ERROR_NOT_SUPPORTED
		},
		GetComputeRunningProcessesFunc: func() ([]nvml.ProcessInfo, nvml.Return) {
			es, ret := held()
			out := make([]nvml.ProcessInfo, len(es))
			for i, e := range es {
				out[i] = nvml.ProcessInfo{Pid: uint32(e.PID), UsedGpuMemory: uint64(e.Bytes)}
			}
			return out, ret
		},
	}
}

// everySecond is a sample of value a second, the last at now, back to (not at) lastSeen
// (µs since the epoch, as NVML's), at most utilWindow back.
func everySecond(lastSeen uint64, now time.Time, value uint32) []nvml.Sample {
	var out []nvml.Sample
	for t := now; now.Sub(t) < utilWindow && t.UnixMicro() > int64(lastSeen); t = t.Add(-time.Second) {
		s := nvml.Sample{TimeStamp: uint64(t.UnixMicro())}
		binary.NativeEndian.PutUint32(s.SampleValue[:4], value)
		out = append(out, s)
	}
	slices.Reverse(out)
	return out
}

// sumUtil is what a card's processes ask of its compute together.
func sumUtil(es []ledgerEntry) float64 {
	var u float64
	for _, e := range es {
		u += e.Util
	}
	return u
}

// percent is a share as NVML gives one: a whole percentage.
func percent(x float64) int { return int(math.Round(100 * x)) }

// cmpRet is ret, or or where ret is a success that found nothing.
func cmpRet(ret, or nvml.Return) nvml.Return {
	if ret == nvml.SUCCESS {
		return or
	}
	return ret
}
