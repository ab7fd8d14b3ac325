package launcher

import (
	"bytes"
	"regexp"
	"strconv"
	"syscall"

	"github.com/gpuq/gpuq/plans"
)

// Exit is how an attempt's process ended.
type Exit struct {
	Code      int            // exit status; -1 when killed by a signal
	Signal    syscall.Signal // 0 unless killed by a signal
	Cancelled bool           // gpuq stopped it
	// OOMKill is what the kernel counted of OOM kills while it ran.
	OOMKill KernelOOM
}

// A signature is a text that says a process ran out of memory (REFERENCE.md §1, §6).
type signature struct {
	name string
	host bool
	// likely: an out-of-memory only if the card was nearly full, which the engine
	// knows and the launcher does not.
	likely bool
	re     *regexp.Regexp
}

// cuDNN's CUDNN_STATUS_NOT_SUPPORTED is not among them: accelerate counts it as an OOM,
// but it is more often an input layout cuDNN cannot take, which no smaller batch mends.
var signatures = []signature{
	{"torch", false, false, regexp.MustCompile(`(?:CUDA|HIP|XPU) out of memory\.`)},
	{"torch-nvml-assert", false, false, regexp.MustCompile(`NVML_SUCCESS == r INTERNAL ASSERT FAILED`)},
	{"cuda-runtime", false, false, regexp.MustCompile(`CUDA error: out of memory`)},
	// The path PyTorch's expandable segments take.
	{"cuda-driver", false, false, regexp.MustCompile(`CUDA driver error: out of memory`)},
	{"triton", false, false, regexp.MustCompile(`Triton Error \[CUDA\]: out of memory`)},
	{"cublas", false, false, regexp.MustCompile(`CUBLAS_STATUS_ALLOC_FAILED`)},
	// cuBLAS cannot create its handle: most often for want of memory, but also a
	// broken install.
	{"cublas-not-initialized", false, true, regexp.MustCompile(`CUBLAS_STATUS_NOT_INITIALIZED`)},
	{"cudnn", false, false, regexp.MustCompile(`CUDNN_STATUS_ALLOC_FAILED`)},
	{"nccl", false, false, regexp.MustCompile(`Cuda failure (?:\d+ )?'out of memory'|Failed to CUDA calloc`)},
	{"xla", false, false, regexp.MustCompile(`RESOURCE_EXHAUSTED: Out of memory while trying to allocate`)},
	{"tensorflow", false, false, regexp.MustCompile(`OOM when allocating tensor`)},
	{"bitsandbytes", false, false, regexp.MustCompile(`Error out of memory at line \d+ in file`)},
	{"mps", false, false, regexp.MustCompile(`MPS backend out of memory`)},
	{"cpu-allocator", true, false, regexp.MustCompile(`DefaultCPUAllocator: can't allocate memory`)},
	{"dataloader-killed", true, false, regexp.MustCompile(`DataLoader worker \(pid \d+\) is killed by signal: Killed`)},
	{"shm", true, false, regexp.MustCompile(`insufficient shared memory \(shm\)`)},
	{"xla-host", true, false, regexp.MustCompile(`Out of host memory`)},
}

var ansi = regexp.MustCompile(`\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][A-Z0-9]`)

// allocConfRefused is PyTorch before 2.1 refusing the expandable_segments option gpuq
// sets by default (REFERENCE.md §6).
var allocConfRefused = regexp.MustCompile(`Unrecognized CachingAllocator option: expandable_segments`)

// Classify decides how an attempt ended from its exit and the tail of its output. An
// out-of-memory text counts only with a failing exit: a trainer that caught the error
// and recovered (accelerate's find_executable_batch_size) succeeded. Only the end of the
// output decides (see decisive): a trainer that caught an OOM, went on, and later died
// of something else failed. Where several texts match there, the last one is the error
// that ended the process. A text that is an OOM only on a nearly full card comes back
// Failed with its facts, Likely set, for the engine to judge.
func Classify(e Exit, tail []byte) (plans.Outcome, *plans.OOMFacts) {
	switch {
	case e.Cancelled:
		return plans.Cancelled, nil
	case e.Code == 0 && e.Signal == 0:
		return plans.Success, nil
	}
	text := decisive(ansi.ReplaceAll(tail, nil))
	if allocConfRefused.Match(text) {
		return plans.AllocConfRefused, nil
	}
	var found *signature
	last := -1
	for i := range signatures {
		for _, m := range signatures[i].re.FindAllIndex(text, -1) {
			if m[0] > last {
				last, found = m[0], &signatures[i]
			}
		}
	}
	if found == nil {
		// SIGKILL alone is not proof of the OOM killer; the kernel's count is.
		if e.Signal == syscall.SIGKILL && e.OOMKill == KernelKilled {
			return plans.HostOOM, &plans.OOMFacts{Signature: "cgroup-oom-kill", Device: -1, ExitSignalKilled: true}
		}
		return plans.Failed, nil
	}
	facts := parseFacts(text[last:])
	facts.Signature = found.name
	facts.ExitSignalKilled = e.Signal == syscall.SIGKILL
	switch {
	case found.likely:
		facts.Likely = true
		return plans.Failed, facts
	case found.host:
		return plans.HostOOM, facts
	}
	return plans.GPUOOM, facts
}

const (
	tracebackHeader = "Traceback (most recent call last)"
	directCause     = "The above exception was the direct cause of the following exception"
	// lastLines is how much of an output without a traceback decides.
	lastLines = 20
)

// launcherReport is how torchrun (and accelerate, deepspeed through it) and
// accelerate's simple launcher end when a worker failed: a traceback of their own,
// after the worker's.
var launcherReport = regexp.MustCompile(`ChildFailedError|subprocess\.CalledProcessError`)

