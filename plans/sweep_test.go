package plans

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

const issueSweep = `
name: gla-e1
command: [python3, train.py, --config, "{config}", --seed, "{seed}"]
workdir: .
params: {batch_size: 8, gradient_accumulation_steps: 4, gradient_checkpointing: false, num_data_workers: 8}
matrix:
  task: [glue-tvt_qnli, glue-sst2]
  seed: [87, 88, 89]
  include: [{task: glue-tvt_qnli, memory: 14GiB}]
  exclude: [{task: glue-sst2, seed: 89}]
jobs: [{task: mnli, seed: 87}]
memory: 11GiB
env: {HF_HOME: /data/hf, RUN_TAG: "{task}-{seed}"}
gpus: "0,1,2,3,4,5,6"
gpu_plan: "2,2,2,2,1,1,1"
headroom: 10%
threads: 1
priority: 0
gpus_per_job: 1
oom:
  max_attempts: 4
  ladder:
    - {set: {gradient_checkpointing: true}}
    - {scale: {batch_size: 0.5, gradient_accumulation_steps: 2}, repeat: true}
    - {set: {num_data_workers: 0}, exclusive: true}
`

func TestDecodeSweepIssueExample(t *testing.T) {
	s, err := DecodeSweep("sweeps/gla.yaml", []byte(issueSweep), Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, j := range s.Jobs {
		got = append(got, j.ID+" "+j.Name+" "+j.PointText()+" "+FormatSize(j.Memory))
	}
	want := []string{
		"gla-e1.1 glue-tvt_qnli,seed=87 task=glue-tvt_qnli,seed=87 14.00 GiB",
		"gla-e1.2 glue-tvt_qnli,seed=88 task=glue-tvt_qnli,seed=88 14.00 GiB",
		"gla-e1.3 glue-tvt_qnli,seed=89 task=glue-tvt_qnli,seed=89 14.00 GiB",
		"gla-e1.4 glue-sst2,seed=87 task=glue-sst2,seed=87 11.00 GiB",
		"gla-e1.5 glue-sst2,seed=88 task=glue-sst2,seed=88 11.00 GiB",
		"gla-e1.6 mnli,seed=87 task=mnli,seed=87 11.00 GiB",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("jobs:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if s.Env[0].Name != "HF_HOME" || s.Env[1].Value != "{task}-{seed}" {
		t.Errorf("env keeps names and order: %+v", s.Env)
	}
	if s.GPUs.Count() != 7 || s.Plan.String() != "2,2,2,2,1,1,1" || s.Headroom.String() != "10%" {
		t.Errorf("machine: %v %v %v", s.GPUs, s.Plan, s.Headroom)
	}
	if len(s.OOM.Ladder) != 3 || !s.OOM.Ladder[1].Repeat || !s.OOM.Ladder[2].Exclusive {
		t.Errorf("ladder: %+v", s.OOM.Ladder)
	}
	if v, _ := s.Jobs[5].Params.Get("batch_size"); v != int64(8) {
		t.Errorf("params merged: batch_size = %v", v)
	}
}

func TestDecodeSweepJSON(t *testing.T) {
	doc := `{"name": "j", "command": ["echo", "{seed}"], "params": {"lr": 0.0001},
	  "matrix": {"seed": [2, 1]}, "memory": "1GiB"}`
	s, err := DecodeSweep("j.json", []byte(doc), Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Jobs) != 2 || s.Jobs[0].Name != "seed=2" {
		t.Fatalf("jobs: %+v", s.Jobs)
	}
	if v, _ := s.Jobs[0].Params.Get("lr"); v != 0.0001 {
		t.Errorf("lr = %#v", v)
	}
}

// TestAJobsNameIsSeenNotActedOn: a job's name, which status, plan, top and the report
// show, quotes a parameter that holds a control character (an escape sequence from a
// sweep file: a terminal's title set, its screen cleared).
func TestAJobsNameIsSeenNotActedOn(t *testing.T) {
	doc := "name: e\ncommand: [echo, \"{task}\"]\nmemory: 1GiB\nmatrix: {task: [\"\\e]0;pwned\\a\\e[2J\", sst2]}\n"
	s, err := DecodeSweep("e.yaml", []byte(doc), Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Jobs[0].Name + " " + s.Jobs[1].PointText(); got != `"\x1b]0;pwned\a\x1b[2J" task=sst2` {
		t.Errorf("names %q", got)
	}
	if v, _ := s.Jobs[0].Params.Get("task"); v != "\x1b]0;pwned\a\x1b[2J" {
		t.Errorf("the parameter itself is %q: it reaches the trainer as written", v)
	}
}

func TestMapJSONRoundTrip(t *testing.T) {
	in := `{"b":1,"a":{"z":true,"y":[1,"x"]},"c":0.5}`
	var m Map
	if err := json.Unmarshal([]byte(in), &m); err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(&m)
	if err != nil || string(out) != in {
		t.Errorf("round trip: %s, %v", out, err)
	}
}

func TestOverridesWin(t *testing.T) {
	ov := Overrides{
		GPUs:     Override{Value: "sim:7x23.52GiB", Source: "--gpus"},
		Plan:     Override{Value: "1", Source: "GPUQ_GPU_PLAN"},
		Headroom: Override{Value: "1GiB", Source: "--headroom"},
		Name:     Override{Value: "again", Source: "--name"},
		Order:    Override{Value: "fifo", Source: "--order"},
	}
	s, err := DecodeSweep("g.yaml", []byte(issueSweep+"order: big-first\n"), ov)
	if err != nil {
		t.Fatal(err)
	}
	if !s.GPUs.IsSimulated() || s.Plan.String() != "1" || s.Headroom.Bytes != 1<<30 || s.Name != "again" || s.Jobs[0].ID != "again.1" || s.Order != FIFO {
		t.Errorf("overrides lost: %v %v %v %s %s %v", s.GPUs, s.Plan, s.Headroom, s.Name, s.Jobs[0].ID, s.Order)
	}
	_, err = DecodeSweep("g.yaml", []byte(issueSweep), Overrides{Name: Override{Value: "Again!", Source: "--name"}})
	if err == nil || !strings.HasPrefix(err.Error(), `--name: "Again!" may hold only`) {
		t.Errorf("a bad --name is named as the flag: %v", err)
	}
	if s, err := DecodeSweep("g.yaml", []byte(issueSweep), Overrides{}); err != nil || s.Order != BigFirst {
		t.Errorf("default order %q (%v), want big-first", s.Order, err)
	}
	_, err = DecodeSweep("g.yaml", []byte(issueSweep), Overrides{Order: Override{Value: "lifo", Source: "GPUQ_ORDER"}})
	if err == nil || !strings.HasPrefix(err.Error(), "GPUQ_ORDER: ") || !strings.Contains(err.Error(), "big-first") {
		t.Errorf("a bad order from the environment is named as such: %v", err)
	}
	_, err = DecodeSweep("g.yaml", []byte(issueSweep), Overrides{Plan: Override{Value: "2,x", Source: "--gpu-plan"}})
	if err == nil || !strings.HasPrefix(err.Error(), "--gpu-plan: ") {
		t.Errorf("a bad flag is named as the flag: %v", err)
	}
}

// TestValidation is the list of bad sweeps gpuq must refuse kindly: each error names
// the file, the field, the job where one is at fault, and what to write instead.
func TestValidation(t *testing.T) {
	base := func(extra string) string {
		return "name: t\ncommand: [python3, train.py, --seed, \"{seed}\"]\nmatrix: {seed: [1, 2]}\n" + extra
	}
	tests := []struct {
		name, doc string
		want      []string // substrings of the error
	}{
		{"plan longer than gpus", base("gpus: \"0,1\"\ngpu_plan: \"2,2,1\""), []string{"t.yaml: gpu_plan:", "3 entries but there are 2 cards"}},
		{"plan shorter than gpus", base("gpus: \"0,1,2\"\ngpu_plan: \"2,2\""), []string{"2 entries but there are 3 cards"}},
		{"plan not a number", base("gpu_plan: \"2,x,1\""), []string{"gpu_plan:", `entry 2 is "x"`}},
		{"plan all zero", base("gpu_plan: \"0,0\""), []string{"allows no job"}},
		{"plan negative", base("gpu_plan: \"1,-2\""), []string{"entry 2 is -2"}},
		{"order unknown", base("order: ffio"), []string{"t.yaml: order:", `"ffio" is not an order`, `did you mean "fifo"`, "big-first"}},
		{"size without unit", base("memory: 11"), []string{"memory:", `e.g. "11GiB"`}},
		{"size bad unit", base("memory: 11G"), []string{"did you mean GiB"}},
		{"unknown top key", base("gpu_plna: \"2\""), []string{"gpu_plna: unknown key", `did you mean "gpu_plan"`}},
		{"unknown oom key", base("oom: {max_attempt: 3}"), []string{"oom.max_attempt", `did you mean "max_attempts"`}},
		{"unknown rung key", base("oom: {ladder: [{sett: {a: 1}}]}"), []string{"oom.ladder[0].sett", `did you mean "set"`}},
		{"empty matrix", "name: t\ncommand: [echo]\nmatrix: {}\n", []string{"matrix: the matrix is empty"}},
		{"empty axis", "name: t\ncommand: [echo]\nmatrix: {seed: []}\n", []string{"matrix.seed: the axis is empty"}},
		{"axis not a list", "name: t\ncommand: [echo]\nmatrix: {seed: 1}\n", []string{"matrix.seed: an axis is a list"}},
		{"everything excluded", "name: t\ncommand: [echo]\nmatrix: {seed: [1], exclude: [{seed: 1}]}\n", []string{"every combination is excluded"}},
		{"exclude unknown axis", "name: t\ncommand: [echo]\nmatrix: {seed: [1, 2], exclude: [{sed: 1}]}\n", []string{"matrix.exclude[0].sed", `did you mean "seed"`}},
		{"no jobs at all", "name: t\ncommand: [echo]\n", []string{"the sweep has no job"}},
		{"duplicate points", base("jobs: [{seed: 1}]"), []string{"jobs[0] (job t.3): the same job as t.1"}},
		{"duplicate points, keys in another order", "name: t\ncommand: [echo, \"{task}\", \"{seed}\"]\nmatrix: {task: [sst2], seed: [87, 88]}\njobs: [{seed: 87, task: sst2}]\n",
			[]string{"jobs[0] (job t.3): the same job as t.1 (task=sst2,seed=87"}},
		{"duplicate points, nested keys in another order", "name: t\ncommand: [echo, \"{seed}\"]\nmatrix: {seed: [1], lora: [{r: 8, alpha: 16}]}\njobs: [{seed: 1, lora: {alpha: 16, r: 8}}]\n",
			[]string{"jobs[0] (job t.2): the same job as t.1"}},
		{"unfilled placeholder", "name: t\ncommand: [python3, train.py, --lr, \"{lr}\"]\nmatrix: {seed: [1, 2]}\n", []string{"command[3] (every job): no parameter fills {lr}"}},
		{"placeholder typo", "name: t\ncommand: [echo, \"{sed}\"]\nmatrix: {seed: [1, 2]}\n", []string{`did you mean "seed"`}},
		{"placeholder in some jobs", "name: t\ncommand: [echo, \"{lr}\"]\nmatrix: {seed: [1, 2], include: [{seed: 1, lr: 0.1}]}\n", []string{"(job t.2): no parameter fills {lr}"}},
		{"unbalanced brace", base("env: {X: \"{seed\"}"), []string{"env.X", "without a closing }"}},
		{"command as string", "name: t\ncommand: python3 train.py\nmatrix: {seed: [1]}\n", []string{"command: write the command as a list", "never runs a shell"}},
		{"missing name and command", "matrix: {seed: [1]}\n", []string{"name: a sweep needs a name", "command: a sweep needs a command"}},
		{"bad name", "name: GLA E1\ncommand: [echo]\njobs: [{}]\n", []string{`e.g. gla-e1`}},
		{"a name like a flag", "name: -n-\ncommand: [echo]\njobs: [{}]\n", []string{`not begin with '-': e.g. n-`}},
		{"a name of nothing valid", "name: ÜÏ\ncommand: [echo]\njobs: [{}]\n", []string{`e.g. sweep`}},
		{"ladder names missing key", base("oom: {ladder: [{scale: {batch_sise: 0.5}}]}\nparams: {batch_size: 4}"), []string{"oom.ladder[0] (every job)", `"batch_sise"`, `did you mean "batch_size"`}},
		{"ladder scales a string", base("params: {batch_size: big}\noom: {ladder: [{scale: {batch_size: 0.5}}]}"), []string{"is not a number"}},
		{"repeat without shrink", base("params: {gradient_accumulation_steps: 1}\noom: {ladder: [{scale: {gradient_accumulation_steps: 2}, repeat: true}]}"), []string{"only a rung that scales something down"}},
		{"empty rung", base("oom: {ladder: [{}]}"), []string{"the rung changes nothing"}},
		{"gpus_per_job zero", base("gpus_per_job: 0"), []string{"gpus_per_job: 0 is not a whole number of at least 1"}},
		{"job memory bad", base("jobs: [{seed: 3, memory: lots}]"), []string{"jobs[0].memory (job t.3)"}},
		{"threads bad", base("threads: many"), []string{"threads: many is not"}},
		{"bad gpu list", base("gpus: \"0,0\""), []string{"gpus: card 0 is listed twice"}},
		{"headroom bad", base("headroom: 150%"), []string{"headroom:", "percentage from 0% to 99%"}},
		{"env bad name", base("env: {1X: a}"), []string{"env.1X", "not a variable name"}},
		{"not yaml", "name: [", []string{"t.yaml: not valid YAML"}},
		{"top not mapping", "- a\n- b\n", []string{"top level must be a mapping"}},
		{"duplicate key", "name: a\nname: b\n", []string{`key "name" appears twice`}},
		{"memory model not a mapping", base("memory: {model: 7B}"), []string{"memory.model:", "describe the model as a mapping"}},
		{"memory unknown key", base("memory: {modle: {params: 7B}}"), []string{"memory.modle", `did you mean "model"`}},
		{"memory model bad key", base("memory: {model: {params: 7B, precison: bf16}}"), []string{"memory.model (every job)", `did you mean "precision"`}},
		{"memory model unfilled", base("memory: {model: {params: 7B, micro_batch: \"{batch}\"}}"), []string{"no parameter fills {batch}"}},
		{"memory model fails at a tier", base("params: {batch_size: 1, gradient_accumulation_steps: 1}\noom: {ladder: [{set: {batch_size: none}}]}\nmemory: {model: {params: 7B, micro_batch: \"{batch_size}\"}}"),
			[]string{"at tier 1 (batch_size changed)", `"none" is not a whole number`}},
		{"host memory bad", base("host_memory: 8"), []string{"host_memory:", `e.g. "11GiB"`}},
		{"shape_ignores not a list", base("shape_ignores: seed"), []string{"shape_ignores: write a list"}},
		{"timeout not a duration", base("timeout: soon"), []string{`timeout: "soon" is not a duration: write e.g. 45m, 2h30m or 90s`}},
		{"timeout unknown key", base("timeout: {after: 1h, retires: 1}"), []string{`timeout.retires: unknown key (did you mean "retries"?)`}},
		{"timeout negative retries", base("timeout: {after: 1h, retries: -1}"), []string{"timeout.retries: -1 is not a whole number of at least 0"}},
		{"job timeout bad", base("jobs: [{seed: 3, timeout: -5}]"), []string{"jobs[0].timeout (job t.3): -5 is not a positive duration"}},
		{"config bad format", base("config: {base: c.yaml, format: toml}"), []string{"config.format", "use yaml or json"}},
		{"matrix of 10^9 points", "name: t\ncommand: [echo]\nmatrix: {a: &ten [0,1,2,3,4,5,6,7,8,9], b: *ten, c: *ten, d: *ten, e: *ten, f: *ten, g: *ten, h: *ten, i: *ten}\n",
			[]string{"matrix: a: 10 × b: 10 × c: 10 × d: 10 × e: 10 × f: 10 × g: 10 × h: 10 × i: 10 = 1000000000 combinations, more than the 100000 jobs a sweep may have: narrow an axis or split the sweep"}},
		{"more jobs than a sweep may have", "name: t\ncommand: [echo]\njobs: [" + strings.Repeat("{}, ", maxJobs) + "{}]\n", []string{"jobs: 100001 jobs, more than the 100000"}},
		{"rung scale not a mapping", base("oom: {ladder: [{scale: 0.5}]}"), []string{"oom.ladder[0].scale: write a mapping of parameters to factors"}},
		{"rung scale by NaN", base("params: {batch_size: 8}\noom: {ladder: [{scale: {batch_size: .nan}}]}"), []string{"oom.ladder[0].scale.batch_size: a factor is a finite number above 0"}},
		{"rung scale by infinity", base("params: {batch_size: 8}\noom: {ladder: [{scale: {batch_size: .inf}}]}"), []string{"a factor is a finite number above 0"}},
		{"model params overflow", base("memory: {model: {params: 7000000000B}}"), []string{"memory.model (every job): the model comes to 1.12e+20 bytes a card, more than the 1024.00 TiB"}},
		{"model params NaN", base("memory: {model: {params: .nan}}"), []string{`params: "NaN" is not a parameter count`}},
		{"model params negative", base("memory: {model: {params: -7B}}"), []string{`params: "-7B" is not a parameter count`}},
		// The kernel takes arguments, the environment and directories as C strings.
		{"NUL in the command", "name: t\ncommand: [python3, \"train.py\\0--evil\"]\njobs: [{}]\n", []string{"command[1]: holds a NUL byte"}},
		{"NUL in the command, JSON", `{"name": "t", "command": ["python3", "train\u0000.py"], "jobs": [{}]}`, []string{"command[1]: holds a NUL byte"}},
		{"NUL in the environment", base("env: {X: \"a\\0b\"}"), []string{"env.X: holds a NUL byte"}},
		{"NUL in the workdir", base("workdir: \"/tmp\\0x\""), []string{"workdir: holds a NUL byte"}},
		{"NUL in a value the command takes", "name: t\ncommand: [echo, \"{tag}\"]\nmatrix: {tag: [ok, \"b\\0d\"]}\n",
			[]string{"command[1] (job t.2): a parameter's value put in it holds a NUL byte"}},
		{"NUL in the notify command", base("notify: {command: [notify-send, \"a\\0b\"]}"), []string{"notify.command[1]: holds a NUL byte"}},
		{"NUL in a rung's value", base("oom: {ladder: [{set: {attn: \"flash\\0\"}}]}"), []string{"oom.ladder[0].set.attn: holds a NUL byte"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeSweep("t.yaml", []byte(tt.doc), Overrides{})
			if err == nil {
				t.Fatalf("accepted:\n%s", tt.doc)
			}
			var probs Problems
			if !errors.As(err, &probs) {
				t.Fatalf("error is %T, want Problems: %v", err, err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error\n  %v\nwant it to contain %q", err, w)
				}
			}
			if !strings.HasPrefix(err.Error(), "t.yaml") {
				t.Errorf("error does not name the file: %v", err)
			}
		})
	}
}

func TestTimeoutForms(t *testing.T) {
	s, err := DecodeSweep("t.yaml", []byte("name: t\ncommand: [echo]\ntimeout: 6h\nmatrix: {seed: [1]}\njobs: [{seed: 2, timeout: {after: 90, retries: 2}}]\n"), Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Jobs[0].Timeout; got != (Timeout{After: 6 * time.Hour}) {
		t.Errorf("sweep timeout: %+v", got)
	}
	if got := s.Jobs[1].Timeout; got != (Timeout{After: 90 * time.Second, Retries: 2}) {
		t.Errorf("a job's own timeout: %+v", got)
	}
	if FormatDuration(90*time.Minute) != "1h30m" || FormatDuration(6*time.Hour) != "6h" || FormatDuration(90*time.Second) != "1m30s" {
		t.Errorf("FormatDuration: %s %s %s", FormatDuration(90*time.Minute), FormatDuration(6*time.Hour), FormatDuration(90*time.Second))
	}
}

func TestCheckCards(t *testing.T) {
	doc := "name: t\ncommand: [echo]\nheadroom: 1GiB\nmemory: 11GiB\nmatrix: {seed: [1, 2]}\njobs: [{seed: 3, memory: 30GiB}, {seed: 4, gpus_per_job: 3}]\ngpu_plan: \"2,1\"\n"
	s, err := DecodeSweep("t.yaml", []byte(doc), Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	cards := []Card{{Index: 0, Name: "RTX 4090", Total: 24 << 30}, {Index: 1, Name: "RTX 3060", Total: 12 << 30}}
	err = s.CheckCards(cards, "")
	for _, w := range []string{
		"jobs[0].memory (job t.3): the estimate 30.00 GiB is larger than every card: the largest is GPU 0 (RTX 4090, 24.00 GiB, 23.00 GiB after 1.00 GiB headroom)",
		"jobs[1].gpus_per_job (job t.4): needs 3 cards at once but the sweep has 2",
	} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("CheckCards error\n  %v\nwant %q", err, w)
		}
	}
	if err := s.CheckCards(cards[:1], "--gpu-plan"); err == nil || !strings.Contains(err.Error(), "--gpu-plan: the plan has 2 entries but there is 1 card") {
		t.Errorf("plan vs inventory: %v", err)
	}
}

func TestMemoryForms(t *testing.T) {
	doc := `
name: m
command: [python3, train.py, --config, "{config}"]
params: {batch_size: 8, gradient_accumulation_steps: 1, gradient_checkpointing: false}
matrix: {seed: [1, 2], lr: [0.1]}
memory:
  model: {params: 7B, layers: 32, hidden: 4096, vocab: 32000, seq_len: 512, lora_rank: 16,
          micro_batch: "{batch_size}", gradient_checkpointing: "{gradient_checkpointing}"}
host_memory: 6GiB
shape_ignores: [seed, lr]
jobs: [{seed: 3, memory: probe}, {seed: 4, memory: 20GiB, host_memory: 1GiB}]
`
	s, err := DecodeSweep("m.yaml", []byte(doc), Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	j := s.Jobs[0]
	if j.Model == nil || j.Memory == 0 || j.HostMemory != 6<<30 {
		t.Fatalf("job 1: model %v, memory %d, host %d", j.Model, j.Memory, j.HostMemory)
	}
	tiers := Tiers(j.Params, j.Ladder)
	prev := j.Memory
	for _, tier := range tiers[1:] {
		got := j.MemoryAt(tier.Params)
		if got > prev {
			t.Errorf("tier %d (%v): estimate %s grew from %s", tier.N, tier.Changed, FormatSize(got), FormatSize(prev))
		}
		prev = got
	}
	if prev >= j.Memory {
		t.Errorf("the ladder did not lower the model's estimate: %s at tier 0, %s at the last", FormatSize(j.Memory), FormatSize(prev))
	}
	if p := s.Jobs[2]; !p.Probe || p.Model != nil || p.Memory != 0 {
		t.Errorf("jobs[0] is a probe: %+v", p)
	}
	if p := s.Jobs[3]; p.Memory != 20<<30 || p.Model != nil || p.HostMemory != 1<<30 {
		t.Errorf("jobs[1] declares 20GiB and 1GiB of host memory: %+v", p)
	}
	if s.ShapeOf(s.Jobs[0].Params) != s.ShapeOf(s.Jobs[1].Params) {
		t.Errorf("seeds 1 and 2 should be one shape")
	}
	other := s.Jobs[0].Params.Clone()
	other.Set("batch_size", int64(4))
	if s.ShapeOf(other) == s.ShapeOf(s.Jobs[0].Params) {
		t.Errorf("another batch size should be another shape")
	}
	if w := s.Warnings(); len(w) != 0 {
		t.Errorf("warnings: %v", w)
	}
}

func TestMemoryModelLowerBoundWarns(t *testing.T) {
	s, err := DecodeSweep("m.yaml", []byte("name: m\ncommand: [echo]\njobs: [{}]\nmemory: {model: {params: 7B}}\n"), Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	if w := s.Warnings(); !slices.ContainsFunc(w, func(w string) bool { return strings.Contains(w, "lower bound") }) {
		t.Errorf("warnings: %v", w)
	}
}

// TestCommandCheckedBeforeAnythingRuns: a program that does not resolve, or a script or
// config argument that does not exist, stops the sweep with an error naming the job and
// the argument; outputs and placeholders are left alone.
func TestCommandCheckedBeforeAnythingRuns(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	os.Mkdir(bin, 0o755)
	os.WriteFile(filepath.Join(bin, "python3"), []byte("#!/bin/sh\n"), 0o755)
	os.WriteFile(filepath.Join(dir, "train.py"), nil, 0o644)
	os.WriteFile(filepath.Join(dir, "run.sh"), []byte("#!/bin/sh\n"), 0o755)
	os.WriteFile(filepath.Join(dir, "plain.sh"), nil, 0o644)
	t.Setenv("PATH", bin)
	tests := []struct {
		command string
		want    string // "" = accepted
	}{
		{`[python3, train.py, --config, "{config}", --output_dir, out/run.json, --log=x.json]`, ""},
		{`[./run.sh, "{seed}.yaml"]`, ""},
		{`[python3, -c, "import train; train.main() # writes out.json"]`, ""},
		{`[python3, trian.py]`, "command[1] (every job): trian.py does not exist in the workdir " + dir},
		{`[python3, train.py, --config=configs/missing.yaml]`, "command[2] (every job): configs/missing.yaml does not exist"},
		{`[python, train.py]`, "command[0] (every job): python is not on the PATH: install it, activate the environment"},
		{`[run.sh]`, "command[0] (every job): run.sh is not on the PATH; to run the one in the workdir, write ./run.sh"},
		{`[./plain.sh]`, "command[0] (every job): ./plain.sh is not an executable file: chmod +x it"},
		{`[../trainers/train.py]`, "command[0] (every job): ../trainers/train.py does not exist in the workdir"},
	}
	for _, tt := range tests {
		sweep := filepath.Join(dir, "s.yaml")
		os.WriteFile(sweep, []byte("name: c\ncommand: "+tt.command+"\nconfig: {format: json}\nmatrix: {seed: [1, 2]}\n"), 0o644)
		_, err := LoadSweep(sweep, Overrides{})
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: refused: %v", tt.command, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s:\n  got %v\n  want %q", tt.command, err, tt.want)
		}
	}
}

// TestShapeIgnoresKeyOrder: jobs with the same parameters are one shape whatever order
// the file wrote them in, and a shape named by an older gpuq (keys in the file's order,
// numbers as it wrote them) reads as the name given now.
func TestShapeIgnoresKeyOrder(t *testing.T) {
	doc := "name: s\ncommand: [echo, \"{task}\", \"{seed}\"]\nparams: {lr: 0.5, batch_size: 8}\n" +
		"matrix: {task: [sst2], seed: [87]}\njobs: [{seed: 88, task: sst2, lora: {r: 8, alpha: 16}}, {lora: {alpha: 16, r: 8}, task: sst2, seed: 89}]\n"
	s, err := DecodeSweep("s.yaml", []byte(doc), Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	a, b := s.ShapeOf(s.Jobs[1].Params), s.ShapeOf(s.Jobs[2].Params)
	if a != b {
		t.Errorf("one shape, keys in two orders: %q and %q", a, b)
	}
	tier0 := s.ShapeOf(s.Jobs[0].Params)
	for _, tt := range []struct{ old, want string }{
		{"s\x00{\"lr\":0.5,\"batch_size\":8,\"task\":\"sst2\"}", tier0},
		{"s\x00{\"task\":\"sst2\",\"lora\":{\"r\":8,\"alpha\":16},\"lr\":0.5,\"batch_size\":8}", a},
		{"s\x00{\"n\":12345678901234567890,\"f\":1e+21}", "s\x00{\"f\":1e+21,\"n\":12345678901234567890}"},
		{tier0, tier0},
		{"no-params", "no-params"},
	} {
		if got := CanonicalShape(tt.old); got != tt.want {
			t.Errorf("CanonicalShape(%q) = %q, want %q", tt.old, got, tt.want)
		}
	}
}

// TestJobSettingErrorsNameWhereWritten: an error in a job's memory or gpus_per_job names
// the key where it was written: the top level, a matrix axis, the include entry that
// added it to a combination, or a jobs entry; once for the jobs it is the same for.
func TestJobSettingErrorsNameWhereWritten(t *testing.T) {
	cards := []Card{{Index: 0, Name: "RTX 4090", Total: 24 << 30}, {Index: 1, Name: "RTX 4090", Total: 24 << 30}}
	tests := []struct {
		doc  string
		want string
	}{
		{"memory: 30GiB\nmatrix: {seed: [1]}", "t.yaml: memory (job t.1): the estimate 30.00 GiB is larger than every card"},
		{"memory: 30GiB\nmatrix: {seed: [1, 2, 3]}", "t.yaml: memory (every job): the estimate 30.00 GiB is larger than every card"},
		{"memory: 1GiB\nmatrix: {seed: [1, 2], include: [{seed: 2, memory: 30GiB}]}", "t.yaml: matrix.include[0].memory (job t.2): the estimate 30.00 GiB"},
		{"matrix: {seed: [1], include: [{seed: 1, gpus_per_job: 3}]}", "t.yaml: matrix.include[0].gpus_per_job (job t.1): needs 3 cards at once"},
		{"matrix: {seed: [1], memory: [30GiB]}", "t.yaml: matrix.memory (job t.1): the estimate 30.00 GiB"},
		{"jobs: [{memory: 30GiB}]", "t.yaml: jobs[0].memory (job t.1): the estimate 30.00 GiB"},
		{"matrix: {seed: [1, 2], include: [{seed: 2, memory: 9}]}", "t.yaml: matrix.include[0].memory (job t.2): write a size with its unit"},
		{"jobs: [{memory: {model: {params: 1B, seq_len: x}}}]", "t.yaml: jobs[0].memory.model (job t.1): seq_len:"},
		{"memory: {model: {params: 1B, seq_len: x}}\njobs: [{}]", "t.yaml: memory.model (job t.1): seq_len:"},
		// The model's weights and state alone are too large (7B, 16 bytes a parameter),
		// whatever the ladder does to the batch; a batch that is too large is not that.
		{"params: {batch_size: 8, gradient_checkpointing: false}\nmemory: {model: {name: mistral-7b, seq_len: 512, micro_batch: \"{batch_size}\", gradient_checkpointing: \"{gradient_checkpointing}\"}}\njobs: [{}]",
			"t.yaml: memory (job t.1): by its model, its weights and their state alone come to 10"},
		{"params: {batch_size: 512}\nmemory: {model: {name: tinyllama-1.1b, lora_rank: 8, seq_len: 2048, micro_batch: \"{batch_size}\"}}\njobs: [{}]",
			"t.yaml: memory (job t.1): the estimate"},
	}
	for _, tt := range tests {
		s, err := DecodeSweep("t.yaml", []byte("name: t\ncommand: [echo]\n"+tt.doc+"\n"), Overrides{})
		if err == nil {
			err = s.CheckCards(cards, "")
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s:\n  %v\nwant %q", tt.doc, err, tt.want)
		}
	}
}

// TestEnvRefusesWhatGpuqPlaces: a sweep's env may not set the variables gpuq sets for
// each job apart (one value for all would put every job on one card or one port); a
// port from {master_port} is each job's own.
func TestEnvRefusesWhatGpuqPlaces(t *testing.T) {
	for _, tt := range []struct{ env, err string }{
		{`{CUDA_VISIBLE_DEVICES: "1"}`, "env.CUDA_VISIBLE_DEVICES: gpuq sets CUDA_VISIBLE_DEVICES to the cards it places each job on"},
		{`{CUDA_DEVICE_ORDER: FASTEST_FIRST}`, "env.CUDA_DEVICE_ORDER: gpuq numbers cards as NVML"},
		{`{CUDA_DEVICE_ORDER: PCI_BUS_ID}`, ""}, // what gpuq sets anyway
		{`{MASTER_PORT: "29500"}`, "env.MASTER_PORT: gpuq gives each job a free port of its own"},
		{`{GPUQ_JOB_ID: fake}`, "env.GPUQ_JOB_ID: gpuq sets its GPUQ_ variables"},
		{`{MASTER_PORT: "{master_port}", OMP_NUM_THREADS: 4, HF_HOME: /data/hf}`, ""},
	} {
		_, err := DecodeSweep("e.yaml", []byte("name: e\ncommand: [train]\njobs: [{}]\nenv: "+tt.env+"\n"), Overrides{})
		if tt.err == "" && err != nil || tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("env %s: %v; want %q", tt.env, err, tt.err)
		}
	}
}
