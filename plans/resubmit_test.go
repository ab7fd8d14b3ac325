package plans

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// A sweep expanded again as submitted is the sweep its submission expanded: every
// field of every job, those its ladder and its model's estimate set included.
func TestResubmitSweepIsTheSubmitted(t *testing.T) {
	docs := map[string]string{
		"sweeps/gla.yaml": issueSweep,
		"model.yaml": "name: m\ncommand: [train, \"{seed}\"]\nmatrix: {seed: [1, 2], micro: [4, 8]}\nparams: {batch_size: 8}\n" +
			"memory: {model: {params: 1B, layers: 16, hidden: 2048, vocab: 32000, seq_len: 1024, micro_batch: \"{micro}\"}}\n" +
			"oom: {ladder: [{scale: {batch_size: 0.5}, repeat: true}]}\n",
		"after.yaml":    "name: b\ncommand: [train]\nafter: [x]\njobs: [{seed: 1}, {seed: 2, after: [b.1]}]\n",
		"named.yaml":    "name: n\ncommand: [train, \"{lr}\"]\njob_name: \"{sweep}-{lr}\"\nmatrix: {lr: [0.1, 0.01]}\nshape_ignores: [lr]\n",
		"included.yaml": "name: i\ncommand: [train]\nmatrix: {seed: [1, 2], include: [{seed: 1, memory: 3GiB, priority: 2}]}\nmemory: 1GiB\n",
	}
	matches, _ := filepath.Glob("../examples/sweeps/*.yaml")
	for _, path := range matches {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		docs[path] = string(data)
	}
	for file, doc := range docs {
		t.Run(file, func(t *testing.T) {
			submitted, err := DecodeSweepFiles(file, []byte(doc), nil, Overrides{})
			if err != nil {
				t.Fatal(err)
			}
			again, err := ResubmitSweep(file, []byte(doc), submitted.Files, submitted.Overrides)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(again, submitted) {
				t.Errorf("expanded again:\n%+v\nsubmitted:\n%+v", again, submitted)
			}
		})
	}
}

// What checks a submitted sweep's jobs and sets nothing of them is not done again;
// what reads the document is.
func TestResubmitSweepLeavesOutTheJobChecks(t *testing.T) {
	for _, tc := range []struct{ doc, refused string }{
		{"name: t\ncommand: [echo, \"{seed}\"]\nmatrix: {seed: [1, 2]}\njobs: [{seed: 1}]\n", "the same job as t.1"},
		{"name: t\ncommand: [python3, train.py, --lr, \"{lr}\"]\nmatrix: {seed: [1, 2]}\n", "no parameter fills {lr}"},
		{"name: t\ncommand: [echo]\nenv: {X: \"{lr}\"}\nmatrix: {seed: [1, 2]}\n", "no parameter fills {lr}"},
		// Refused since a daemon may have taken such a sweep: it starts again with it.
		{"name: t\ncommand: [echo]\nenv: {CUDA_VISIBLE_DEVICES: \"1\"}\nmatrix: {seed: [1, 2]}\n", "env.CUDA_VISIBLE_DEVICES"},
		{"name: t\ncommand: [echo, \"{seed}\"]\nmatrix: {seed: [1, 2], exlude: [{seed: 2}]}\n", "did you mean exclude?"},
	} {
		if _, err := DecodeSweep("t.yaml", []byte(tc.doc), Overrides{}); err == nil || !strings.Contains(err.Error(), tc.refused) {
			t.Fatalf("%q: submitted: %v, want it refused (%s)", tc.doc, err, tc.refused)
		}
		if sw, err := ResubmitSweep("t.yaml", []byte(tc.doc), nil, Overrides{}); err != nil || len(sw.Jobs) < 2 {
			t.Errorf("%q: expanded again: %v", tc.doc, err)
		}
	}
	for _, doc := range []string{
		"name: t\ncommand: [echo]\nmatrix: {seed: [1]}\nmemory: lots\n",
		"name: t\ncommand: [echo]\nmatrix: {seed: [1]}\ngpu_plna: \"2\"\n",
		"name: t\ncommand: [echo]\nmatrix: {seed: [1, 2]}\noom: {ladder: [{scale: {batch_sise: 0.5}}]}\nparams: {batch_size: 4}\n",
	} {
		if _, err := ResubmitSweep("t.yaml", []byte(doc), nil, Overrides{}); err == nil {
			t.Errorf("%q: expanded again without an error", doc)
		}
	}
}
