package launcher

// A sweep's notify hooks: a command that gets the sweep's JSON summary on its standard
// input, and a webhook it is POSTed to. A hook is the user's own code or a service far
// away: it runs apart from the scheduling, bounded in time, and its failure is logged,
// never fatal.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gpuq/gpuq/plans"
)

// Hook bounds: a hook still running after hookTimeout is stopped, and a webhook that
// has not answered by then is given up. Wait gives the hooks still to run waitLimit in
// all: a webhook that hangs for each of many failures must not hold up a daemon's stop
// (or the end of gpuq run) for as many minutes. hookSlots is how many sweeps' hooks run
// at once.
var (
	hookTimeout, waitLimit = time.Minute, time.Minute
	hookSlots              = 8
)

// Notifier fires hooks in the background, and logs what went wrong. A sweep's notices
// are told one after another in the order they were fired (a failure before the end
// that follows it); different sweeps' are told side by side, hookSlots at once, so
// that a hook that hangs for its minute holds up its own sweep's notices only.
type Notifier struct {
	// Log hears of every hook that failed, in a line of its own.
	Log func(line string)

	mu sync.Mutex
	// queues are the notices not started yet, by sweep; a sweep is there while a
	// goroutine tells its notices, which it leaves when it has none left.
	queues map[string][]func()
	// slots holds a token for each notice being told.
	slots chan struct{}
	wg    sync.WaitGroup
}

// Notice is one firing of a sweep's hooks.
type Notice struct {
	Sweep string
	Event string // plans.NotifyEnd or plans.NotifyFailure
	Job   string // the job that failed, for a failure
	// Workdir is where the command runs: the sweep's.
	Workdir string
	// Environ is the environment the command runs with, the one the sweep was
	// submitted from, as its trainers do; nil: gpuq's own.
	Environ []string
	// StateDir is the state directory of the daemon (or gpuq run) that tells it, set
	// as GPUQ_STATE_DIR for the command: a hook's gpuq status reads that state, not
	// the one the submitter's environment names. "": none.
	StateDir string
	// Payload is the JSON the command reads and the webhook gets; where it is nil,
	// Build makes it as the notice's turn comes, in the background: a sweep's end
	// summary is not made on the goroutine that fires it (the engine's loop).
	Payload []byte
	Build   func() ([]byte, error)
}

// Fire runs the hooks for a notice in the background; Wait waits for them.
func (n *Notifier) Fire(hooks plans.Notify, nt Notice) {
	n.enqueue(nt.Sweep, func() {
		if nt.Payload == nil && nt.Build != nil {
			payload, err := nt.Build()
			if err != nil {
				n.Log(fmt.Sprintf("notify %s of %s: %v", nt.Event, nt.Sweep, err))
				return
			}
			nt.Payload = payload
		}
		if len(hooks.Command) > 0 {
			if err := runHook(hooks.Command, nt); err != nil {
				n.Log(fmt.Sprintf("notify %s of %s: command %s failed: %v", nt.Event, nt.Sweep, hooks.Command[0], err))
			}
		}
		if hooks.Webhook != "" {
			if err := postHook(hooks.Webhook, nt.Payload); err != nil {
				n.Log(fmt.Sprintf("notify %s of %s: webhook %s failed: %v", nt.Event, nt.Sweep, redact(hooks.Webhook), err))
			}
		}
	})
}

// enqueue runs fn after the hooks of the sweep fired before it, on a goroutine of the
// sweep's that lives while the sweep has notices to tell.
func (n *Notifier) enqueue(sweep string, fn func()) {
	n.wg.Add(1)
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.queues == nil {
		n.queues, n.slots = map[string][]func(){}, make(chan struct{}, hookSlots)
	}
	q, telling := n.queues[sweep]
	n.queues[sweep] = append(q, fn)
	if !telling {
		go n.tell(sweep)
	}
}

// tell runs a sweep's notices in turn, each once a slot is free: one is taken from the
// queue only as it starts, so that Wait can drop those that wait for a slot.
func (n *Notifier) tell(sweep string) {
	for {
		n.slots <- struct{}{}
		n.mu.Lock()
		q := n.queues[sweep]
		if len(q) == 0 {
			delete(n.queues, sweep)
			n.mu.Unlock()
			<-n.slots
			return
		}
		next := q[0]
		n.queues[sweep] = q[1:]
		n.mu.Unlock()
		next()
		<-n.slots
		n.wg.Done()
	}
}

