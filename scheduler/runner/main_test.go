package runner

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/gpuq/gpuq/launcher"
)

// The test binary is also the supervisors' binary: started in the supervisor mode, it is
// one. Like a daemon, the tests reap the orphans of supervisors they kill.
func TestMain(m *testing.M) {
	if len(os.Args) == 3 && os.Args[1] == launcher.SupervisorMode {
		if err := launcher.Supervise(os.Args[2]); err != nil {
			fmt.Fprintln(os.Stderr, "supervisor:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	launcher.BecomeSubreaper()
	// A stop waits a second for a trainer that ignores SIGTERM, not the default. Set
	// once, before any test: a test that set it would race the goroutines of the
	// attempts earlier tests stopped, which read it.
	launcher.GroupGrace = time.Second
	os.Exit(m.Run())
}
