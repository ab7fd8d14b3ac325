package launcher

// The texts that say a process ran out of memory, from the sources that print them
// (REFERENCE.md §1, §6): kept apart by what each means for the retry.

import (
	"bytes"
	"regexp"
	"sync"
)

// kind is what a text says ran out.
type kind int

const (
	// gpuOOM: an accelerator's memory ran out.
	gpuOOM kind = iota + 1
	// likelyGPUOOM: an out-of-memory only if the card was nearly full, which the
	// engine knows and the launcher does not.
	likelyGPUOOM
	// hostOOM: host RAM (or its shared memory) ran out: an allocation failed, or the
	// kernel or Slurm said it killed for memory.
	hostOOM
	// killed: a process of the job died of SIGKILL, as a launcher or shell reports it.
	// Nothing but the OOM killer sends SIGKILL to a trainer that gpuq did not stop,
	// unless the kernel's own count says no OOM kill happened.
	killed
)

// A signature is a text that says how a process ran out of memory.
type signature struct {
	name string
	kind kind
	re   string
	// unless: a line holding one of these is not this signature's, though it matches.
	unless [][]byte
}

// signatures are tried in this order; where two match on the same line, the first
// wins.
var signatures = []signature{
	// PyTorch's caching allocator (c10/cuda/CUDACachingAllocator.cpp), ROCm and XPU.
	{name: "torch", kind: gpuOOM, re: `(?:CUDA|HIP|XPU) out of memory\.`},
	// PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync (c10/cuda/CUDAMallocAsyncAllocator.cpp).
	{name: "cuda-malloc-async", kind: gpuOOM, re: `would exceed allowed memory`},
	// The same error by its type alone, where the message was cut: PyTorch 1.13+, CuPy.
	{name: "torch-oom-error", kind: gpuOOM, re: `\b(?:torch(?:\.cuda)?|cupy\.cuda\.memory)\.OutOfMemoryError\b`},
	// The OOM path failing inside NVML (pytorch issues 122068, 121899).
	{name: "torch-nvml-assert", kind: gpuOOM, re: `NVML_SUCCESS == r INTERNAL ASSERT FAILED`},
	{name: "cuda-runtime", kind: gpuOOM, re: `CUDA error: out of memory`},
	// The path PyTorch's expandable segments take; on WSL2 and Jetson, where they are
	// not supported, not an out-of-memory (see Platform).
	{name: "cuda-driver", kind: gpuOOM, re: `CUDA driver error: out of memory`},
	// The CUDA and HIP error codes by name, as libraries print them.
	{name: "cuda-error-code", kind: gpuOOM, re: `CUDA_ERROR_OUT_OF_MEMORY|cudaErrorMemoryAllocation|hipErrorOutOfMemory|HIP_ERROR_OutOfMemory`},
	{name: "cublas", kind: gpuOOM, re: `CUBLAS_STATUS_ALLOC_FAILED`},
	{name: "cudnn", kind: gpuOOM, re: `CUDNN_STATUS_ALLOC_FAILED`},
	{name: "cuda-library", kind: gpuOOM, re: `\bCU(?:FFT|SPARSE|SOLVER|RAND)_(?:STATUS_)?ALLOC(?:ATION)?_FAILED\b`},
	{name: "triton", kind: gpuOOM, re: `Triton Error \[CUDA\]: out of memory`},
	{name: "nccl", kind: gpuOOM, re: `Cuda failure (?:\d+ )?'out of memory'|Failed to CUDA calloc`},
	// XLA (JAX, TensorFlow, PyTorch/XLA) and TensorFlow: the BFC allocator, the
	// device allocators and TPU compilation. A kernel's on-chip scratch (TPU vmem,
	// smem) is a tiling limit, like Triton's shared memory: no smaller batch mends it.
	{name: "xla", kind: gpuOOM, re: `RESOURCE_EXHAUSTED: Out of memory while trying to allocate`},
	// TensorFlow says "Resource exhausted" also of the host: a tensor on the CPU device,
	// a py_function's MemoryError (see tensorflow-cpu, memory-error).
	{name: "resource-exhausted", kind: gpuOOM, re: `(?i)resource[ _]?exhausted\b[^\n]*?(?:memory|alloc|\bOOM\b)`,
		unless: [][]byte{[]byte("host memory"), []byte("memory space vmem"), []byte("memory space smem"), tfCPUDevice, []byte("MemoryError")}},
	{name: "tensorflow", kind: gpuOOM, re: `OOM when allocating tensor`, unless: [][]byte{tfCPUDevice}},
	// XLA's and CuPy's allocators.
	{name: "out-of-memory-allocating", kind: gpuOOM, re: `(?i)out of memory (?:allocating|to allocate)`},
	{name: "bitsandbytes", kind: gpuOOM, re: `Error out of memory at line \d+ in file`},
	{name: "mps", kind: gpuOOM, re: `MPS backend out of memory`},
	// vLLM finds at startup that the card lacks what gpu_memory_utilization asks, or
	// that what is left after the weights holds no KV cache (vllm/v1/worker/gpu_worker.py,
	// vllm/v1/core/kv_cache_utils.py, vllm/worker/worker.py).
	{name: "vllm", kind: gpuOOM, re: `less than desired GPU memory utilization|No available memory for the cache blocks|maximum number of tokens that can be stored in KV cache|larger than the available KV cache memory`},
	// accelerate's find_executable_batch_size ran out of batch sizes to try, each an OOM.
	{name: "accelerate", kind: gpuOOM, re: `No executable batch size found, reached zero`},
	// The many libraries that say a device ran out of memory in words of their own
	// ("cuda failed with error 2 out of memory", "pycuda._driver.MemoryError: cuMemAlloc
	// failed: out of memory"): see lastGenericGPU.
	{name: "gpu-out-of-memory", kind: gpuOOM},

	// cuBLAS cannot create its handle, cuDNN finds no algorithm whose workspace fits:
	// most often for want of memory, but also a broken install.
	{name: "cublas-not-initialized", kind: likelyGPUOOM, re: `CUBLAS_STATUS_NOT_INITIALIZED`},
	{name: "cudnn-no-algorithm", kind: likelyGPUOOM, re: `Unable to find a valid cuDNN algorithm`},

	// PyTorch's CPU allocator (c10/core/impl/alloc_cpu.cpp): "can't allocate memory" on
	// Linux, "not enough memory" on Windows; before it, TH's (TH/THGeneral.cpp):
	// "$ Torch: not enough memory: you tried to allocate 2GB. Buy new RAM!".
	{name: "cpu-allocator", kind: hostOOM, re: `(?:DefaultCPUAllocator|\$ Torch): (?:can't allocate memory|not enough memory)`},
	// TensorFlow's allocator for a tensor placed on the CPU device.
	{name: "tensorflow-cpu", kind: hostOOM, re: `OOM when allocating tensor[^\n]*/device:CPU:\d`},
	// Python's and NumPy's MemoryError, C++'s bad_alloc, and ENOMEM's strerror (fork,
	// mmap).
	{name: "memory-error", kind: hostOOM, re: `(?m)(?:^|[\s.:])(?:_Array)?MemoryError(?::|$)`},
	{name: "numpy", kind: hostOOM, re: `Unable to allocate [\d.]+ [KMGTPE]?i?B for an array`},
	{name: "bad-alloc", kind: hostOOM, re: `std::bad_alloc`},
	{name: "enomem", kind: hostOOM, re: `Cannot allocate memory|\[Errno 12\]`},
	// Windows' commit limit (RAM and page file) reached, in whatever language Windows
	// speaks: each spawned DataLoader worker maps torch's libraries, so fewer workers
	// mend it.
	{name: "windows-commit-limit", kind: hostOOM, re: `\[WinError 1455\]|\(os error 1455\)`},
	// DataLoader workers out of shared memory (torch/utils/data/_utils/signal_handling.py,
	// torch/csrc/DataLoader.cpp), or /dev/shm full: a tensor's file there cannot be
	// written (older PyTorch gives no reason).
	{name: "shm", kind: hostOOM, re: `insufficient shared memory|killed by signal: Bus error|out of shared memory|unable to write to file </torch_|</torch_[^>]*>[^\n]*No space left on device`},
	{name: "xla-host", kind: hostOOM, re: `Out of host memory`},
	// The kernel's and Slurm's own words for an OOM kill.
	{name: "kernel-oom-kill", kind: hostOOM, re: `Out of memory: Kill(?:ed)? process|invoked oom-killer|\boom-kill:`},
	{name: "slurm-oom-kill", kind: hostOOM, re: `oom[-_]kill events?\b|tasks? [\d,-]+: Out Of Memory|(?i:exceeded (?:job )?memory limit)`},
	// Ray's memory monitor, of a task and, in the raylet's summary, of its workers.
	{name: "ray-oom", kind: hostOOM, re: `killed due to the node running low on memory|killed due to memory pressure \(OOM\)`},

	// A launcher or shell reporting a child's SIGKILL: a status of -9 (Python's), 137
	// (a shell's 128+9) or 247 (-9 in 8 bits, a Python launcher's sys.exit(-9)) ...
	{name: "killed-status", kind: killed, re: `(?i)\b(?:exit ?code|exit status|return ?code)\s*(?:[:=]|is)?\s*(?:-9|137|247)\b`},
	// ... torchrun's, subprocess's, mp.spawn's, DataLoader's, fish's, MPI's words for it ...
	{name: "dataloader-killed", kind: killed, re: `DataLoader worker \(pid\(?s?\)? [\d, ]+\) is killed by signal: Killed`},
	{name: "sigkill", kind: killed, re: `Signal 9 \(SIGKILL\)|<Signals\.SIGKILL: 9>|(?:terminated|killed) (?:with|by) signal:? (?:SIGKILL|Killed)|exited on signal 9\b|EXIT CODE: 9\b`},
	// ... and bash's and zsh's: "Killed", alone or before the command it ran, also
	// right after a progress bar that ended without a newline.
	{name: "shell-killed", kind: killed, re: `(?m)(?:^|[\s\])>|])(?:Killed(?:: 9)?|zsh: killed)(?: {2,}\S.*)?$`},
}

