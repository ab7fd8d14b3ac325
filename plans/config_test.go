package plans

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const strictBase = `
model: gla
lora: {r: 16, alpha: 32}
batch_size: 4
gradient_accumulation_steps: 8
gradient_checkpointing: false
`

// TestConfigMergeRule: with a base, a parameter goes into the rendered config only if
// the base has its key or config.add names it; without one, every parameter does.
func TestConfigMergeRule(t *testing.T) {
	params := "params: {batch_size: 2, lora.r: 8, lora.dropout: 0.1, task: sst2, seed: 1}\n"
	tests := []struct {
		name, config string
		want         string // the rendered config, as JSON
	}{
		{"base: its keys only", "config: {base: base.yaml}",
			`{"model":"gla","lora":{"r":8,"alpha":32},"batch_size":2,"gradient_accumulation_steps":8,"gradient_checkpointing":false}`},
		{"add names some", "config: {base: base.yaml, add: [task, lora.dropout]}",
			`{"model":"gla","lora":{"r":8,"alpha":32,"dropout":0.1},"batch_size":2,"gradient_accumulation_steps":8,"gradient_checkpointing":false,"task":"sst2"}`},
		{"add: all", "config: {base: base.yaml, add: all}",
			`{"model":"gla","lora":{"r":8,"alpha":32,"dropout":0.1},"batch_size":2,"gradient_accumulation_steps":8,"gradient_checkpointing":false,"task":"sst2","seed":1}`},
		{"no base: the parameters are the config", "config: {format: json}",
			`{"batch_size":2,"lora":{"r":8,"dropout":0.1},"task":"sst2","seed":1}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := sweepWithBase(t, strictBase, "name: c\ncommand: [train, --config, \"{config}\", --seed, \"{seed}\"]\njobs: [{}]\n"+tt.config+"\n"+params)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := json.Marshal(s.Config.Render(s.Jobs[0].Params))
			if string(got) != tt.want {
				t.Errorf("rendered\n  %s\nwant\n  %s", got, tt.want)
			}
		})
	}
}

func TestConfigAddRefused(t *testing.T) {
	for _, tt := range []struct{ add, want string }{
		{"[taks]", `config.add: "taks" is not a parameter of any job (did you mean "task"?)`},
		{"everything", "config.add: write the parameters to merge"},
		{"[1]", "config.add: write the parameters to merge"},
	} {
		_, err := sweepWithBase(t, strictBase, "name: c\ncommand: [train, \"{config}\"]\nmatrix: {task: [a, b]}\nconfig: {base: base.yaml, add: "+tt.add+"}\n")
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("add: %s\n  got %v\n  want %q", tt.add, err, tt.want)
		}
	}
	_, err := DecodeSweep(filepath.Join(t.TempDir(), "s.yaml"), []byte("name: c\ncommand: [train]\njobs: [{}]\nconfig: {base: nowhere.yaml}\n"), Overrides{})
	if err == nil || !strings.Contains(err.Error(), "config.base: ") || !strings.Contains(err.Error(), "nowhere.yaml cannot be read") {
		t.Errorf("a missing base: %v", err)
	}
}

// TestParameterWarnings: a parameter the base lacks is a warning when it reaches the
// trainer nowhere, with the key it probably meant when one is near.
func TestParameterWarnings(t *testing.T) {
	s, err := sweepWithBase(t, strictBase+"training: {max_steps: 100}\n", `
name: p
command: [train, --config, "{config}", --task, "{task}"]
config: {base: base.yaml}
params: {gradient_checkpoint: true, max_steps: 50, lr: 0.1}
matrix: {task: [a, b], seed: [1, 2]}
`)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(s.Warnings(), "\n")
	for _, want := range []string{
		"parameter gradient_checkpoint is not a key of config.base (base.yaml), so it is not written into the config: did you mean gradient_checkpointing?",
		"parameter max_steps is not a key of config.base (base.yaml), so it is not written into the config: did you mean training.max_steps?",
		"parameters lr, seed reach the trainer nowhere: name them in the command or env (\"{lr}\"), or list them under config.add",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("warnings\n%s\nlack\n%s", got, want)
		}
	}
	if strings.Contains(got, "task") {
		t.Errorf("task is on the command line, yet warned about:\n%s", got)
	}
}

// TestMisspeltAxisWarnings: a matrix axis that reaches the trainer nowhere, near a key of
// the base the job lacks, is asked about; an include key near an axis it lacks too, and
// an exclude value no job has; one name is "it", several "them".
func TestMisspeltAxisWarnings(t *testing.T) {
	tests := []struct {
		matrix string
		want   string
	}{
		{"{task: [a], sede: [1, 2]}", `parameter sede (did you mean "seed"?) reaches the trainer nowhere: name it in the command or env ("{sede}"), or list it under config.add to write it into the config although config.base lacks it`},
		{"{tsak: [a], sede: [1]}", `parameters tsak (did you mean "task"?), sede (did you mean "seed"?) reach the trainer nowhere: name them in the command or env ("{tsak}"), or list them under config.add`},
		{"{task: [a, b], seed: [1], include: [{tsak: b, lr: 0.1}]}", `matrix.include[0].tsak: "tsak" is not an axis of the matrix nor a job's setting, so it is taken as a parameter (did you mean "task"?)`},
		// A job's setting written in an include entry, misspelt, is asked about too.
		{"{task: [a, b], seed: [1], include: [{task: b, memroy: 20GiB}]}", `matrix.include[0].memroy: "memroy" is not an axis of the matrix nor a job's setting, so it is taken as a parameter (did you mean "memory"?)`},
		// An exclude entry's value no job has: the jobs meant to be left out would run.
		{"{task: [a, b], lr: [1e-3, 1e-2], exclude: [{task: a, lr: 1e-4}]}", `matrix.exclude[0].lr: no job has lr=1e-4 (the axis's values: 1e-3, 1e-2), so this entry excludes nothing`},
	}
	for _, tt := range tests {
		s, err := sweepWithBase(t, "task: x\nseed: 0\nlr: 0.01\n", "name: p\ncommand: [train, --config, \"{config}\"]\nconfig: {base: base.yaml}\nmatrix: "+tt.matrix+"\n")
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(s.Warnings(), "\n"); !strings.Contains(got, tt.want) {
			t.Errorf("matrix %s: warnings\n%s\nlack\n%s", tt.matrix, got, tt.want)
		}
	}
}

// TestMisspeltExcludeIsRefused: a list of mappings under a name a letter or two from
// exclude or include is refused, not taken as an axis whose values are mappings; an axis
// of mappings under another name, or of values near those names, is an axis.
func TestMisspeltExcludeIsRefused(t *testing.T) {
	for _, tt := range []struct{ matrix, err string }{
		{"{lr: [0.1, 0.2], seed: [1, 2], exlude: [{lr: 0.2, seed: 2}]}", `matrix.exlude: did you mean exclude?`},
		{"{lr: [0.1, 0.2], Includes: [{lr: 0.3}]}", `matrix.Includes: did you mean include?`},
		{"{lr: [0.1], model: [{name: a, layers: 2}, {name: b, layers: 4}]}", ""},
		{"{lr: [0.1], exclude_ratio: [0.1, 0.2]}", ""},
	} {
		_, err := DecodeSweep("m.yaml", []byte("name: m\ncommand: [train, \"{lr}\"]\nmatrix: "+tt.matrix+"\n"), Overrides{})
		if tt.err == "" && err != nil || tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("matrix %s: %v; want %q", tt.matrix, err, tt.err)
		}
	}
}

