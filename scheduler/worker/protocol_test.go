package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/gpu/nvidia"
	"github.com/gpuq/gpuq/scheduler/schedtest"
)

// TestAWorkerKnowsItsDaemonsProtocol: a worker leaves a daemon whose Welcome says
// another protocol of the link, for good, naming both gpuqs and what to do, and takes
// up nothing of it; it links to a daemon from before Welcome said its protocol (the
// first) and gpuq, and to one of another build that speaks its own, warning of that
// in its log once, not of one that differs only by its Go or by changes not committed.
// A Welcome with fields the worker does not know (a newer daemon's) is read all the
// same.
func TestAWorkerKnowsItsDaemonsProtocol(t *testing.T) {
	const mine = "v0.0.0-20260301090000-0123456789ab (commit 0123456789ab, 2026-03-01T09:00:00Z), built with go1.24.2"
	var log schedtest.Buffer
	w, err := open(Config{Name: "w1", Dir: filepath.Join(t.TempDir(), "workers", "w1"), GPUs: plans.Override{Value: "sim:1x24GiB", Source: "test"},
		Inventory: nvidia.Options{Ledger: filepath.Join(t.TempDir(), "ledger")}, Version: mine, Server: "login1:7070", Log: &log})
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	// welcome hands the worker the Welcome of json, as its link reads it, and says what
	// it answered and logged.
	welcome := func(doc string) (answer string, logged string, err error) {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		msgs, broken := receive(ctx, strings.NewReader(doc))
		var m api.DaemonMessage
		select {
		case m = <-msgs:
		case err := <-broken:
			t.Fatalf("the worker cannot read %s: %v", doc, err)
		}
		if m.Welcome == nil {
			t.Fatalf("no Welcome read of %s", doc)
		}
		log = schedtest.Buffer{}
		w.linked, w.hello = false, w.lease.beat()
		var out bytes.Buffer
		err = w.welcome(json.NewEncoder(&out), m.Welcome)
		return out.String(), log.String(), err
	}
	const other = "v0.5.0 (commit ba9876543210, 2026-03-02T09:00:00Z), built with go1.24.1"
	const times = `"lease":20000000000,"stop":5000000000,"beat":2000000000,"attempts":[]`

	answer, logged, err := welcome(fmt.Sprintf(`{"welcome":{%s,"protocol":%d,"version":"v0.9.0, built with go1.27.0"}}`, times, api.WorkerProtocol+1))
	want := fmt.Sprintf("the daemon at login1:7070 runs gpuq v0.9.0, built with go1.27.0, which speaks protocol %d of the worker link, "+
		"and this worker runs gpuq %s, which speaks protocol %d: the two would misread each other; run one gpuq on both", api.WorkerProtocol+1, mine, api.WorkerProtocol)
	if !errors.Is(err, errOtherProtocol) || !final(err) || !strings.Contains(err.Error(), want) {
		t.Errorf("a daemon of another protocol: %v; want the worker to leave, saying %q", err, want)
	}
	if answer != "" || w.linked || strings.Contains(logged, "linked to the daemon") {
		t.Errorf("a daemon of another protocol: answered %q, linked %v; logged:\n%s", answer, w.linked, logged)
	}

	for _, tc := range []struct {
		name, doc, says string
		warned          bool
	}{
		{"one from before", `{"welcome":{` + times + `}}`, "(an older gpuq, which does not say its version)", false},
		{"another build", `{"welcome":{` + times + `,"protocol":1,"version":"` + other + `"}}`, "(gpuq " + other + ")", true},
		{"the same again", `{"welcome":{` + times + `,"protocol":1,"version":"` + other + `"}}`, "(gpuq " + other + ")", false},
		{"its commit, dirty, by another Go, and newer", `{"welcome":{` + times + `,"protocol":1,"version":"v0.0.0-20260301090000-0123456789ab+dirty ` +
			`(commit 0123456789ab, 2026-03-01T09:00:00Z, with changes not committed), built with go1.26.0","later":{"x":[1]}},"later":true}`,
			"(gpuq v0.0.0-20260301090000-0123456789ab+dirty", false},
	} {
		answer, logged, err := welcome(tc.doc)
		if err != nil || !w.linked || !strings.Contains(answer, `"beat"`) {
			t.Errorf("%s: %v, linked %v, answered %q; want linked, and a beat", tc.name, err, w.linked, answer)
		}
		if !strings.Contains(logged, "linked to the daemon at login1:7070 "+tc.says) {
			t.Errorf("%s: the log does not say the daemon's gpuq %q:\n%s", tc.name, tc.says, logged)
		}
		warning := "warning: the daemon at login1:7070 runs gpuq " + other + ", and this worker gpuq " + mine
		if strings.Contains(logged, warning) != tc.warned || strings.Contains(logged, "warning:") != tc.warned {
			t.Errorf("%s: warned %v, want %v:\n%s", tc.name, !tc.warned, tc.warned, logged)
		}
	}
}

// TestAnOtherProtocolEndsTheWorker: a worker that has left a daemon of another
// protocol does not link again: it would end the same way.
func TestAnOtherProtocolEndsTheWorker(t *testing.T) {
	for _, tc := range []struct {
		err   error
		final bool
	}{
		{fmt.Errorf("%w: the daemon at x runs gpuq v2", errOtherProtocol), true},
		{fmt.Errorf("%w: another gpuq worker named n1", errRefused), true},
		{errors.New("link to the daemon at x: EOF"), false},
		{errLapsed, false},
	} {
		if got := final(tc.err); got != tc.final {
			t.Errorf("final(%v) = %v, want %v", tc.err, got, tc.final)
		}
	}
}
