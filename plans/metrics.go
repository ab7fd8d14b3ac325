package plans

// Training metrics as trainers report them: one JSON object a line, a step and the
// values of named metrics at it. What a sweep does with them (results, early stopping)
// is in earlystop.go; where they are read from, in the launcher.

import (
	"bytes"
	"cmp"
	"encoding/json"
	"math"
	"regexp"
	"slices"
	"strconv"
	"sync"
)

// Reading is one value of a trainer's metric at a step of its training. Value may be
// NaN or infinite (a run that diverged); what keeps readings decides what to do with
// those.
type Reading struct {
	Step  int64
	Name  string
	Value float64
}

// StepKeys are the keys of a metrics record that give its step rather than a metric.
var StepKeys = []string{"step", "global_step"}

// MaxMetricName is the longest metric name kept: longer keys are not metrics.
const MaxMetricName = 64

var metricNameRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_./:@-]*$`) })

// MetricName reports whether s can name a metric: a letter or _, then letters, digits
// and _ . / : @ -, at most MaxMetricName bytes (eval_loss, train/loss, acc@1).
func MetricName(s string) bool { return len(s) <= MaxMetricName && metricNameRe().MatchString(s) }

// nonFinite finds Python's json.dumps spellings of NaN and the infinities, which JSON
// does not have, where a value stands: a diverged loss is written so.
var nonFinite = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`([:\[,]\s*)(NaN|-?Infinity)(\s*[,}\]])`) })

// ParseMetricsRecord reads one line of a metrics file: a JSON object of metric names to
// numbers, e.g. {"step": 500, "loss": 1.92, "eval_acc": 0.71}. Its step is "step" (or
// "global_step"), else n, the record's number in the file from 1, so that a trainer
// that writes one record an epoch needs no step. Values that are not numbers (strings,
// lists, objects) are not metrics and are left out, as are keys that cannot name one.
// ok is false for a line that is no JSON object, or whose step is not a number from 0.
func ParseMetricsRecord(line []byte, n int64) (rs []Reading, ok bool) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' {
		return nil, false
	}
	line = nonFinite().ReplaceAll(line, []byte(`$1"$2"$3`))
	var rec map[string]json.RawMessage
	if json.Unmarshal(line, &rec) != nil {
		return nil, false
	}
	step := n
	for _, k := range StepKeys {
		raw, has := rec[k]
		if !has {
			continue
		}
		v, isNum := number(raw)
		if !isNum || v < 0 || v > math.MaxInt64/2 || math.IsNaN(v) {
			return nil, false
		}
		step = int64(v)
		break
	}
	for k, raw := range rec {
		if slices.Contains(StepKeys, k) || !MetricName(k) {
			continue
		}
		if v, isNum := number(raw); isNum {
			rs = append(rs, Reading{Step: step, Name: k, Value: v})
		}
	}
	SortReadings(rs)
	return rs, true
}

// number reads a JSON number, or the strings NaN, Infinity and -Infinity that stand
// for Python's spellings of them.
func number(raw json.RawMessage) (float64, bool) {
	s := string(bytes.TrimSpace(raw))
	switch s {
	case `"NaN"`:
		return math.NaN(), true
	case `"Infinity"`:
		return math.Inf(1), true
	case `"-Infinity"`:
		return math.Inf(-1), true
	}
	if len(s) == 0 || s[0] != '-' && (s[0] < '0' || s[0] > '9') {
		return 0, false
	}
	v, err := strconv.ParseFloat(s, 64)
	return v, err == nil
}

// SortReadings orders readings by step, then name: a record's keys come in no order.
func SortReadings(rs []Reading) {
	slices.SortStableFunc(rs, func(a, b Reading) int { return cmp.Or(cmp.Compare(a.Step, b.Step), cmp.Compare(a.Name, b.Name)) })
}

// Finite reports whether v is a number a curve can be drawn through.
func Finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
