package scheduler

import (
	"strings"
	"testing"

	"github.com/gpuq/gpuq/plans"
)

func TestSubmitQueuesJobs(t *testing.T) {
	doc := `
name: q
command: [echo]
matrix:
  seed: [1, 2, 3]
  include: [{seed: 3, priority: 5}, {seed: 9, priority: -1}]
`
	sw, err := plans.DecodeSweep("q.yaml", []byte(doc), plans.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := NewStore()
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Submit(&Submission{Sweep: sw}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, j := range st.Queue() {
		got = append(got, j.ID)
	}
	if want := "q.3 q.1 q.2 q.4"; strings.Join(got, " ") != want {
		t.Errorf("queue = %v, want %s (priority first, then submission: no job has an estimate)", got, want)
	}
	if n := len(st.Snapshot().Jobs()); n != 4 {
		t.Errorf("jobs = %d", n)
	}
	if err := st.Submit(&Submission{Sweep: sw}); err == nil {
		t.Error("submitting the same job ids twice was accepted")
	}
}
