package launcher

// Metrics read from a trainer's output, for trainers that write no metrics file: the
// Hugging Face Trainer's printed log dicts, and the postfix of a tqdm progress bar (as
// PyTorch Lightning's bar and many hand-written loops print one). Each line is looked at
// once, as it is teed, so the tests are cheap and anchored.

import (
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/gpuq/gpuq/plans"
)

var (
	// escapes are a terminal's control sequences (colours, tqdm's cursor moves).
	escapes = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`\x1b(?:\[[0-9;?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])`)
	})
	// bar is a tqdm bar's count and its bracket: "50/1000 [00:10<03:10, 5.00it/s, loss=2.31]",
	// or without a total "50it [00:10, 5.00it/s]"; Lightning's starts "Epoch 3:".
	bar = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?:^|\s|\|)(\d+)(?:/(\d+)|it) \[([^\]]*)\]\s*$`) })
	// epochOf is Lightning's "Epoch 3:" before its bar.
	epochOf = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^\s*Epoch (\d+):`) })
	// postfixPair is "loss=2.31" in a bar's bracket.
	postfixPair = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(?:^|,\s*)([A-Za-z_][A-Za-z0-9_./:@-]*)=([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|nan|inf)\b`)
	})
	// dictPair is "'loss': 2.31" in a printed dict, the number perhaps wrapped as NumPy
	// 2 and PyTorch print one: np.float64(0.71), tensor(1.23, device='cuda:0'), or
	// quoted.
	dictPair = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`['"]([A-Za-z_][A-Za-z0-9_./:@-]*)['"]\s*:\s*(?:(?:np\.|numpy\.)?(?:float|int)(?:16|32|64)?\(|tensor\()?['"]?([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|nan|inf|-inf|NaN|Infinity|-Infinity)\b`)
	})
)

// ignoredPostfix are postfix keys that are no metric: Lightning's logger version.
var ignoredPostfix = map[string]bool{"v_num": true}

// lineReader turns output lines into readings. It keeps the count of the training bar
// (the bar with the largest total seen: an evaluation's is shorter) as the step of the
// dicts printed between its redraws, which carry none.
type lineReader struct {
	step  int64 // the training bar's count; -1 before any
	total int64 // its total
	dicts int64 // dicts read without a step, numbering them when no bar says one
}

func newLineReader() *lineReader { return &lineReader{step: -1} }

// read returns the readings of one line of output (without its line ending), and
// whether they came from a progress bar's postfix, which is redrawn many times a step.
func (lr *lineReader) read(line string) (rs []plans.Reading, fromBar bool) {
	if strings.IndexByte(line, 0x1b) >= 0 {
		line = escapes().ReplaceAllString(line, "")
	}
	t := strings.TrimSpace(line)
	if strings.HasPrefix(t, "{") && strings.HasSuffix(t, "}") {
		return lr.dict(t), false
	}
	if strings.Contains(t, " [") {
		return lr.bar(t), true
	}
	return nil, false
}

// bar reads a progress bar: its count, and its postfix's metrics at that step.
func (lr *lineReader) bar(line string) []plans.Reading {
	m := bar().FindStringSubmatch(line)
	if m == nil {
		return nil
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		return nil
	}
	total, _ := strconv.ParseInt(m[2], 10, 64)
	step := n
	if e := epochOf().FindStringSubmatch(line); e != nil && total > 0 {
		// Lightning counts each epoch's batches from 0.
		epoch, _ := strconv.ParseInt(e[1], 10, 64)
		step = epoch*total + n
	}
	if total >= lr.total {
		lr.total, lr.step = total, step
	}
	var rs []plans.Reading
	for _, p := range postfixPair().FindAllStringSubmatch(m[3], -1) {
		if v, ok := parseNumber(p[2]); ok && !ignoredPostfix[p[1]] {
			rs = append(rs, plans.Reading{Step: step, Name: p[1], Value: v})
		}
	}
	plans.SortReadings(rs)
	return rs
}

// dict reads a printed dict of metrics: its step is its own "step", else the training
// bar's count, else its number among such dicts.
func (lr *lineReader) dict(line string) []plans.Reading {
	pairs := dictPair().FindAllStringSubmatch(line, -1)
	if len(pairs) == 0 {
		return nil
	}
	step, stepped := lr.step, false
	var rs []plans.Reading
	for _, p := range pairs {
		v, ok := parseNumber(p[2])
		switch {
		case !ok:
		case p[1] == "step" || p[1] == "global_step":
			if v >= 0 && plans.Finite(v) {
				step, stepped = int64(v), true
			}
		case plans.MetricName(p[1]):
			rs = append(rs, plans.Reading{Name: p[1], Value: v})
		}
	}
	if len(rs) == 0 {
		return nil
	}
	if !stepped && step < 0 {
		lr.dicts++
		step = lr.dicts
	}
	for i := range rs {
		rs[i].Step = step
	}
	plans.SortReadings(rs)
	return rs
}

// parseNumber reads a number as Python prints one, nan and inf included.
func parseNumber(s string) (float64, bool) {
	switch s {
	case "NaN":
		s = "nan"
	case "Infinity":
		s = "inf"
	case "-Infinity":
		s = "-inf"
	}
	v, err := strconv.ParseFloat(s, 64)
	return v, err == nil
}
