package launcher

import (
	"bytes"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
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

var (
	ansi = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][A-Z0-9]`)
	})
	// allocConfRefused is PyTorch before 2.1 refusing the expandable_segments option
	// gpuq sets by default (REFERENCE.md §6).
	allocConfRefused = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`Unrecognized CachingAllocator option: expandable_segments`)
	})
)

// Classify decides how an attempt ended from its exit and the tail of its output. An
// out-of-memory text counts only with a failing exit: a trainer that caught the error
// and recovered (accelerate's find_executable_batch_size) succeeded. Only the end of the
// output decides (see decisive): a trainer that caught an OOM, went on, and later died
// of something else failed. Where several texts match there, the last one is the error
// that ended the process. A text that is an OOM only on a nearly full card comes back
// Failed with its facts, Likely set, for the engine to judge.
func Classify(e Exit, tail []byte) (plans.Outcome, *plans.OOMFacts) {
	return classify(e, tail, hostPlatform)
}

// classify is Classify on the machine platform says (asked only when it matters).
func classify(e Exit, tail []byte, platform func() Platform) (plans.Outcome, *plans.OOMFacts) {
	switch {
	case e.Cancelled:
		return plans.Cancelled, nil
	case e.Code == 0 && e.Signal == 0:
		return plans.Success, nil
	}
	text := decisive(normalize(tail))
	if allocConfRefused().Match(text) {
		return plans.AllocConfRefused, nil
	}
	m := lastMatch(text)
	if m == nil {
		if !diedOfSIGKILL(e) {
			return plans.Failed, nil
		}
		m = &match{sig: &exitSIGKILL}
	}
	facts := parseFacts(text[m.at:])
	facts.Signature = m.sig.name
	facts.ExitSignalKilled = e.Signal == syscall.SIGKILL
	switch m.sig.kind {
	case likelyGPUOOM:
		facts.Likely = true
		return plans.Failed, facts
	case hostOOM:
		return plans.HostOOM, facts
	case killed:
		// A SIGKILL while the kernel, which counts every OOM kill, counted none was
		// someone else's doing.
		if e.OOMKill == KernelNoKill {
			return plans.Failed, nil
		}
		return plans.HostOOM, facts
	}
	if m.sig.name == "cuda-driver" && !platform().ExpandableSegments() {
		return plans.Failed, nil
	}
	facts.Loading = loading(text[:m.at])
	return plans.GPUOOM, facts
}

// loading reports whether the traceback that text ends in (the one an out-of-memory
// text closes) ran out while putting a model on the card: one of its frames moves or
// loads a model (see loadFrames), and none runs a batch (batchFuncs).
func loading(text []byte) bool {
	i := bytes.LastIndex(text, []byte(tracebackHeader))
	if i < 0 {
		return false
	}
	found := false
	for _, m := range frame().FindAllSubmatch(text[i:], -1) {
		file, fn := string(m[1])+string(m[3]), string(m[2])+string(m[4])
		if slices.Contains(batchFuncs, fn) {
			return false
		}
		file = strings.ReplaceAll(file, `\`, "/")
		for _, f := range loadFrames {
			found = found || strings.HasSuffix(file, f.file) && slices.Contains(f.funcs, fn)
		}
	}
	return found
}

// frame matches a traceback's frame, as Python prints it or rich draws it: its file
// and its function.
var frame = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`File "([^"]+)", line \d+, in (\S+)|([^\s"│]+\.py):\d+ in (\w+)`)
})

// loadFrames are the functions that put a model's weights on the card, by the file
// they are in: nn.Module's .to(), .cuda() and the like (all through _apply), from there
// Trainer's and accelerate's moves; transformers' from_pretrained, accelerate's
// dispatch of a device map; torch.load onto the card (a checkpoint, with an
// optimizer's state). What they allocate does not depend on the batch.
var loadFrames = []struct {
	file  string
	funcs []string
}{
	{"torch/nn/modules/module.py", []string{"_apply", "to", "cuda", "half", "bfloat16", "float", "to_empty"}},
	{"transformers/modeling_utils.py", []string{"from_pretrained", "_load_pretrained_model", "_load_state_dict_into_meta_model"}},
	{"transformers/trainer.py", []string{"_move_model_to_device"}},
	{"accelerate/utils/modeling.py", []string{"set_module_tensor_to_device"}},
	{"accelerate/big_modeling.py", []string{"dispatch_model", "load_checkpoint_and_dispatch"}},
	{"torch/serialization.py", []string{"load"}},
}

// batchFuncs are the functions of a traceback that runs a batch (a module called, a
// backward pass, an optimizer's step, generation) or that comes after batches have run
// (an evaluation, the best model loaded at the end: Trainer's and Lightning's): a model
// loaded from inside one may share the card with what a batch left, which a smaller
// batch would lower.
var batchFuncs = []string{"forward", "_call_impl", "_wrapped_call_impl", "backward", "run_backward", "_engine_run_backward",
	"step", "training_step", "train_step", "generate", "evaluate", "evaluation_loop", "prediction_step",
	"_maybe_log_save_evaluate", "_load_best_model", "validation_step", "test_step", "predict_step"}

// exitSIGKILL is the signature of a process that printed nothing of its end and died
// of SIGKILL, or whose shell or Python launcher passed a child's SIGKILL on as its
// status: 137 (128+9), or 247 (sys.exit(-9), as deepspeed's launcher does).
var exitSIGKILL = signature{name: "sigkill", kind: killed}

func diedOfSIGKILL(e Exit) bool {
	return e.Signal == syscall.SIGKILL || e.Code == 137 || e.Code == 247
}

// normalize drops ANSI colours and the carriage returns a pty puts before each newline.
func normalize(tail []byte) []byte {
	return bytes.ReplaceAll(ansi().ReplaceAll(tail, nil), []byte("\r\n"), []byte("\n"))
}

const (
	tracebackHeader = "Traceback (most recent call last)"
	directCause     = "The above exception was the direct cause of the following exception"
	// lastLines is how much of an output without a traceback decides.
	lastLines = 20
	// rootCause starts the part of torchrun's report about the worker that failed
	// first; the failures listed before it include the workers torchrun killed.
	rootCause = "Root Cause"
)

// pointer is a traceback that says the error is elsewhere: torchrun's report that a
// worker failed (ChildFailedError, also under accelerate and deepspeed), a launcher's
// CalledProcessError, vLLM's "See root cause above". It follows the worker's own.
var pointer = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`ChildFailedError|CalledProcessError|[Rr]oot cause`)
})

// decisive is the part of an output that says how the process ended: the last Python
// traceback, with the ones it was raised from (raise ... from), and the lines just above
// it that say how it failed (a DataLoader worker's bus error, THCudaCheck, torchrun's
// "failed (exitcode: -9)"); or, with no traceback, the last lines. A pointer is not
// that traceback: the one before it is, and the pointer's own verdict on the worker
// (torchrun's root cause) comes last, as the error that ended the process.
func decisive(text []byte) []byte {
	text = withoutOtherFailures(text)
	var reports [][]byte
	end := len(text)
	for {
		i := bytes.LastIndex(text[:end], []byte(tracebackHeader))
		if i < 0 {
			return join(tail(text[:end], lastLines), reports)
		}
		if pointer().Match(text[i:end]) {
			reports = append(reports, reportOf(text[i:end]))
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
		from := lineStart(text, i)
		if !plainError(text[i:end]) {
			from = preamble(text, from)
		}
		return join(text[from:end], reports)
	}
}

// plainErrorRe is a traceback's exception that a program's own mistake raises (a
// missing key, a bad value, a failed assertion), never a failing allocation or device:
// it says how the process ended by itself.
var plainErrorRe = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^(?:\[rank\d+\]:\s*)?(?:\w+\.)*(?:KeyError|ValueError|TypeError|IndexError|AttributeError|NameError|` +
		`AssertionError|ZeroDivisionError|FileNotFoundError|ImportError|ModuleNotFoundError|NotImplementedError|` +
		`UnboundLocalError|SyntaxError|IndentationError|JSONDecodeError|PermissionError|IsADirectoryError|NotADirectoryError)(?::|$)`)
})

