package main

import (
	"io"

	"github.com/gpuq/gpuq/scheduler/daemon/api"
)

// daemonClient is what the verbs that read and act on the daemon's jobs ask of it:
// *api.Client, which talks to the daemon, or in their tests a fake that answers in its
// place. Each such verb's options hold a function that returns one (as gh's verbs hold
// their HTTP client), so that its run function is tested without a daemon.
type daemonClient interface {
	Jobs(sweep string, states []string) ([]api.Job, error)
	Job(id string) (api.Job, error)
	Why(id string) (api.WhyResponse, error)
	Act(v api.Verb, sel api.SelectRequest) ([]string, error)
	DrainCard(req api.DrainRequest) error
	Update(req api.UpdateRequest) (api.UpdateResponse, error)
	// Attempt opens an attempt's log or terminal through the daemon.
	Attempt(req api.StreamRequest) (io.ReadWriteCloser, error)
}

// client connects to the daemon, and to the gpuq runs that serve their sweeps beside
// it (see routed), for a verb's options.
func (s *settings) client() (daemonClient, error) { return s.routedClient() }