// TestSweepKeepsItsFiles: the base is read once, with the sweep; a daemon decoding
// the submission again gets the same jobs and configs after the file has changed.
func TestSweepKeepsItsFiles(t *testing.T) {
	dir := t.TempDir()
	base := filepath.Join(dir, "base.yaml")
	os.WriteFile(base, []byte("training: {batch_size: 8, gradient_accumulation_steps: 1}\n"), 0o644)
	doc := []byte("name: f\ncommand: [train, \"{config}\"]\nconfig: {base: base.yaml}\njobs: [{}]\n")
	first, err := DecodeSweep(filepath.Join(dir, "s.yaml"), doc, Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(first.Files[base], "batch_size: 8") {
		t.Fatalf("files kept: %v", first.Files)
	}
	os.WriteFile(base, []byte("other: {batch_size: 1}\n"), 0o644)
	again, err := DecodeSweepFiles(filepath.Join(dir, "s.yaml"), doc, first.Files, Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	if a, b := rungsText(first.Jobs[0]), rungsText(again.Jobs[0]); a != b || a == "" {
		t.Errorf("ladders differ after the file changed: %q, %q", a, b)
	}
	if v, _ := again.Config.Render(again.Jobs[0].Params).Path("training.batch_size"); v != int64(8) {
		t.Errorf("rendered from the file as it is now: batch_size %v", v)
	}
}

// TestAMappingParameterMergesIntoTheBase: a parameter whose value is a mapping sets the
// keys it has in the base's mapping there, and keeps the others (lora: {r: 32} keeps
// lora.alpha), at any depth; a scalar still takes the place of what is there.
func TestAMappingParameterMergesIntoTheBase(t *testing.T) {
	s, err := sweepWithBase(t, "lora: {r: 4, alpha: 16}\nmodel: {name: small, head: {dropout: 0.1, bias: true}}\nlr: 0.1\n",
		"name: m\ncommand: [train, --config, \"{config}\"]\nconfig: {base: base.yaml}\nparams: {lora: {r: 32}, model: {head: {dropout: 0.2}}, lr: 0.01}\njobs: [{}]\n")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(s.Config.Render(s.Jobs[0].Params))
	if want := `{"lora":{"r":32,"alpha":16},"model":{"name":"small","head":{"dropout":0.2,"bias":true}},"lr":0.01}`; string(got) != want {
		t.Errorf("rendered %s, want %s", got, want)
	}
	// Rendering leaves the job's parameters as they are: a mapping put in the config
	// is a copy, which a dotted key after it fills.
	s, err = DecodeSweep("m.yaml", []byte("name: m\ncommand: [train, --config, \"{config}\"]\nparams: {lora: {r: 32}, lora.alpha: 16}\njobs: [{}]\n"), Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	got, _ = json.Marshal(s.Config.Render(s.Jobs[0].Params))
	if want := `{"lora":{"r":32,"alpha":16}}`; string(got) != want {
		t.Errorf("rendered %s, want %s", got, want)
	}
	if lora, _ := s.Jobs[0].Params.Get("lora"); lora.(*Map).Len() != 1 {
		t.Errorf("the job's lora is now %v", lora)
	}
}

// TestAParameterIsReadWhereRenderLeavesIt: a dotted key reads inside a mapping
// parameter; where the key is also written dotted, the one written later is what the
// rendered config holds, and what Param reads and a rung sets.
func TestAParameterIsReadWhereRenderLeavesIt(t *testing.T) {
	for _, tc := range []struct {
		params, key string
		want        int64
	}{
		{"{training: {batch_size: 32}}", "training.batch_size", 32},
		{"{training: {batch_size: 32}, training.batch_size: 16}", "training.batch_size", 16},
		{"{training.batch_size: 16, training: {batch_size: 32}}", "training.batch_size", 32},
		{"{a: {b: {c: 4}}}", "a.b.c", 4},
		{"{training: {opt: {batch_size: 32}}, training.opt: {batch_size: 16}}", "training.opt.batch_size", 16},
		{"{training.opt: {batch_size: 16}, training: {opt: {batch_size: 32}}}", "training.opt.batch_size", 32},
	} {
		s, err := DecodeSweep("m.yaml", []byte("name: m\ncommand: [train, --config, \"{config}\"]\nconfig: {format: json}\nparams: "+tc.params+"\njobs: [{}]\n"), Overrides{})
		if err != nil {
			t.Fatal(err)
		}
		p := s.Jobs[0].Params
		if v, ok := p.Param(tc.key); !ok || v != tc.want {
			t.Errorf("%s: Param(%s) = %v, %v; want %d", tc.params, tc.key, v, ok, tc.want)
		}
		if got, _ := s.Config.Render(p).Path(tc.key); got != tc.want {
			t.Errorf("%s: rendered %s = %v, want %d", tc.params, tc.key, got, tc.want)
		}
		c := p.Clone()
		c.setParam(tc.key, int64(7))
		if got, _ := s.Config.Render(c).Path(tc.key); got != int64(7) {
			t.Errorf("%s: set to 7, rendered %v", tc.params, got)
		}
	}
}

// TestLeafValuesKeepADottedKey: a key of a mapping with a dot in it (a.b: 1) is a leaf
// of its own, not a path to split.
func TestLeafValuesKeepADottedKey(t *testing.T) {
	s, err := DecodeSweep("m.yaml", []byte("name: m\ncommand: [train]\nmatrix: {t: [{a.b: 1}, {a: {b: 2}}]}\n"), Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Jobs[0].Name + " " + s.Jobs[1].Name; got != "t.a.b=1 t.a.b=2" {
		t.Errorf("named %s", got)
	}
}

// TestAMappingPlaceholderIsTheRenderedSection: a placeholder of a mapping parameter is
// the section the rendered config holds, the base's keys and the dotted parameters
// under it merged in; a mapping the config does not take is the parameter as written.
func TestAMappingPlaceholderIsTheRenderedSection(t *testing.T) {
	s, err := sweepWithBase(t, "training: {batch_size: 8, gradient_accumulation_steps: 1, lr: 0.1}\n",
		"name: m\ncommand: [train, \"{config}\", \"{training}\", \"{opt}\"]\nconfig: {base: base.yaml}\n"+
			"params: {training: {batch_size: 32}, training.lr: 0.2, opt: {name: adam}}\njobs: [{}]\n")
	if err != nil {
		t.Fatal(err)
	}
	params := s.Jobs[0].Params
	for name, want := range map[string]string{
		"training":    `{"batch_size":32,"gradient_accumulation_steps":1,"lr":0.2}`,
		"training.lr": "0.2",
		"opt":         `{"name":"adam"}`,
	} {
		if v, ok := Placeholder(params, s.Config.Render(params), name); !ok || FormatValue(v) != want {
			t.Errorf("{%s} is %s (%v), want %s", name, FormatValue(v), ok, want)
		}
	}
}