// plainError says whether a traceback ends in such an exception: then the lines above
// it (a caught OOM it had logged and gone on from) do not say how the process ended.
func plainError(tb []byte) bool {
	return plainErrorRe().Match(bytes.TrimSpace(tail(tb, 1)))
}

// withoutOtherFailures drops from torchrun's last report the workers that failed after
// the first (its root cause), such as those it killed itself: what is kept of an output
// may begin inside that report, past its traceback.
func withoutOtherFailures(text []byte) []byte {
	root := bytes.LastIndex(text, []byte(rootCause))
	if root < 0 {
		return text
	}
	others := bytes.LastIndex(text[:root], []byte("\nFailures:"))
	if others < 0 || bytes.Contains(text[others:root], []byte(tracebackHeader)) {
		return text
	}
	return append(append([]byte(nil), text[:others+1]...), text[root:]...)
}

// reportOf is what a pointer says of the worker: torchrun's root cause, or the last
// lines (CalledProcessError's "died with <Signals.SIGKILL: 9>").
func reportOf(t []byte) []byte {
	if i := bytes.LastIndex(t, []byte(rootCause)); i >= 0 {
		return t[i:]
	}
	return tail(t, 3)
}

// join puts the reports after text in the order found, the outermost first: the one
// nearest the worker speaks last.
func join(text []byte, reports [][]byte) []byte {
	out := append([]byte(nil), text...)
	for _, r := range reports {
		out = append(append(out, '\n'), r...)
	}
	return out
}