// decisive is the part of an output that says how the process ended: the last Python
// traceback, with the ones it was raised from (raise ... from), but not a launcher's
// report that a worker failed, which follows the worker's own; or, with no traceback,
// the last lines.
func decisive(text []byte) []byte {
	end := len(text)
	for {
		i := bytes.LastIndex(text[:end], []byte(tracebackHeader))
		if i < 0 {
			return tail(text[:end], lastLines)
		}
		if launcherReport.Match(text[i:end]) {
			end = i
			continue
		}
		for {
			// The cause, if any, is the traceback before the line that says so.
			before := tail(text[:i], 3)
			j := bytes.LastIndex(text[:i], []byte(tracebackHeader))
			if j < 0 || !bytes.Contains(before, []byte(directCause)) {
				break
			}
			i = j
		}
		return text[i:end]
	}
}

// tail is the last n lines of text.
func tail(text []byte, n int) []byte {
	text = bytes.TrimRight(text, "\r\n ")
	i := len(text)
	for range n {
		j := bytes.LastIndexByte(text[:i], '\n')
		if j < 0 {
			return text
		}
		i = j
	}
	return text[i+1:]
}

const size = `(\d+(?:\.\d+)?) (bytes|KiB|MiB|GiB|TiB)`

var (
	reTried     = regexp.MustCompile(`Tried to allocate ` + size)
	reCapacity  = regexp.MustCompile(`GPU (\d*) has a total capac\w* of ` + size)
	reFree      = regexp.MustCompile(`of which ` + size + ` is free`)
	reThis      = regexp.MustCompile(`this process has ` + size + ` memory in use`)
	reOther     = regexp.MustCompile(`Process (\d+) has ` + size + ` memory in use`)
	reAllocated = regexp.MustCompile(`Of the allocated memory ` + size + ` is allocated by PyTorch`)
	reUnalloc   = regexp.MustCompile(size + ` is reserved by PyTorch but unallocated`)
	// PyTorch 1.x: (GPU 0; 7.93 GiB total capacity; 130.35 MiB already allocated; 47.06 MiB free; 188.00 MiB reserved in total by PyTorch)
	reOld       = regexp.MustCompile(`\(GPU (\d+); ` + size + ` total capacity; ` + size + ` already allocated; ` + size + ` free`)
	reOldRes    = regexp.MustCompile(size + ` (?:reserved in total by PyTorch|cached)`)
	reXLABytes  = regexp.MustCompile(`trying to allocate (\d+) bytes`)
	reHostBytes = regexp.MustCompile(`you tried to allocate (\d+) bytes`)
)

var units = map[string]float64{"bytes": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}

// notAvailable: PyTorch prints NVML's "not available" as 17179869184.00 GiB (2^64 bytes).
const notAvailable = 1 << 50

func bytesOf(num, unit string) int64 {
	v, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0
	}
	b := v * units[unit]
	if b >= notAvailable {
		return 0
	}
	return int64(b)
}

// parseFacts reads what a message says; a message cut off midway gives what it got to.
func parseFacts(t []byte) *plans.OOMFacts {
	f := &plans.OOMFacts{Device: -1}
	s := string(t)
	if m := reTried.FindStringSubmatch(s); m != nil {
		f.TriedBytes = bytesOf(m[1], m[2])
	}
	if m := reCapacity.FindStringSubmatch(s); m != nil {
		if d, err := strconv.Atoi(m[1]); err == nil { // some builds print no ordinal: "GPU  has"
			f.Device = d
		}
		f.TotalBytes = bytesOf(m[2], m[3])
	}
	if m := reFree.FindStringSubmatch(s); m != nil {
		f.FreeBytes = bytesOf(m[1], m[2])
	}
	if m := reThis.FindStringSubmatch(s); m != nil {
		f.ProcessBytes = bytesOf(m[1], m[2])
	}
	for _, m := range reOther.FindAllStringSubmatch(s, -1) {
		pid, _ := strconv.Atoi(m[1])
		f.Others = append(f.Others, plans.ProcessUse{PID: pid, Bytes: bytesOf(m[2], m[3])})
	}
	// PyTorch says "this process" only of the process whose pid is its own getpid().
	// Where none is, NVML gave host pids to a trainer in a container, and the trainer is
	// one of the processes named: the one, if one is; else which cannot be told.
	if f.ProcessBytes == 0 && len(f.Others) > 0 && !reThis.MatchString(s) {
		if len(f.Others) == 1 {
			f.ProcessBytes, f.Others = f.Others[0].Bytes, nil
		} else {
			f.SelfAmongOthers = true
		}
	}
	if m := reAllocated.FindStringSubmatch(s); m != nil {
		f.AllocatedBytes = bytesOf(m[1], m[2])
	}
	if m := reUnalloc.FindStringSubmatch(s); m != nil {
		f.ReservedUnusedB = bytesOf(m[1], m[2])
	}
	if m := reOld.FindStringSubmatch(s); m != nil {
		f.Device, _ = strconv.Atoi(m[1])
		f.TotalBytes = bytesOf(m[2], m[3])
		f.AllocatedBytes = bytesOf(m[4], m[5])
		f.FreeBytes = bytesOf(m[6], m[7])
		if r := reOldRes.FindStringSubmatch(s); r != nil {
			f.ReservedUnusedB = max(0, bytesOf(r[1], r[2])-f.AllocatedBytes)
		}
	}
	for _, re := range []*regexp.Regexp{reXLABytes, reHostBytes} {
		if m := re.FindStringSubmatch(s); m != nil && f.TriedBytes == 0 {
			n, _ := strconv.ParseInt(m[1], 10, 64)
			f.TriedBytes = n
		}
	}
	return f
}
