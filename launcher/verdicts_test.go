package launcher

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/gpuq/gpuq/plans"
)

// A tailCase is a real error tail from a public bug report (testdata/verdicts): the
// last lines its process printed, the verdict it deserves, and how the process ended.
type tailCase struct {
	name, source, project string
	expect                string // gpu-oom, host-oom or other
	exit                  Exit
	nearlyFull            bool     // the report shows the card was nearly full
	platform              Platform // where it ran, when that matters
	tail                  []byte
}

// readTailCase parses a case file: "key: value" lines, then "tail:" and the tail as
// printed.
func readTailCase(path string) (tailCase, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return tailCase{}, err
	}
	c := tailCase{name: strings.TrimSuffix(filepath.Base(path), ".txt")}
	head, tail, ok := bytes.Cut(data, []byte("\ntail:\n"))
	if !ok {
		return c, fmt.Errorf("%s: no tail: line", path)
	}
	c.tail = tail
	sc := bufio.NewScanner(bytes.NewReader(head))
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), ": ")
		word, _, _ := strings.Cut(v, " ")
		switch k {
		case "source":
			c.source = v
		case "project":
			c.project = v
		case "expect":
			c.expect = v
		case "exit":
			c.exit, err = parseCaseExit(v)
		case "card":
			c.nearlyFull = word == "nearly-full"
		case "platform":
			c.platform = Platform(word)
		case "note":
		default:
			return c, fmt.Errorf("%s: unknown field %q", path, k)
		}
		if err != nil {
			return c, fmt.Errorf("%s: %w", path, err)
		}
	}
	switch {
	case !strings.HasPrefix(c.source, "https://github.com/"):
		return c, fmt.Errorf("%s: source %q is not a public report", path, c.source)
	case c.expect != "gpu-oom" && c.expect != "host-oom" && c.expect != "other":
		return c, fmt.Errorf("%s: expect %q", path, c.expect)
	case c.project == "" || len(bytes.TrimSpace(c.tail)) == 0:
		return c, fmt.Errorf("%s: no project or empty tail", path)
	}
	return c, nil
}

// parseCaseExit reads "1", "137", "signal 9", "1 assumed" (a Python traceback's
// status where the report does not say).
func parseCaseExit(v string) (Exit, error) {
	f := strings.Fields(v)
	if len(f) >= 2 && f[0] == "signal" {
		n, err := strconv.Atoi(f[1])
		return Exit{Code: -1, Signal: syscall.Signal(n)}, err
	}
	if len(f) == 0 {
		return Exit{}, fmt.Errorf("empty exit")
	}
	n, err := strconv.Atoi(f[0])
	if n == 0 {
		return Exit{}, fmt.Errorf("exit %q is not a failure", v)
	}
	return Exit{Code: n}, err
}

// verdict is what gpuq makes of a case: the launcher's outcome, and, for a text that is
// an OOM only on a nearly full card, the engine's judgement (scheduler.Apply).
func (c tailCase) verdict() (string, plans.Outcome) {
	outcome, facts := classify(c.exit, c.tail, func() Platform { return c.platform })
	switch {
	case outcome == plans.GPUOOM, outcome == plans.Failed && facts != nil && facts.Likely && c.nearlyFull:
		return "gpu-oom", outcome
	case outcome == plans.HostOOM:
		return "host-oom", outcome
	}
	return "other", outcome
}

// TestVerdictsOnRealTails replays real error tails from public bug reports (pytorch,
// transformers, accelerate, deepspeed, vllm, bitsandbytes, ColossalAI, JAX, TensorFlow,
// CuPy, torchrun, Slurm, ...) through the classifier and holds it to its targets:
// GPU-OOM recall and precision at least 0.95, host-OOM recall at least 0.8, and no
// failure that is not an OOM called one.
func TestVerdictsOnRealTails(t *testing.T) {
	files, _ := filepath.Glob("testdata/verdicts/*.txt")
	count := map[string]int{}  // cases by expected verdict
	hit := map[string]int{}    // of those, called right
	called := map[string]int{} // cases by verdict given
	var misses []string
	for _, f := range files {
		c, err := readTailCase(f)
		if err != nil {
			t.Fatal(err)
		}
		got, outcome := c.verdict()
		count[c.expect]++
		called[got]++
		if got == c.expect {
			hit[got]++
		} else {
			misses = append(misses, fmt.Sprintf("%s: %s, want %s (%s; %s)", c.name, got, c.expect, outcome, c.source))
		}
	}
	if count["gpu-oom"] < 40 || count["host-oom"] < 15 || count["other"] < 25 {
		t.Fatalf("corpus too small to mean anything: %v", count)
	}
	ratio := func(a, b int) float64 {
		if b == 0 {
			return 1
		}
		return float64(a) / float64(b)
	}
	gpuRecall, gpuPrecision := ratio(hit["gpu-oom"], count["gpu-oom"]), ratio(hit["gpu-oom"], called["gpu-oom"])
	hostRecall, hostPrecision := ratio(hit["host-oom"], count["host-oom"]), ratio(hit["host-oom"], called["host-oom"])
	falseOOM := count["other"] - hit["other"]
	t.Logf("%d real tails: %d GPU OOM, %d host OOM, %d other failures", len(files), count["gpu-oom"], count["host-oom"], count["other"])
	t.Logf("GPU OOM: recall %d/%d = %.3f, precision %d/%d = %.3f", hit["gpu-oom"], count["gpu-oom"], gpuRecall, hit["gpu-oom"], called["gpu-oom"], gpuPrecision)
	t.Logf("host OOM: recall %d/%d = %.3f, precision %d/%d = %.3f", hit["host-oom"], count["host-oom"], hostRecall, hit["host-oom"], called["host-oom"], hostPrecision)
	t.Logf("other failures called an OOM: %d of %d", falseOOM, count["other"])
	sort.Strings(misses)
	for _, m := range misses {
		t.Log("miss: " + m)
	}
	if gpuRecall < 0.95 || gpuPrecision < 0.95 || hostRecall < 0.8 || falseOOM > 0 {
		t.Errorf("below target: GPU OOM recall %.3f and precision %.3f (want 0.95), host OOM recall %.3f (want 0.8), %d other failures called an OOM (want 0)",
			gpuRecall, gpuPrecision, hostRecall, falseOOM)
	}
}
