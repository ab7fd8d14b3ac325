package state

import "testing"

// TestToldStates: a state reads as English in a sentence about a job.
func TestToldStates(t *testing.T) {
	for s, want := range map[JobState]string{JobQueued: "is queued", JobHeld: "is held", JobRunning: "is running",
		JobSucceeded: "succeeded", JobFailed: "failed", JobCancelled: "was cancelled"} {
		if got := s.Told(); got != want {
			t.Errorf("%s: %q, want %q", s, got, want)
		}
	}
}
