package launcher

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/gpuq/gpuq/plans"
)

var update = flag.Bool("update", false, "rewrite golden files")

// TestClassifyGolden classifies real message texts, from PyTorch 1.4 to 2.11 (that one
// from an H200 under make gpu-check), other frameworks and libraries, cut off and
// ANSI-coloured, each as the last output of a process that exited 1. Each .golden holds
// the outcome and the facts parsed.
func TestClassifyGolden(t *testing.T) {
	files, _ := filepath.Glob("testdata/oom/*.txt")
	if len(files) < 19 {
		t.Fatalf("only %d OOM texts", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			tail, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			outcome, facts := Classify(Exit{Code: 1}, tail)
			got, _ := json.MarshalIndent(struct {
				Outcome plans.Outcome   `json:"outcome"`
				Facts   *plans.OOMFacts `json:"facts"`
			}{outcome, facts}, "", "  ")
			got = append(got, '\n')
			golden := strings.TrimSuffix(f, ".txt") + ".golden"
			if *update {
				os.WriteFile(golden, got, 0o644)
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (go test -update writes it)", err)
			}
			if string(got) != string(want) {
				t.Errorf("got:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

func TestClassifyNeedsAFailingExit(t *testing.T) {
	oom := []byte("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB.")
	for _, tt := range []struct {
		exit Exit
		want plans.Outcome
	}{
		{Exit{Code: 0}, plans.Success},
		{Exit{Code: 1}, plans.GPUOOM},
		{Exit{Code: 1, Cancelled: true}, plans.Cancelled},
	} {
		if got, _ := Classify(tt.exit, oom); got != tt.want {
			t.Errorf("%+v: %s, want %s", tt.exit, got, tt.want)
		}
	}
}

// TestClassifySIGKILL: a SIGKILL gpuq did not send, of the trainer or, as a shell's
// status 137 or a Python launcher's 247 says, of its child, is the OOM killer's, unless
// the kernel counted no OOM kill while it ran.
func TestClassifySIGKILL(t *testing.T) {
	for _, tt := range []struct {
		exit Exit
		want plans.Outcome
	}{
		{Exit{Code: -1, Signal: syscall.SIGKILL}, plans.HostOOM},
		{Exit{Code: 137}, plans.HostOOM},
		{Exit{Code: 247}, plans.HostOOM},
		{Exit{Code: -1, Signal: syscall.SIGKILL, OOMKill: KernelKilled}, plans.HostOOM},
		{Exit{Code: -1, Signal: syscall.SIGKILL, OOMKill: KernelNoKill}, plans.Failed},
		{Exit{Code: 137, OOMKill: KernelNoKill}, plans.Failed},
		{Exit{Code: -1, Signal: syscall.SIGKILL, Cancelled: true}, plans.Cancelled},
		{Exit{Code: -1, Signal: syscall.SIGSEGV}, plans.Failed},
		{Exit{Code: 1, OOMKill: KernelKilled}, plans.Failed}, // another process's OOM kill
	} {
		if got, _ := Classify(tt.exit, []byte("step 10")); got != tt.want {
			t.Errorf("%+v: %s, want %s", tt.exit, got, tt.want)
		}
	}
	// What a launcher says of its worker counts the same, the kernel's count too.
	torchrun := []byte("E0325 20:57:27.620000 2606 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: -9) local_rank: 5 (pid: 2630) of binary: /usr/bin/python")
	if got, _ := Classify(Exit{Code: 1}, torchrun); got != plans.HostOOM {
		t.Errorf("torchrun's worker killed: %s, want host-oom", got)
	}
	if got, _ := Classify(Exit{Code: 1, OOMKill: KernelNoKill}, torchrun); got != plans.Failed {
		t.Errorf("torchrun's worker killed, no OOM kill counted: %s, want failed", got)
	}
	// A text that says memory ran out needs no kernel to say so.
	cpu := []byte("RuntimeError: [enforce fail at alloc_cpu.cpp:73] . DefaultCPUAllocator: can't allocate memory: you tried to allocate 1024 bytes. Error code 12 (Cannot allocate memory)")
	if got, _ := Classify(Exit{Code: 1, OOMKill: KernelNoKill}, cpu); got != plans.HostOOM {
		t.Errorf("the CPU allocator's failure: %s, want host-oom", got)
	}
}

// TestClassifyLaunchersAndShells: what decides is the worker's own end and the
// launcher's verdict on the worker that failed first, not the workers a launcher killed
// after it, nor a word that only looks like a shell's.
func TestClassifyLaunchersAndShells(t *testing.T) {
	const torchrun = `Traceback (most recent call last):
  File "/usr/bin/torchrun", line 8, in <module>
    sys.exit(main())
  File "/usr/lib/python3/site-packages/torch/distributed/launcher/api.py", line 263, in launch_agent
    raise ChildFailedError(
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
train.py FAILED
------------------------------------------------------------
Failures:
[1]:
  time      : 2024-05-01_10:00:02
  rank      : 1 (local_rank: 1)
  exitcode  : -9 (pid: 4102)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 4102
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2024-05-01_10:00:01
  rank      : 0 (local_rank: 0)
  exitcode  : %s (pid: 4101)
  error_file: <N/A>
  traceback : %s
============================================================
`
	const worker = "[rank0]: Traceback (most recent call last):\n[rank0]:   File \"train.py\", line 40, in <module>\n[rank0]: %s\n"
	report := func(code, tb string) string { return fmt.Sprintf(torchrun, code, tb) }
	enable := "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html"
	for _, tt := range []struct {
		name, text string
		want       plans.Outcome
	}{
		{"a worker's ValueError; torchrun killed the others", fmt.Sprintf(worker, "ValueError: bad lr") + report("1", enable), plans.Failed},
		{"a worker's CUDA OOM", fmt.Sprintf(worker, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.") + report("1", enable), plans.GPUOOM},
		{"the first worker killed", "step 3\n" + report("-9", "Signal 9 (SIGKILL) received by PID 4101"), plans.HostOOM},
		{"the report alone, its traceback cut off", report("1", enable)[strings.Index(report("1", enable), "====="):], plans.Failed},
		{"vLLM's engine core", "(EngineCore pid=7) ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.\n" +
			"(APIServer pid=1) Traceback (most recent call last):\n(APIServer pid=1)   File \"vllm/v1/engine/utils.py\", line 785, in wait_for_engine_startup\n" +
			"(APIServer pid=1) RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}\n", plans.GPUOOM},
		{"vLLM's advice, then another error", "INFO 07-25 model_runner.py:984] CUDA graphs can take additional 1~3 GiB memory per GPU. If you are running out of memory, consider decreasing `gpu_memory_utilization` or enforcing eager mode.\n" +
			"Traceback (most recent call last):\n  File \"serve.py\", line 3, in <module>\nKeyError: 'model'\n", plans.Failed},
		{"bash's report of a killed command", "epoch 3\ntrain.sh: line 12: 4321 Killed                  python train.py --lr 1e-4\n", plans.HostOOM},
		{"zsh's", "epoch 3\nzsh: killed     python train.py\n", plans.HostOOM},
		{"killed after a progress bar", " 33%|███▋      | 348/1063 [01:08<02:57,  4.03it/s]Killed\n", plans.HostOOM},
		{"a log line about killing", "Killed 3 stale workers\nepoch 4 done\nValueError: nan loss\n", plans.Failed},
		{"a shared memory file limit", "RuntimeError: unable to open shared memory object </torch_1_2> in read-write mode: Too many open files (24)\n", plans.Failed},
		{"Triton's shared memory", "triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 98304, Hardware limit: 65536.\n", plans.Failed},
		{"a device's MemoryError is the device's", "pycuda._driver.MemoryError: cuMemAlloc failed: out of memory\n", plans.GPUOOM},
		{"a TPU kernel's scratch memory", "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in memory space vmem.\n", plans.Failed},
	} {
		if got, _ := Classify(Exit{Code: 1}, []byte(tt.text)); got != tt.want {
			t.Errorf("%s: %s, want %s", tt.name, got, tt.want)
		}
	}
}

// TestClassifyWhoseMemory: the host's RAM ran out where the words name the host, even in
// a framework's words for a card's OOM (TensorFlow's CPU device, Ray's OutOfMemoryError),
// and not where a like text says something else. Lines from the reports cited.
func TestClassifyWhoseMemory(t *testing.T) {
	for _, tt := range []struct {
		name, text string
		want       plans.Outcome
	}{
		// thtrieu/darkflow#873
		{"TensorFlow's CPU device", "tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating tensor with shape[16,19,19,1024] and type float on /job:localhost/replica:0/task:0/device:CPU:0 by allocator cpu\n", plans.HostOOM},
		// tensorflow/tensorflow#45238
		{"TensorFlow relays a MemoryError", "W tensorflow/core/framework/op_kernel.cc:1751] Resource exhausted: MemoryError: Unable to allocate 184. MiB for an array with shape (64, 26, 26, 3, 371) and data type float32\n", plans.HostOOM},
		// tensorflow/models#5527: the card's OOM, then a node that receives on the CPU.
		{"TensorFlow's card, a CPU node after", "ResourceExhaustedError (see above for traceback): OOM when allocating tensor with shape[64,2016,9,9] and type float on /job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc\n" +
			"     [[Node: gradients/_12031 = _Recv[client_terminated=false, recv_device=\"/job:localhost/replica:0/task:0/device:CPU:0\", send_device=\"/job:localhost/replica:0/task:0/device:GPU:0\"]()]]\n", plans.GPUOOM},
		// shmsw25/single-hop-rc#2
		{"TH's CPU allocator", "RuntimeError: $ Torch: not enough memory: you tried to allocate 2GB. Buy new RAM! at /pytorch/aten/src/TH/THGeneral.cpp:201\n", plans.HostOOM},
		// cszn/KAIR#127, Comfy-Org/ComfyUI#8065, Comfy-Org/ComfyUI#989
		{"Windows' commit limit", "OSError: [WinError 1455] The paging file is too small for this operation to complete. Error loading \"D:\\envs\\lib\\site-packages\\torch\\lib\\shm.dll\" or one of its dependencies.\n", plans.HostOOM},
		{"Windows' commit limit, from Rust", "OSError: The paging file is too small for this operation to complete. (os error 1455)\n", plans.HostOOM},
		{"a library Windows cannot find", "OSError: [WinError 126] The specified module could not be found. Error loading \"C:\\torch\\lib\\caffe2_nvrtc.dll\" or one of its dependencies.\n", plans.Failed},
		// zylo117/Yet-Another-EfficientDet-Pytorch#147, idiap/ESLAM#20
		{"/dev/shm full, no reason given", "RuntimeError: unable to write to file </torch_74396_2983595444>\n", plans.HostOOM},
		{"/dev/shm full", "RuntimeError: unable to write to file </torch_31911_952036340_6686>: No space left on device (28)\n", plans.HostOOM},
		// WM-PO/WMPO#3, real-stanford/flingbot#11
		{"Ray's raylet", "(raylet) [2025-12-07 09:57:19,206 E 393463 393463] (raylet) node_manager.cc:3277: 2 Workers (tasks / actors) killed due to memory pressure (OOM), 0 Workers crashed due to other reasons at\n", plans.HostOOM},
		{"Ray's OutOfMemoryError", "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.\n", plans.HostOOM},
	} {
		if got, _ := Classify(Exit{Code: 1}, []byte(tt.text)); got != tt.want {
			t.Errorf("%s: %s, want %s", tt.name, got, tt.want)
		}
	}
}

// BenchmarkClassify classifies what the ring keeps of a long run (64 KiB) that torchrun
// ended after a worker ran out of memory, as every attempt's end is classified.
func BenchmarkClassify(b *testing.B) {
	var out bytes.Buffer
	for i := 0; out.Len() < 60<<10; i++ {
		fmt.Fprintf(&out, "[rank0]: step %d loss 1.%04d lr 3e-4 it/s 2.41 mem 21.3GiB\r\n", i, i)
	}
	out.WriteString("[rank0]: Traceback (most recent call last):\r\n[rank0]:   File \"train.py\", line 40, in <module>\r\n" +
		"[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.10 GiB of which 1.50 GiB is free.\r\n" +
		"E0101 00:00:00.000000 1 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: 1) local_rank: 0 (pid: 2) of binary: /usr/bin/python\r\n")
	tail := out.Bytes()
	b.ReportAllocs()
	for b.Loop() {
		if o, _ := Classify(Exit{Code: 1}, tail); o != plans.GPUOOM {
			b.Fatal(o)
		}
	}
}

// TestClassifyLoading: an OOM raised while the model's weights went onto the card (its
// traceback passes through Module.to, from_pretrained, a device map's dispatch,
// torch.load) says so; one raised while a batch ran (a module called, backward, an
// optimizer's step), or by a tensor the trainer moved itself, does not. The frames are
// laid out as PyTorch, transformers and rich print them (as in the reports of
// nkolot/SPIN#76, deepspeedai/DeepSpeed#4153, hiyouga/LlamaFactory#4559).
func TestClassifyLoading(t *testing.T) {
	const oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 23.52 GiB of which 1.10 GiB is free. Including non-PyTorch memory, this process has 22.40 GiB memory in use.\n"
	frame := func(file, fn, code string) string {
		return fmt.Sprintf("  File \"/venv/lib/python3.11/site-packages/%s\", line 10, in %s\n    %s\n", file, fn, code)
	}
	user := "Traceback (most recent call last):\n  File \"train.py\", line 40, in <module>\n    main()\n"
	to := frame("torch/nn/modules/module.py", "to", "return self._apply(convert)") +
		frame("torch/nn/modules/module.py", "_apply", "module._apply(fn)") +
		frame("torch/nn/modules/module.py", "convert", "return t.to(device)")
	for _, tt := range []struct {
		name, tail string
		want       bool
	}{
		{"Module.to", user + to + oom, true},
		{"Trainer moves the model", user + frame("transformers/trainer.py", "__init__", "self._move_model_to_device(model, args.device)") +
			frame("transformers/trainer.py", "_move_model_to_device", "model = model.to(device)") + to + oom, true},
		{"from_pretrained under torchrun", prefixed("[rank2]: ", user+frame("transformers/modeling_utils.py", "from_pretrained", ") = cls._load_pretrained_model(")+
			frame("transformers/modeling_utils.py", "_load_pretrained_model", "_load_state_dict_into_meta_model(")+
			frame("accelerate/utils/modeling.py", "set_module_tensor_to_device", "new_value = value.to(device)")+oom), true},
		{"torch.load onto the card", user + frame("torch/serialization.py", "load", "return _load(") +
			frame("torch/serialization.py", "_load", "result = unpickler.load()") + oom, true},
		{"rich on Windows", "╭──── Traceback (most recent call last) ────╮\n│ E:\\venv\\lib\\site-packages\\torch\\nn\\modules\\module.py:1145 in to │\n│ ❱ 1145 return self._apply(convert) │\n╰──────╯\nOutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB\n", true},
		{"forward", user + frame("torch/nn/modules/module.py", "_call_impl", "return forward_call(*args)") +
			frame("transformers/models/llama/modeling_llama.py", "forward", "hidden = self.mlp(hidden)") + oom, false},
		{"moved inside a training step", user + frame("lightning/pytorch/core/module.py", "training_step", "self.teacher.to(self.device)") + to + oom, false},
		{"an optimizer's first step", user + frame("torch/optim/adamw.py", "step", "self._init_group(") + oom, false},
		{"the best model, loaded after training", user + frame("transformers/trainer.py", "_inner_training_loop", "self._load_best_model()") +
			frame("transformers/trainer.py", "_load_best_model", "model.load_state_dict(state_dict)") + to + oom, false},
		{"a batch moved by the trainer", user + "  File \"train.py\", line 30, in main\n    batch = batch.to(device)\n" + oom, false},
		{"no traceback", oom, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			outcome, facts := Classify(Exit{Code: 1}, []byte(tt.tail))
			if outcome != plans.GPUOOM || facts.Loading != tt.want {
				t.Errorf("%s, loading %v; want gpu-oom, loading %v", outcome, facts != nil && facts.Loading, tt.want)
			}
		})
	}
}

// prefixed puts p before every line of s, as torchrun does before its workers'.
func prefixed(p, s string) string {
	return p + strings.ReplaceAll(strings.TrimSuffix(s, "\n"), "\n", "\n"+p) + "\n"
}
