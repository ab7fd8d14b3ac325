package main

import (
	"slices"
	"strings"

	"github.com/gpuq/gpuq/plans"
)

// outsideAfter names what a sweep's jobs run after that is not the sweep's own: other
// sweeps and their jobs, which gpuq run, running one sweep alone, cannot wait for.
func outsideAfter(sw *plans.Sweep) []string {
	own := map[string]bool{}
	for _, j := range sw.Jobs {
		own[j.ID] = true
	}
	var out []string
	for _, j := range sw.Jobs {
		for _, name := range j.After {
			if !own[name] && !slices.Contains(out, name) {
				out = append(out, name)
			}
		}
	}
	return out
}

// outsideAfterText says what outsideAfter found, and what to do.
func outsideAfterText(sw *plans.Sweep, names []string) string {
	return sw.File + ": after: " + strings.Join(names, ", ") + " is not of this sweep: gpuq run runs one sweep alone; " +
		"gpuq submit it, and the daemon waits for " + strings.Join(names, ", ")
}

// blockedJobs are a sweep's jobs that wait for what they run after, as a sweep just
// submitted has them: every job with an after.
func blockedJobs(sw *plans.Sweep) []plans.Job {
	var out []plans.Job
	for _, j := range sw.Jobs {
		if len(j.After) > 0 {
			out = append(out, j)
		}
	}
	return out
}

// afterWhy is why a job of a sweep just submitted waits for what it runs after.
func afterWhy(j plans.Job) string {
	return "runs after " + j.AfterText() + ", which must succeed first"
}