// preamble returns where the lines just above the line at start begin that say how
// the process failed: those a signature matches, up to a line that no signature does.
func preamble(text []byte, start int) int {
	for n := 0; start > 0 && n < lastLines; n++ {
		prev := lineStart(text, start-1)
		line := text[prev:start]
		if len(bytes.TrimSpace(line)) > 0 && lastMatch(line) == nil {
			break
		}
		start = prev
	}
	return start
}

// lineStart is where the line holding the byte at begins.
func lineStart(text []byte, at int) int {
	return bytes.LastIndexByte(text[:at], '\n') + 1
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

// factRes are the patterns parseFacts reads, compiled at their first use.
type factRes struct {
	tried, capacity, free, this, other, allocated, unalloc, old, oldRes, xlaBytes, hostBytes, vllm *regexp.Regexp
	asyncAllocated, asyncRequested, asyncLimit, asyncFree                                          *regexp.Regexp
}

var factREs = sync.OnceValue(func() *factRes {
	return &factRes{
		tried:     regexp.MustCompile(`Tried to allocate ` + size),
		capacity:  regexp.MustCompile(`GPU (\d*) has a total capac\w* of ` + size),
		free:      regexp.MustCompile(`of which ` + size + ` is free`),
		this:      regexp.MustCompile(`this process has ` + size + ` memory in use`),
		other:     regexp.MustCompile(`Process (\d+) has ` + size + ` memory in use`),
		allocated: regexp.MustCompile(`Of the allocated memory ` + size + ` is allocated by PyTorch`),
		unalloc:   regexp.MustCompile(size + ` is reserved by PyTorch but unallocated`),
		// PyTorch 1.x: (GPU 0; 7.93 GiB total capacity; 130.35 MiB already allocated; 47.06 MiB free; 188.00 MiB reserved in total by PyTorch)
		old:       regexp.MustCompile(`\(GPU (\d+); ` + size + ` total capacity; ` + size + ` already allocated; ` + size + ` free`),
		oldRes:    regexp.MustCompile(size + ` (?:reserved in total by PyTorch|cached)`),
		xlaBytes:  regexp.MustCompile(`trying to allocate (\d+) bytes`),
		hostBytes: regexp.MustCompile(`you tried to allocate (\d+) bytes`),
		// cudaMallocAsync (c10/cuda/CUDAMallocAsyncAllocator.cpp): one "name : size" a line.
		asyncAllocated: regexp.MustCompile(`Currently allocated\s*: ` + size),
		asyncRequested: regexp.MustCompile(`Requested\s*: ` + size),
		asyncLimit:     regexp.MustCompile(`Device limit\s*: ` + size),
		asyncFree:      regexp.MustCompile(`Free \(according to CUDA\)\s*: ` + size),
		// vLLM: Free memory on device (31.44/47.38 GiB) on startup is less than desired GPU memory utilization (0.95, 45.01 GiB).
		vllm: regexp.MustCompile(`Free memory on device[^(]*\((\d+(?:\.\d+)?)/(\d+(?:\.\d+)?) GiB\) on startup is less than desired GPU memory utilization \([\d.]+, (\d+(?:\.\d+)?) GiB\)`),
	}
})

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
	s, re := string(t), factREs()
	parseTorch(f, s, re)
	if m := re.old.FindStringSubmatch(s); m != nil {
		f.Device, _ = strconv.Atoi(m[1])
		f.TotalBytes = bytesOf(m[2], m[3])
		f.AllocatedBytes = bytesOf(m[4], m[5])
		f.FreeBytes = bytesOf(m[6], m[7])
		if r := re.oldRes.FindStringSubmatch(s); r != nil {
			f.ReservedUnusedB = max(0, bytesOf(r[1], r[2])-f.AllocatedBytes)
		}
	}
	for _, p := range []struct {
		field *int64
		re    *regexp.Regexp
	}{{&f.ProcessBytes, re.asyncAllocated}, {&f.TriedBytes, re.asyncRequested}, {&f.TotalBytes, re.asyncLimit}, {&f.FreeBytes, re.asyncFree}} {
		if m := p.re.FindStringSubmatch(s); m != nil && *p.field == 0 {
			*p.field = bytesOf(m[1], m[2])
		}
	}
	if m := re.vllm.FindStringSubmatch(s); m != nil {
		// What vLLM asked for is what the job needs at startup.
		f.FreeBytes, f.TotalBytes, f.TriedBytes = bytesOf(m[1], "GiB"), bytesOf(m[2], "GiB"), bytesOf(m[3], "GiB")
	}
	for _, r := range []*regexp.Regexp{re.xlaBytes, re.hostBytes} {
		if m := r.FindStringSubmatch(s); m != nil && f.TriedBytes == 0 {
			n, _ := strconv.ParseInt(m[1], 10, 64)
			f.TriedBytes = n
		}
	}
	return f
}

