package plans

import (
	"encoding/json"
	"math"
	"strconv"
)

// Float is a number the file wrote otherwise than gpuq would print its value: 1e-4
// (0.0001), 3.0 (3). It reaches a command, an environment variable and a job's name as
// written, since a researcher looks for the learning rate they wrote, and is its value
// everywhere else: in comparisons, shapes, the ladder's scaling, and configs (PyYAML
// reads 1e-4 as a string, so a rendered YAML config gets 0.0001). A number written as
// gpuq prints it stays a float64.
type Float struct {
	Value float64
	Text  string
}

// String is the number as written.
func (f Float) String() string { return f.Text }

// MarshalJSON writes the number as written where JSON can hold it ("1e-4", "3.0"), so
// that a journaled job keeps its text across a daemon's restart; its value otherwise
// (".5").
func (f Float) MarshalJSON() ([]byte, error) {
	var n json.Number
	if json.Unmarshal([]byte(f.Text), &n) == nil {
		return []byte(f.Text), nil
	}
	return json.Marshal(f.Value)
}

// MarshalYAML writes the value: YAML 1.1 readers take 1e-4 for a string.
func (f Float) MarshalYAML() (any, error) { return f.Value, nil }

// Number is the value of a number a document wrote: an int64, a float64, or a Float
// (its value); false for anything else.
func Number(v any) (float64, bool) {
	switch t := v.(type) {
	case int64:
		return float64(t), true
	case float64:
		return t, true
	case Float:
		return t.Value, true
	}
	return 0, false
}

// literalFloat is the decoded number v written as text: a Float where the text says
// more than v printed does, v otherwise.
func literalFloat(v float64, text string) any {
	if text == formatFloat(v) || math.IsInf(v, 0) || math.IsNaN(v) {
		return v
	}
	if f, err := strconv.ParseFloat(text, 64); err != nil || f != v {
		return v // a form strconv does not read the same (YAML's .5 reads, 0x1p-2 is not YAML's)
	}
	return Float{Value: v, Text: text}
}
