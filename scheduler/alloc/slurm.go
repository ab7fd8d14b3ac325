package alloc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// Command is one run of a Slurm command.
type Command struct {
	Argv  []string
	Stdin string
	Env   []string // added to the caller's environment
}

// Exec runs a command and returns its standard output. A command that fails returns an
// error holding what it wrote to its standard error: Slurm's own words.
type Exec func(ctx context.Context, c Command) (string, error)

// Run is the Exec of real commands, found on the PATH.
func Run(ctx context.Context, c Command) (string, error) {
	cmd := exec.CommandContext(ctx, c.Argv[0], c.Argv[1:]...)
	cmd.Stdin = strings.NewReader(c.Stdin)
	if len(c.Env) > 0 {
		cmd.Env = append(os.Environ(), c.Env...)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if errors.Is(err, exec.ErrNotFound) {
		return "", fmt.Errorf("%s is not on the PATH: run the gpuq daemon where Slurm's commands are (a login node)", c.Argv[0])
	}
	if err != nil {
		if msg := strings.TrimSpace(errb.String()); msg != "" {
			return "", fmt.Errorf("%s", msg)
		}
		return "", fmt.Errorf("%s: %w", c.Argv[0], err)
	}
	return out.String(), nil
}

// Slurm drives Slurm through its commands (sbatch, squeue, scancel), never its state.
type Slurm struct{ Exec Exec }

// Submit submits a batch script and returns the job's id.
func (s Slurm) Submit(ctx context.Context, script string) (string, error) {
	out, err := s.Exec(ctx, Command{Argv: []string{"sbatch", "--parsable"}, Stdin: script})
	if err != nil {
		return "", err
	}
	// "id" or "id;cluster"
	id, _, _ := strings.Cut(strings.TrimSpace(out), ";")
	if _, err := strconv.ParseUint(id, 10, 64); err != nil {
		return "", fmt.Errorf("sbatch --parsable printed %q, not a job id", out)
	}
	return id, nil
}

// Check asks Slurm whether it would take a batch script (sbatch --test-only), without
// submitting it.
func (s Slurm) Check(ctx context.Context, script string) error {
	_, err := s.Exec(ctx, Command{Argv: []string{"sbatch", "--test-only"}, Stdin: script})
	return err
}

// Cancel cancels a job.
func (s Slurm) Cancel(ctx context.Context, id string) error {
	_, err := s.Exec(ctx, Command{Argv: []string{"scancel", id}})
	return err
}

// Job is a batch job as squeue shows it.
type Job struct {
	ID     string
	State  string // PENDING, RUNNING, COMPLETED, TIMEOUT, ... as Slurm names them
	Reason string // why it waits, or how it ended; "" for None
	Nodes  string
	Start  time.Time // zero while it waits
	End    time.Time // its expected end while it runs; zero while it waits
}

// squeueFormat is what Jobs asks of squeue: fields that never hold a '|', with times
// as Unix seconds (timeFormat), whatever the user's SLURM_TIME_FORMAT says.
const (
	squeueFormat = "%i|%T|%r|%N|%S|%e"
	timeFormat   = "SLURM_TIME_FORMAT=%s"
)

// Jobs returns what Slurm knows of the jobs named, in any state; a job it has
// forgotten (some minutes after it ended: MinJobAge) is left out.
func (s Slurm) Jobs(ctx context.Context, ids []string) (map[string]Job, error) {
	out, err := s.Exec(ctx, Command{Argv: []string{"squeue", "--noheader", "--states=all", "--jobs=" + strings.Join(ids, ","),
		"--format=" + squeueFormat}, Env: []string{timeFormat}})
	if err != nil {
		if strings.Contains(err.Error(), "Invalid job id") {
			// squeue says this only when it knows none of them.
			return map[string]Job{}, nil
		}
		return nil, err
	}
	jobs := map[string]Job{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Split(line, "|")
		if len(f) != 6 {
			continue
		}
		j := Job{ID: f[0], State: f[1], Reason: f[2], Nodes: f[3], Start: unixTime(f[4]), End: unixTime(f[5])}
		if j.Reason == "None" {
			j.Reason = ""
		}
		if j.State == "PENDING" {
			// An expected start or end, not one that happened.
			j.Start, j.End = time.Time{}, time.Time{}
		}
		jobs[j.ID] = j
	}
	return jobs, nil
}

// EndOf is when a running job's time runs out, as squeue says.
func (s Slurm) EndOf(ctx context.Context, id string) (time.Time, error) {
	jobs, err := s.Jobs(ctx, []string{id})
	if err != nil {
		return time.Time{}, err
	}
	j, ok := jobs[id]
	if !ok || j.End.IsZero() {
		return time.Time{}, fmt.Errorf("squeue does not say when job %s ends", id)
	}
	return j.End, nil
}

// unixTime reads squeue's Unix seconds; anything else ("N/A", "Unknown") is zero.
func unixTime(s string) time.Time {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return time.Time{}
	}
	return time.Unix(n, 0)
}

// Ended reports whether a Slurm job state is final.
func Ended(state string) bool {
	switch state {
	case "PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "REQUEUED", "REQUEUE_HOLD",
		"REQUEUE_FED", "RESIZING", "SIGNALING", "STAGE_OUT", "STOPPED", "RESV_DEL_HOLD":
		return false
	}
	return true
}
