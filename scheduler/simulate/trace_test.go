package simulate

import (
	"strings"
	"testing"

	"github.com/gpuq/gpuq/plans"
)

func TestDecodeExpandsCounts(t *testing.T) {
	tr, err := Decode("t.yaml", []byte(`
gpus: "sim:2x24GiB"
gpu_plan: "2,1"
params: {batch_size: 8}
jobs:
  - {name: a, estimate: 10GiB, base: 3GiB, activations: 6GiB, duration: 45m, count: 3}
  - {name: b, base: 1GiB, duration: 90, params: {num_data_workers: 0}}
`), plans.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(tr.Sweep.Jobs); n != 4 {
		t.Fatalf("%d jobs, want 4", n)
	}
	if tr.Sweep.Name != "t" || tr.Sweep.Jobs[0].Memory != 10*gib || tr.Sweep.Jobs[3].Memory != 0 {
		t.Errorf("sweep %q, memories %d %d", tr.Sweep.Name, tr.Sweep.Jobs[0].Memory, tr.Sweep.Jobs[3].Memory)
	}
	if got := tr.Truth(3); got.Base != gib || got.Duration.Seconds() != 90 {
		t.Errorf("truth of b: %+v", got)
	}
	if b, _ := tr.Sweep.Jobs[0].Params.Get(plans.KeyBatch); b != int64(8) {
		t.Errorf("params override the defaults: batch_size %v", b)
	}
	if w, _ := tr.Sweep.Jobs[3].Params.Get(plans.KeyDataWorkers); w != int64(0) {
		t.Errorf("a job's params override the trace's: num_data_workers %v", w)
	}
	if len(tr.Sweep.Jobs[0].Ladder) != 3 {
		t.Errorf("default params give the default ladder: %d rungs", len(tr.Sweep.Jobs[0].Ladder))
	}
	if s := tr.Slots(); len(s) != 2 || s[0] != 2 || s[1] != 1 {
		t.Errorf("slots %v", s)
	}
	if tr.Cost != 0 || tr.Truth(0).Util != 0 {
		t.Errorf("without gpu_util and colocation_cost sharing is free: cost %v, util %v", tr.Cost, tr.Truth(0).Util)
	}
	tr, err = Decode("t.yaml", []byte(`
gpus: "sim:1x24GiB"
colocation_cost: 5%
jobs: [{name: a, base: 1GiB, duration: 1h, gpu_util: 0.45}, {name: b, base: 1GiB, duration: 1h, gpu_util: 100%}]
`), plans.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	if tr.Cost != 0.05 || tr.Truth(0).Util != 0.45 || tr.Truth(1).Util != 1 {
		t.Errorf("cost %v, utils %v %v", tr.Cost, tr.Truth(0).Util, tr.Truth(1).Util)
	}
}

// TestCopiesAreMadeWhole: a trace's jobs, counts expanded, are made at their number
// at once, not grown by appends: a fleet's million were copied over and over, and kept
// a quarter more room than they use.
func TestCopiesAreMadeWhole(t *testing.T) {
	tr, err := Decode("t.yaml", []byte(`{gpus: "sim:1x24GiB", jobs: [{name: a, base: 3GiB, duration: 1h, count: 5}]}`), plans.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	if j, e := tr.Sweep.Jobs, tr.Entry; len(j) != 5 || cap(j) != 5 || len(e) != 5 || cap(e) != 5 {
		t.Errorf("jobs %d (room for %d), entries %d (room for %d); want 5 of each, and room for no more", len(j), cap(j), len(e), cap(e))
	}
}

func TestDecodeRefusesBadTraces(t *testing.T) {
	for _, c := range []struct{ doc, want string }{
		{`{gpus: "sim:1x24GiB", jobz: []}`, `jobz: unknown key (did you mean "jobs"?)`},
		{`{gpus: "sim:1x24GiB", jobs: []}`, `jobs: write a list of jobs`},
		{`{gpus: "sim:1x24GiB", jobs: [{name: a, duration: 1h}]}`, `jobs[0]: needs base`},
		{`{gpus: "sim:1x24GiB", jobs: [{name: a, base: 3G, duration: 1h}]}`, `jobs[0].base: "3G" has an unknown unit`},
		{`{gpus: "sim:1x24GiB", jobs: [{name: a, base: 3GiB, duration: soon}]}`, `jobs[0].duration: "soon" is not a duration`},
		{`{gpus: "sim:1x24GiB", jobs: [{name: a, base: 3GiB, duration: 1h, count: 0}]}`, `jobs[0].count: write how many`},
		{`{gpus: "sim:1x24GiB", jobs: [{name: a, base: 3GiB, duration: 1h, estmate: 4GiB}]}`, `jobs[0].estmate: unknown key (did you mean "estimate"?)`},
		{`{gpus: "sim:1x24GiB", jobs: [{name: a, base: 3GiB, duration: 1h}, {name: a, base: 3GiB, duration: 2h}]}`, `jobs[1].name: "a" is the name of jobs[0] too`},
		{`{gpus: "0,1", jobs: [{name: a, base: 3GiB, duration: 1h}]}`, `gpus: a trace runs on simulated cards`},
		{`{gpus: "sim:2x24GiB", gpu_plan: "1,1,1", jobs: [{name: a, base: 3GiB, duration: 1h}]}`, `gpu_plan`},
		{`{gpus: "sim:1x24GiB", jobs: [{name: a, estimate: 30GiB, base: 3GiB, duration: 1h}]}`, `larger than every card`},
		{`{gpus: "sim:1x24GiB", jobs: [{name: a, base: 3GiB, duration: 1h, gpu_util: 1.5}]}`, `jobs[0].gpu_util: 1.5 is not a share above 0 and at most 1`},
		{`{gpus: "sim:1x24GiB", jobs: [{name: a, base: 3GiB, duration: 1h, gpu_util: 0}]}`, `jobs[0].gpu_util: 0 is not a share`},
		{`{gpus: "sim:1x24GiB", jobs: [{name: a, base: 3GiB, duration: 1h, gpu_util: busy}]}`, `jobs[0].gpu_util: "busy" is not a share`},
		{`{gpus: "sim:1x24GiB", colocation_cost: 1, jobs: [{name: a, base: 3GiB, duration: 1h}]}`, `colocation_cost: 1 is not a share from 0 to below 1`},
	} {
		_, err := Decode("t.yaml", []byte(c.doc), plans.Overrides{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s:\n got %v\nwant %q", c.doc, err, c.want)
		}
	}
}

// TestSharesAsWritten: a share written with more digits than its value needs (1.00,
// 0.050, as traces copied from a table are) is that value, not a refusal.
func TestSharesAsWritten(t *testing.T) {
	tr, err := Decode("t.yaml", []byte(`{gpus: "sim:1x24GiB", colocation_cost: 0.050, jobs: [{name: a, base: 3GiB, duration: 1h, gpu_util: 1.00}, {name: b, base: 3GiB, duration: 1h, gpu_util: 45%}]}`), plans.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	if tr.Cost != 0.05 || tr.Truth(0).Util != 1 || tr.Truth(1).Util != 0.45 {
		t.Errorf("colocation_cost %v, gpu_util %v and %v; want 0.05, 1 and 0.45", tr.Cost, tr.Truth(0).Util, tr.Truth(1).Util)
	}
}