// tfCPUDevice names TensorFlow's CPU device in an out-of-memory line: the host's RAM ran
// out, not a card's.
var tfCPUDevice = []byte("/device:CPU:")

// compiledSignature is a signature ready to match.
type compiledSignature struct {
	*signature
	re *regexp.Regexp
}

// compiled compiles the signatures at their first use, not at package init: every
// supervisor links this package, and only an attempt's end needs them. The one without
// a pattern is gpu-out-of-memory, a rule on lines (lastGenericGPU).
var compiled = sync.OnceValue(func() []compiledSignature {
	out := make([]compiledSignature, len(signatures))
	for i := range signatures {
		out[i].signature = &signatures[i]
		if signatures[i].re != "" {
			out[i].re = regexp.MustCompile(signatures[i].re)
		}
	}
	return out
})

// The words of gpu-out-of-memory: a line that says "out of memory", names a device, and
// says it is an error. vLLM's advice "If you are running out of memory, consider ..."
// is neither an error nor an "out of memory" on its own.
var (
	outOfMemory  = []byte("out of memory")
	deviceWords  = [][]byte{[]byte("cuda"), []byte("gpu"), []byte("device"), []byte("hip"), []byte("nccl"), []byte("cudnn"), []byte("cublas"), []byte("triton"), []byte("mps")}
	errorWords   = [][]byte{[]byte("error"), []byte("fail"), []byte("exception"), []byte("unable"), []byte("cannot")}
	adviceBefore = []byte("running ")
)

