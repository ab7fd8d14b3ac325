package alloc

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/gpuq/gpuq/scheduler/state"
)

// TestForgotten: an allocation is forgotten only once it has ended more than KeptFor
// ago; one active is kept however old, and does not count among the last that ended.
func TestForgotten(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	// withdrawn makes allocations withdrawn before they ran, ended so long ago each.
	withdrawn := func(ago ...time.Duration) []*state.Allocation {
		var out []*state.Allocation
		for i, d := range ago {
			out = append(out, &state.Allocation{ID: fmt.Sprint(101 + i), State: state.AllocEnded, Ended: now.Add(-d)})
		}
		return out
	}
	old := KeptFor + time.Second
	active := func(allocs []*state.Allocation, i int, st state.AllocState) []*state.Allocation {
		allocs[i].State, allocs[i].Ended = st, time.Time{}
		return allocs
	}
	for _, tc := range []struct {
		name    string
		removed bool
		allocs  []*state.Allocation
		want    []string
	}{
		{"none", false, nil, nil},
		{"the last few are kept however old", false, withdrawn(old, old, old), nil},
		{"beyond them, ended exactly KeptFor ago", false, withdrawn(KeptFor, old, old, old), nil},
		{"beyond them, ended longer ago", false, withdrawn(old, old, old, old), []string{"101"}},
		{"active ones do not count among the last", false, active(withdrawn(old, old, old, old, 0), 4, state.AllocRunning), []string{"101"}},
		{"active ones are kept", false, active(withdrawn(old, old, old, old), 0, state.AllocQueued), nil},
		{"a removed queue keeps only those ended lately", true, withdrawn(old, KeptFor, old), []string{"103", "101"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Forgotten(&state.AllocQueue{Removed: tc.removed}, tc.allocs, now); !slices.Equal(got, tc.want) {
				t.Errorf("forgotten %v, want %v", got, tc.want)
			}
		})
	}
}
