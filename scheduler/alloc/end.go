package alloc

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// DrainAhead is how long before its allocation ends a worker stops: it takes no job that
// would not end by then, and stops what still runs then, so that those jobs go back to
// the queue at once rather than being killed by Slurm (SIGTERM at the limit, SIGKILL
// KillWait later, 30 s by default) and found lost after a grace period.
const DrainAhead = 2 * time.Minute

// AllocationEnd is when the Slurm allocation this process runs in ends: what
// SLURM_JOB_END_TIME says, where Slurm sets it, or else what squeue says of
// SLURM_JOB_ID. Outside an allocation (no SLURM_JOB_ID) it is zero, with no error.
func AllocationEnd(ctx context.Context, getenv func(string) string, s Slurm) (time.Time, error) {
	if v := strings.TrimSpace(getenv("SLURM_JOB_END_TIME")); v != "" {
		if t := unixTime(v); !t.IsZero() {
			return t, nil
		}
	}
	id := strings.TrimSpace(getenv("SLURM_JOB_ID"))
	if id == "" {
		return time.Time{}, nil
	}
	if _, err := strconv.ParseUint(id, 10, 64); err != nil {
		return time.Time{}, fmt.Errorf("SLURM_JOB_ID %q is not a job id", id)
	}
	end, err := s.EndOf(ctx, id)
	if err != nil {
		return time.Time{}, fmt.Errorf("when Slurm job %s ends: %w", id, err)
	}
	return end, nil
}