// a match is a signature and the start of the line it matched.
type match struct {
	sig *signature
	at  int
}

// lastMatch returns the signature that matches on the last line of text that one
// matches, or nil: where several texts match, the last is the error that ended the
// process. On that line, the first signature in the table wins: the cause before the
// words it ends with ("... Error code 12 (Cannot allocate memory)").
func lastMatch(text []byte) *match {
	var found *match
	for _, s := range compiled() {
		if s.re == nil {
			if at := lastGenericGPU(text); at >= 0 && (found == nil || at > found.at) {
				found = &match{s.signature, at}
			}
			continue
		}
		for _, m := range s.re.FindAllIndex(text, -1) {
			if at := lineStart(text, m[0]); (found == nil || at > found.at) && !s.excluded(text, m[0]) {
				found = &match{s.signature, at}
			}
		}
	}
	return found
}

// excluded reports whether the line around at holds one of s.unless.
func (s *signature) excluded(text []byte, at int) bool {
	line := lineAround(text, at)
	for _, u := range s.unless {
		if bytes.Contains(line, u) {
			return true
		}
	}
	return false
}

// lastGenericGPU returns the start of the last line that says a device's error is
// "out of memory", or -1.
func lastGenericGPU(text []byte) int {
	lower := bytes.ToLower(text)
	for end := len(lower); end > 0; {
		i := bytes.LastIndex(lower[:end], outOfMemory)
		if i < 0 {
			return -1
		}
		start := lineStart(lower, i)
		line := lineAround(lower, i)
		if !bytes.HasSuffix(lower[:i], adviceBefore) && containsAny(line, deviceWords) && containsAny(line, errorWords) {
			return start
		}
		end = start
	}
	return -1
}

// lineAround is the line of text that holds the byte at.
func lineAround(text []byte, at int) []byte {
	start := lineStart(text, at)
	end := bytes.IndexByte(text[at:], '\n')
	if end < 0 {
		return text[start:]
	}
	return text[start : at+end]
}

func containsAny(s []byte, words [][]byte) bool {
	for _, w := range words {
		if bytes.Contains(s, w) {
			return true
		}
	}
	return false
}
