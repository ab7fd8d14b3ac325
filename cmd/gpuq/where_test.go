package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
)

// pointJobs are jobs of sweep s at the points of task × seed.
func pointJobs() []api.Job {
	var jobs []api.Job
	for i, p := range []struct {
		task string
		seed int64
	}{{"sst2", 87}, {"sst2", 88}, {"rte", 87}, {"rte", 88}} {
		j := job("s."+string(rune('1'+i)), "running")
		j.Params = plans.NewMap()
		j.Params.Set("task", p.task)
		j.Params.Set("seed", p.seed)
		jobs = append(jobs, j)
	}
	return jobs
}

// TestWhereSelectsByPoint: gpuq status --where lists the jobs at those values, in a
// table or as JSON (not the daemon's listing streamed whole); gpuq
// logs --where finds the one job there, and refuses a selection of several (naming
// them) or none; cancel, retry, hold and release send the selection to the daemon; a
// malformed selection or an unknown key is bad input that names the key meant.
func TestWhereSelectsByPoint(t *testing.T) {
	d := &fakeDaemon{listings: [][]api.Job{pointJobs()}}
	ios, out, _ := buffers()
	if err := runStatus(&statusOptions{io: ios, client: d.client, now: time.Now, where: "task=sst2|rte,seed=88"}, nil); err != nil {
		t.Fatal(err)
	}
	if got := idsIn(out.String()); got != "s.2 s.4" {
		t.Errorf("status --where task=sst2|rte,seed=88 lists %q:\n%s", got, out)
	}
	ios, out, _ = buffers()
	if err := runStatus(&statusOptions{io: ios, client: d.client, now: time.Now, where: "task=sst2|rte,seed=88", json: true}, nil); err != nil {
		t.Fatal(err)
	}
	var listing api.JobsResponse
	if err := json.Unmarshal([]byte(out.String()), &listing); err != nil || len(listing.Jobs) != 2 || listing.Jobs[0].ID != "s.2" || listing.Jobs[1].ID != "s.4" {
		t.Errorf("status --json --where task=sst2|rte,seed=88 printed (%v):\n%s", err, out)
	}
	ios, out, _ = buffers()
	if err := runStatus(&statusOptions{io: ios, client: d.client, now: time.Now, where: "task=mnli", json: true}, nil); err != nil || !strings.Contains(out.String(), `"jobs": []`) {
		t.Errorf("status --json --where of no job printed (%v), want an empty list:\n%s", err, out)
	}
	for _, tc := range []struct {
		where, id, err string
	}{
		{"task=rte,seed=87", "s.3", ""},
		{"seed=87", "", "2 jobs where seed=87: s.1 (seed=1), s.3 (seed=3); name one, or give --where more keys"},
		{"task=mnli", "", "no job where task=mnli; gpuq status lists them"},
		{"sede=87", "", `--where: no job has a parameter "sede" (did you mean "seed"?)`},
		{"task", "", `--where: "task" is not key=value`},
	} {
		id, err := logsJob(&logsOptions{client: d.client, where: tc.where}, nil)
		if code, msg := exitOf(err); id != tc.id || tc.err != "" && (code != exitBadInput || !strings.Contains(msg, tc.err)) {
			t.Errorf("logs --where %s: %q, exit %d %q; want %q %q", tc.where, id, code, msg, tc.id, tc.err)
		}
	}
	// Jobs of two sweeps at one point: --sweep tells them apart.
	two := pointJobs()[:1]
	other := job("t.1", "running")
	other.Params = two[0].Params
	two = append(two, other)
	if _, err := logsJob(&logsOptions{client: (&fakeDaemon{listings: [][]api.Job{two}}).client, where: "task=sst2"}, nil); err == nil || !strings.Contains(err.Error(), "name one, or give --sweep (they are of s, t) or --where more keys") {
		t.Errorf("logs --where of jobs of two sweeps: %v", err)
	}
	if _, err := logsJob(&logsOptions{client: d.client, where: "seed=87"}, []string{"s.1"}); exitCode(err) != exitBadInput {
		t.Errorf("logs ID --where: %v", err)
	}
	ios, out, _ = buffers()
	d.changed = nil
	if err := runSelect(&selectOptions{io: ios, client: d.client, verb: api.Hold, done: "held", sweep: "s", where: "seed=88"}, nil); err != nil {
		t.Fatal(err)
	}
	if len(d.acted) != 1 || d.acted[0].Sweep != "s" || d.acted[0].Where != "seed=88" || out.String() != "no job of s where seed=88 to hold (it holds jobs that have not ended and are not held already; gpuq status shows their states)\n" {
		t.Errorf("hold --sweep s --where seed=88 asked %+v and said %q", d.acted, out)
	}
	if err := runSelect(&selectOptions{io: ios, client: d.client, verb: api.Hold, where: "seed=88"}, []string{"s.1"}); exitCode(err) != exitBadInput {
		t.Errorf("hold ID --where: %v", err)
	}
}

// idsIn are the job ids that begin the lines of a listing, in order.
func idsIn(listing string) string {
	var ids []string
	for _, l := range strings.Split(listing, "\n") {
		if f := strings.Fields(l); len(f) > 0 && strings.HasPrefix(f[0], "s.") {
			ids = append(ids, f[0])
		}
	}
	return strings.Join(ids, " ")
}
