package plans

import (
	"strings"
	"testing"
)

// TestJobNames: a job is named by job_name filled with its parameters, or by default
// by the values of its point that differ between jobs and that the others do not
// determine (text alone, numbers after their key), every one key=value where that would
// name two jobs alike, and numbered where even that would; a job of params as written,
// beside jobs that set it apart by a parameter, by the values params give it, not by
// the sweep's name, which names no value (as PointOf names its point);
// job_name that names two jobs alike, or fills from nothing, is refused.
func TestJobNames(t *testing.T) {
	const head = "name: s\ncommand: [echo]\nmemory: 1GiB\n"
	for _, tc := range []struct {
		name, doc string
		want      []string
		err       string
	}{
		{"varying values, text alone", "matrix: {task: [glue-tvt_qnli, glue-sst2], seed: [87, 88], lr: [1e-4]}\n",
			[]string{"glue-tvt_qnli,seed=87", "glue-tvt_qnli,seed=88", "glue-sst2,seed=87", "glue-sst2,seed=88"}, ""},
		{"a boolean after its key", "matrix: {ckpt: [true, false]}\n", []string{"ckpt=true", "ckpt=false"}, ""},
		{"a mapping by its leaves", "matrix: {training: [{batch_size: 16}, {batch_size: 32, lr: 0.1}], seed: [1]}\n",
			[]string{"training.batch_size=16", "training.batch_size=32,training.lr=0.1"}, ""},
		{"a list as JSON", "matrix: {layers: [[1, 2], [3]]}\n", []string{"layers=[1,2]", "layers=[3]"}, ""},
		{"a template's mapping as JSON", "job_name: \"{opt}\"\nmatrix: {opt: [{name: adam, betas: [0.9, 0.99]}, {name: sgd}]}\n",
			[]string{`{"name":"adam","betas":[0.9,0.99]}`, `{"name":"sgd"}`}, ""},
		{"one job is the sweep", "jobs: [{}]\n", []string{"s"}, ""},
		{"what an include adds is told by the axis", "matrix: {task: [sst2, rte], seed: [1, 2], include: [{task: rte, sim_base: 4GiB, sim_activations: 26GiB}]}\n",
			[]string{"sst2,seed=1", "sst2,seed=2", "rte,seed=1", "rte,seed=2"}, ""},
		{"a key the others determine", "jobs: [{a: x, b: y}, {b: x, a: y}]\n", []string{"x", "y"}, ""},
		{"text alone would collide", "jobs: [{a: x, b: y}, {b: x, a: y}, {a: x, b: x}]\n", []string{"a=x,b=y", "b=x,a=y", "a=x,b=x"}, ""},
		{"params as written, beside a job that sets a parameter", "params: {lr: 0.001}\njobs: [{}, {lr: 0.01}]\n", []string{"lr=0.001", "lr=0.01"}, ""},
		{"params as written, the seeds alike", "params: {lr: 0.001}\njobs: [{seed: 1}, {seed: 1, lr: 0.01}]\n", []string{"lr=0.001", "lr=0.01"}, ""},
		{"params as written, by the keys kept", "params: {lr: 0.001, warmup: 0}\njobs: [{}, {warmup: 10, lr: 0.01}]\n", []string{"warmup=0", "warmup=10"}, ""},
		{"params as written, of a parameter params lacks", "params: {lr: 0.001}\njobs: [{}, {warmup: 10}]\n", []string{"s", "warmup=10"}, ""},
		{"numbered when the points are alike", "jobs: [{task: a}, {task: a, memory: 2GiB}]\n", []string{"task=a#1", "task=a#2"}, ""},
		{"template", "job_name: \"{task}-s{seed}\"\nmatrix: {task: [sst2, rte], seed: [1, 2]}\n",
			[]string{"sst2-s1", "sst2-s2", "rte-s1", "rte-s2"}, ""},
		{"template with the sweep and a param", "job_name: \"{sweep}/{lr}\"\nparams: {lr: 3e-5}\nmatrix: {seed: [1]}\n",
			[]string{"s/3e-5"}, ""},
		{"template naming two jobs alike", "job_name: \"{task}\"\nmatrix: {task: [sst2], seed: [1, 2]}\n", nil,
			`job_name: "sst2" names both s.1 (task=sst2,seed=1) and s.2 (task=sst2,seed=2): add a parameter that tells them apart`},
		{"template from nothing", "job_name: \"{tsak}\"\nmatrix: {task: [sst2]}\n", nil,
			`job_name: no parameter fills {tsak} (did you mean "task"?)`},
		{"an attempt's placeholder", "job_name: \"{attempt}\"\nmatrix: {task: [sst2]}\n", nil, "no parameter fills {attempt}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := DecodeSweep("s.yaml", []byte(head+tc.doc), Overrides{})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, j := range s.Jobs {
				got = append(got, j.Name)
			}
			if strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Errorf("names %q, want %q", got, tc.want)
			}
		})
	}
}
