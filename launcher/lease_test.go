package launcher

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/gpuq/gpuq/plans"
)

// TestLeaseLapseStopsTheTrainer: a supervised trainer runs while its lease is renewed,
// and is stopped, its attempt recorded as fenced, once the lease lapses.
func TestLeaseLapseStopsTheTrainer(t *testing.T) {
	for _, tt := range []struct {
		name   string
		script string
		fenced bool
	}{
		{"a trainer running when the lease lapses", "echo started; sleep 60", true},
		{"a trainer that ends in time", "echo started; exit 0", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			lease := filepath.Join(dir, "lease")
			if err := RenewLease(lease, time.Now().Add(time.Minute)); err != nil {
				t.Fatal(err)
			}
			spec := Spec{Command: Command{Argv: []string{"sh", "-c", tt.script}, Dir: dir, Env: os.Environ()}, Lease: lease}
			leader, err := StartSupervisor([]string{os.Args[0]}, dir, spec)
			if err != nil {
				t.Fatal(err)
			}
			ended := make(chan struct{})
			go func() {
				Wait(dir)
				close(ended)
			}()
			// Renewed: it runs on past the supervisor's first reads of the lease.
			time.Sleep(3 * leaseCheck)
			if ended, _ := ReadEnded(dir); tt.fenced && ended != nil {
				t.Fatalf("the trainer ended under a lease that holds: %+v", ended)
			}
			if err := RenewLease(lease, time.Now().Add(-time.Second)); err != nil {
				t.Fatal(err)
			}
			select {
			case <-ended:
			case <-time.After(30 * time.Second):
				t.Fatal("the supervisor did not end after its lease lapsed")
			}
			e, err := ReadEnded(dir)
			if err != nil || e == nil {
				t.Fatalf("exit.json: %v %v", e, err)
			}
			if e.Fenced != tt.fenced || tt.fenced && e.Outcome != plans.Lost || !tt.fenced && e.Outcome != plans.Success {
				t.Errorf("ended %+v, want fenced %v", e, tt.fenced)
			}
			if syscall.Kill(leader, 0) == nil {
				t.Errorf("trainer %d still runs", leader)
			}
		})
	}
}
