package api

import (
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/gpuq/gpuq/plans"
	"github.com/gpuq/gpuq/scheduler/state"
)

// BenchmarkWriteJobs measures status --json's listing of 10,000 queued jobs: what it
// allocates is garbage the daemon's heap grows by while it answers.
//
//	go test -run '^$' -bench WriteJobs -benchmem -count 6 ./scheduler/daemon/api/
func BenchmarkWriteJobs(b *testing.B) {
	sw, err := plans.DecodeSweep("w.yaml", []byte(fmt.Sprintf("name: w\ncommand: [echo, '{seed}']\nmemory: 1GiB\nmatrix: {seed: %s}\n", seeds(10000))), plans.Overrides{})
	if err != nil {
		b.Fatal(err)
	}
	st, _ := state.NewStore()
	if err := st.Submit(&state.Submission{Sweep: sw}); err != nil {
		b.Fatal(err)
	}
	view := st.View()
	jobs := view.Jobs()
	b.ReportAllocs()
	for b.Loop() {
		if err := WriteJobs(io.Discard, view, jobs, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// seeds is a YAML list of n seeds.
func seeds(n int) string {
	var b strings.Builder
	b.WriteString("[0")
	for i := 1; i < n; i++ {
		fmt.Fprintf(&b, ",%d", i)
	}
	b.WriteString("]")
	return b.String()
}
