package launcher

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/gpuq/gpuq/plans"
)

// TestErrorLine: the line that says why a process failed is the exception line of its
// last traceback, the worker's own past a launcher's report, without a launcher's
// prefix or what a carriage return overwrote; with no traceback, the last line that is
// not blank.
func TestErrorLine(t *testing.T) {
	const nan = "Traceback (most recent call last):\n" +
		"  File \"train.py\", line 88, in <module>\n    main()\n" +
		"  File \"train.py\", line 80, in main\n    raise ValueError(\"loss is NaN\")\n" +
		"ValueError: loss is NaN\n"
	for _, tt := range []struct{ name, tail, want string }{
		{"traceback", "step 10 loss 2.3\n" + nan, "ValueError: loss is NaN"},
		{"pty line ends and colours", strings.ReplaceAll(nan, "\n", "\r\n") + "\x1b[0m\r\n", "ValueError: loss is NaN"},
		{"no traceback", "step 10 loss 2.3\nSegmentation fault (core dumped)\n\n  \n", "Segmentation fault (core dumped)"},
		{"progress bar", "train:  40%|████      | 4/10\rtrain:  50%|█████     | 5/10\r\n", "train:  50%|█████     | 5/10"},
		{"a later traceback wins", nan + "Traceback (most recent call last):\n  File \"x.py\", line 1, in <module>\nKeyError: 'val_acc'\n",
			"KeyError: 'val_acc'"},
		{"raised from", "Traceback (most recent call last):\n  File \"a.py\", line 1, in f\nOSError: disk\n\n" +
			"The above exception was the direct cause of the following exception:\n\n" + "Traceback (most recent call last):\n" +
			"  File \"a.py\", line 3, in <module>\nRuntimeError: could not save the checkpoint\n", "RuntimeError: could not save the checkpoint"},
		{"python 3.11 carets", "Traceback (most recent call last):\n  File \"t.py\", line 2, in <module>\n    x = d['a']\n        ~^^^^^\nKeyError: 'a'\n", "KeyError: 'a'"},
		{"torchrun's prefix", "[rank0]: Traceback (most recent call last):\n[rank0]:   File \"train.py\", line 9, in <module>\n[rank0]:     main()\n" +
			"[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."},
		{"the worker's own, past torchrun's report", nan + "E0101 10:00:00 api.py:869] failed (exitcode: 1) local_rank: 0\n" +
			"Traceback (most recent call last):\n  File \"/usr/bin/torchrun\", line 8, in <module>\n    sys.exit(main())\n" +
			"torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n====\ntrain.py FAILED\n", "ValueError: loss is NaN"},
		{"torchrun's report alone", "Traceback (most recent call last):\n  File \"/usr/bin/torchrun\", line 8, in <module>\n" +
			"torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n====\n", "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:"},
		{"cut before its exception", "Traceback (most recent call last):\n  File \"t.py\", line 2, in <module>\n    run()\n", "run()"},
		{"rich's box", "╭──── Traceback (most recent call last) ────╮\n│ /x/t.py:2 in <module>                     │\n╰───────────────────────────────────────────╯\n" +
			"OutOfMemoryError: CUDA out of memory.\n", "OutOfMemoryError: CUDA out of memory."},
		{"nothing", "\n \n", ""},
		{"too long", "RuntimeError: " + strings.Repeat("é", 400) + "\n", "RuntimeError: " + strings.Repeat("é", 141) + "…"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := ErrorLine([]byte(tt.tail)); got != tt.want {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
}

// TestProcessExit: the status or signal of every end; the error line only of a process
// that failed on its own, not of one that succeeded or that gpuq stopped.
func TestProcessExit(t *testing.T) {
	tail := []byte("step 3\nValueError: loss is NaN\n")
	for _, tt := range []struct {
		exit Exit
		want plans.ProcessExit
	}{
		{Exit{Code: 1}, plans.ProcessExit{Code: 1, Error: "ValueError: loss is NaN"}},
		{Exit{Code: -1, Signal: syscall.SIGKILL}, plans.ProcessExit{Code: -1, Signal: "SIGKILL", Error: "ValueError: loss is NaN"}},
		{Exit{Code: 0}, plans.ProcessExit{}},
		{Exit{Code: -1, Signal: syscall.SIGTERM, Cancelled: true}, plans.ProcessExit{Code: -1, Signal: "SIGTERM"}},
	} {
		if got := ProcessExit(tt.exit, tail); *got != tt.want {
			t.Errorf("%+v: %+v, want %+v", tt.exit, *got, tt.want)
		}
	}
}

// TestErrorLinesOfRealTails: the error line gpuq keeps of each real tail
// (testdata/verdicts), in one golden file to read down: each should say in a line what
// ended its process.
func TestErrorLinesOfRealTails(t *testing.T) {
	files, _ := filepath.Glob("testdata/verdicts/*.txt")
	var b strings.Builder
	for _, f := range files {
		c, err := readTailCase(f)
		if err != nil {
			t.Fatal(err)
		}
		line := ErrorLine(c.tail)
		if line == "" {
			t.Errorf("%s: no error line", c.name)
		}
		fmt.Fprintf(&b, "%s\n\t%s\n", c.name, line)
	}
	golden := "testdata/error_lines.golden"
	if *update {
		os.WriteFile(golden, []byte(b.String()), 0o644)
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (go test -update writes it)", err)
	}
	if b.String() != string(want) {
		t.Errorf("error lines differ from %s (go test -update rewrites it):\n%s", golden, b.String())
	}
}
