package scheduler

import (
	"testing"
)

// TestUnknownNames: a job or sweep that does not exist is refused with what was
// probably meant.
func TestUnknownNames(t *testing.T) {
	ids := []string{"gla-e1.1", "gla-e1.2", "gla-e1.3", "v1.5.1"}
	tests := []struct {
		got  error
		want string
	}{
		{NoJob("gla-e1", ids), `no job "gla-e1": that is a sweep, of jobs gla-e1.1 to gla-e1.3 (gpuq status --sweep gla-e1 lists them)`},
		{NoJob("v1.5", ids), `no job "v1.5": that is a sweep, of jobs v1.5.1 (gpuq status --sweep v1.5 lists them)`},
		{NoJob("gla-e1.9", ids), `no job "gla-e1.9": sweep gla-e1 has jobs gla-e1.1 to gla-e1.3`},
		{NoJob("gla-e2.1", ids), `no job "gla-e2.1": there is no sweep gla-e2 (did you mean "gla-e1"?)`},
		{NoJob("nothing-like-it", ids), `no job "nothing-like-it"; gpuq status lists them`},
		{NoSweep("gla-e1.2", ids), `no sweep "gla-e1.2": gla-e1.2 is a job, of sweep gla-e1`},
		{NoSweep("gla-1e", ids), `no sweep "gla-1e" (did you mean "gla-e1"?); gpuq status lists them`},
		{NoSweep("x", nil), `no sweep "x"; gpuq status lists them`},
		// A name that shares little with any is offered none: boom is no slip of nope.
		{NoSweep("nope", []string{"boom.1", "quickstart.1"}), `no sweep "nope"; gpuq status lists them`},
		{NoJob("nope.1", []string{"boom.1"}), `no job "nope.1"; gpuq status lists them`},
	}
	for _, tt := range tests {
		if tt.got.Error() != tt.want {
			t.Errorf("got  %s\nwant %s", tt.got, tt.want)
		}
	}
}
