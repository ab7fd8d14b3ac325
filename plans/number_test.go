package plans

import (
	"encoding/json"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestNumbersKeepTheirText: 1e-4 reaches the command, the environment and the job's
// name as written, in YAML and JSON sweeps and after a journal's JSON round trip; it is
// 0.0001 for comparisons and in a rendered YAML config (YAML 1.1 readers take 1e-4 for
// a string); a number written as gpuq prints it stays a float64.
func TestNumbersKeepTheirText(t *testing.T) {
	for _, tc := range []struct{ file, doc string }{
		{"s.yaml", "name: s\ncommand: [echo, --lr, \"{lr}\"]\nenv: {LR: \"{lr}\"}\nmemory: 1GiB\nmatrix: {lr: [1e-4, 3.0, 0.5]}\n"},
		{"s.json", `{"name": "s", "command": ["echo", "--lr", "{lr}"], "env": {"LR": "{lr}"}, "memory": "1GiB", "matrix": {"lr": [1e-4, 3.0, 0.5]}}`},
	} {
		s, err := DecodeSweep(tc.file, []byte(tc.doc), Overrides{})
		if err != nil {
			t.Fatal(err)
		}
		var names, argv []string
		for _, j := range s.Jobs {
			names = append(names, j.Name)
			v, _ := j.Params.Get("lr")
			argv = append(argv, FormatValue(v))
		}
		if got := strings.Join(names, " ") + " | " + strings.Join(argv, " "); got != "lr=1e-4 lr=3.0 lr=0.5 | 1e-4 3.0 0.5" {
			t.Errorf("%s: names and values %q", tc.file, got)
		}
		if v, _ := s.Jobs[2].Params.Get("lr"); v != 0.5 {
			t.Errorf("%s: 0.5 decodes to %#v, not a float64", tc.file, v)
		}
		lr, _ := s.Jobs[0].Params.Get("lr")
		if valueKey(lr) != valueKey(0.0001) {
			t.Errorf("%s: 1e-4 and 0.0001 are not one value", tc.file)
		}
		y, err := yaml.Marshal(s.Jobs[0].Params)
		if err != nil || string(y) != "lr: 0.0001\n" {
			t.Errorf("%s: rendered YAML %q, %v", tc.file, y, err)
		}
		b, err := json.Marshal(s.Jobs[0].Params)
		var back Map
		if err == nil {
			err = json.Unmarshal(b, &back)
		}
		if v, _ := back.Get("lr"); err != nil || FormatValue(v) != "1e-4" {
			t.Errorf("%s: after JSON %s: %#v, %v", tc.file, b, v, err)
		}
	}
}