// parseTorch reads PyTorch's message from 2.1 on.
func parseTorch(f *plans.OOMFacts, s string, re *factRes) {
	if m := re.tried.FindStringSubmatch(s); m != nil {
		f.TriedBytes = bytesOf(m[1], m[2])
	}
	if m := re.capacity.FindStringSubmatch(s); m != nil {
		if d, err := strconv.Atoi(m[1]); err == nil { // some builds print no ordinal: "GPU  has"
			f.Device = d
		}
		f.TotalBytes = bytesOf(m[2], m[3])
	}
	if m := re.free.FindStringSubmatch(s); m != nil {
		f.FreeBytes = bytesOf(m[1], m[2])
	}
	if m := re.this.FindStringSubmatch(s); m != nil {
		f.ProcessBytes = bytesOf(m[1], m[2])
	}
	for _, m := range re.other.FindAllStringSubmatch(s, -1) {
		pid, _ := strconv.Atoi(m[1])
		f.Others = append(f.Others, plans.ProcessUse{PID: pid, Bytes: bytesOf(m[2], m[3])})
	}
	// PyTorch says "this process" only of the process whose pid is its own getpid().
	// Where none is, NVML gave host pids to a trainer in a container, and the trainer is
	// one of the processes named: the one, if one is; else which cannot be told.
	if f.ProcessBytes == 0 && len(f.Others) > 0 && !re.this.MatchString(s) {
		if len(f.Others) == 1 {
			f.ProcessBytes, f.Others = f.Others[0].Bytes, nil
		} else {
			f.SelfAmongOthers = true
		}
	}
	if m := re.allocated.FindStringSubmatch(s); m != nil {
		f.AllocatedBytes = bytesOf(m[1], m[2])
	}
	if m := re.unalloc.FindStringSubmatch(s); m != nil {
		f.ReservedUnusedB = bytesOf(m[1], m[2])
	}
}