// Wait waits for every hook fired so far to end, for waitLimit at most: then those not
// started yet are dropped, and said to be; those running end in their own time.
func (n *Notifier) Wait() {
	done := make(chan struct{})
	go func() {
		n.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return
	case <-time.After(waitLimit):
	}
	n.mu.Lock()
	dropped := 0
	for sweep, q := range n.queues {
		dropped += len(q)
		n.queues[sweep] = nil // its goroutine finds it empty, and leaves
	}
	for range dropped {
		n.wg.Done()
	}
	n.mu.Unlock()
	if dropped > 0 {
		n.Log(fmt.Sprintf("notify: %d notices not sent: the hooks before them took more than %s", dropped, waitLimit))
	}
}

// hookVar marks a hook's processes in their environment, as GPUQ_ATTEMPT_DIR marks an
// attempt's (see procs.go): one that left the hook's group (setsid, a script that
// daemonizes) is still found, and stopped with it. Its value is unique to one run of
// one hook.
const hookVar = "GPUQ_HOOK"

var hookRuns atomic.Int64

// hookOutput is how much of a hook's output is kept, for its error: the end of it.
const hookOutput = 4 << 10

// runHook runs the command in its own process group, which is killed whole if it runs
// past hookTimeout, with the processes it started elsewhere, with the payload on its
// standard input and GPUQ_SWEEP, GPUQ_EVENT (and GPUQ_JOB_ID) in its environment for a
// script that reads no JSON, and GPUQ_STATE_DIR for one that reads the sweep's state. Its program is found on the PATH of that environment,
// the submitter's, where the sweep's check found it.
func runHook(argv []string, nt Notice) error {
	ctx, cancel := context.WithTimeout(context.Background(), hookTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = nt.Workdir
	id := fmt.Sprintf("%d.%d", os.Getpid(), hookRuns.Add(1))
	base := nt.Environ
	if base == nil {
		base = os.Environ()
	}
	// A sweep submitted from a trainer's job has that attempt's variables in its
	// environment: its job's id, its metrics file, its cards. The hook is not that
	// attempt (an end is of no job), and a gpuq-aware helper it runs would write to
	// that attempt's files.
	base = withoutAttempt(base)
	set := []string{"GPUQ_SWEEP=" + nt.Sweep, "GPUQ_EVENT=" + nt.Event, hookVar + "=" + id}
	if nt.Job != "" {
		set = append(set, "GPUQ_JOB_ID="+nt.Job)
	}
	if nt.StateDir != "" {
		set = append(set, "GPUQ_STATE_DIR="+nt.StateDir)
	}
	cmd.Env = mergeEnv(base, set)
	findIn(cmd, cmd.Env)
	cmd.Stdin = bytes.NewReader(nt.Payload)
	// Its last words, not all it says: a hook may write without end.
	out := NewRing(hookOutput)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		// What it started in sessions of its own, which would hold its output open.
		remains{mark: mark{hookVar, func(v string) bool { return v == id }}, fs: hostProcs, top: scope()}.stop(map[int]bool{}, 0)
		return nil
	}
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	if ctx.Err() != nil {
		return fmt.Errorf("still running after %s: stopped", hookTimeout)
	}
	if err != nil {
		if said := strings.ReplaceAll(string(tail(out.Bytes(), 3)), "\n", " / "); said != "" {
			return fmt.Errorf("%w: %s", err, said)
		}
		return err
	}
	return nil
}

// postHook POSTs the payload as JSON; any answer but 2xx is a failure.
func postHook(webhook string, payload []byte) error {
	client := &http.Client{Timeout: hookTimeout}
	req, err := http.NewRequest(http.MethodPost, webhook, bytes.NewReader(payload))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "gpuq")
	resp, err := client.Do(req)
	var uerr *url.Error
	switch {
	case errors.As(err, &uerr) && uerr.Timeout():
		return fmt.Errorf("no answer within %s", hookTimeout)
	case errors.As(err, &uerr):
		// Its message names the whole URL, the secret in it too: the cause alone.
		return uerr.Err
	case err != nil:
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("answered %s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

// redact leaves a webhook's secret out of logs: services put it in the path or query
// (hooks.slack.com/services/T/B/secret).
func redact(webhook string) string {
	u, err := url.Parse(webhook)
	if err != nil {
		return "(the webhook)"
	}
	return u.Scheme + "://" + u.Host + "/…"
}
