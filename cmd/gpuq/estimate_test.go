package main

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestEstimateFlags(t *testing.T) {
	out, errOut, code := gpuq(t, "estimate", "--params", "7.24B", "--layers", "32", "--hidden", "4096", "--heads", "32",
		"--ffn", "14336", "--vocab", "32000", "--seq-len", "512", "--micro-batch", "4", "--lora-rank", "16", "--gpus", "sim:2x23.52GiB")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	golden(t, "estimate_lora.txt", out)
}

func TestEstimateJSON(t *testing.T) {
	out, errOut, code := gpuq(t, "estimate", "--params", "7B", "--json", "--gpus", "sim:1x80GiB+1x141GiB")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got struct {
		Total int64            `json:"total_bytes"`
		Parts map[string]int64 `json:"parts"`
		Fits  []struct {
			GPU int `json:"gpu"`
		} `json:"fits"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if got.Parts["weights"]+got.Parts["gradients"]+got.Parts["optimizer"] != 112e9 {
		t.Errorf("7B full fine-tune: %v, want 16 B/param", got.Parts)
	}
	var sum int64
	for _, v := range got.Parts {
		sum += v
	}
	if sum != got.Total || len(got.Fits) != 1 || got.Fits[0].GPU != 1 {
		t.Errorf("total %d of parts %d, fits %v: want the sum, on the 141 GiB card only", got.Total, sum, got.Fits)
	}
}

func TestEstimateSweepJSON(t *testing.T) {
	out, errOut, code := gpuq(t, "estimate", "../../examples/sweeps/torch-80g.yaml", "--gpus", "sim:8x80GiB", "--json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got struct {
		Jobs []struct {
			Job    string           `json:"job"`
			Source string           `json:"source"`
			Total  int64            `json:"total_bytes"`
			Parts  map[string]int64 `json:"parts"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(got.Jobs) != 6 || got.Jobs[0].Source != "model" || got.Jobs[0].Parts["activations"] == 0 {
		t.Errorf("%+v", got.Jobs)
	}
}

func TestEstimateBadInput(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"estimate"}, "describe the model"},
		{[]string{"estimate", "--params", "7B", "--precision", "nf4"}, "give --lora-rank"},
		{[]string{"estimate", "--params", "lots"}, "--params:"},
		{[]string{"estimate", "--params", "7B", "sweep.yaml"}, "not both"},
		{[]string{"estimate", "a.yaml", "b.yaml"}, "accepts at most 1 arg"},
	} {
		_, errOut, code := gpuq(t, tt.args...)
		if code != exitBadInput || !strings.Contains(errOut, tt.want) {
			t.Errorf("%v: exit %d, %q; want exit %d and %q", tt.args, code, errOut, exitBadInput, tt.want)
		}
	}
}
