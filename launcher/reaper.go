package launcher

// gpuq run's trainers are its children, and stop with it when it stops as it should. A
// gpuq run killed outright (kill -9, the OOM killer) stops nothing: its trainers' ptys
// hang up, which ends most of them, but not what they started in sessions of their own
// (setsid, torchrun's workers) or that ignores the hangup (nohup). Its reaper, a small
// process of its own, is there for that: it waits for gpuq run to end however it ends,
// then stops whatever still carries the mark of one of its attempts.
//
// No flag of the kernel's does it: PR_SET_PDEATHSIG reaches a child and not its
// children (and in Go follows the thread that started it, not the process), and a
// subreaper's orphans pass to the next one up when it dies.

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
)

// ReaperMode is the hidden argument that makes gpuq's binary the reaper of a gpuq run.
const ReaperMode = "__reap"

// Reaper is a gpuq run's reaper, running.
type Reaper struct {
	cmd  *exec.Cmd
	pipe io.WriteCloser
}

// StartReaper starts the reaper of the attempts laid out under root (self is gpuq's
// binary and any arguments before the mode). It ends once this process has, or Close
// is called, after it has stopped what is left of those attempts.
func StartReaper(self []string, root string) (*Reaper, error) {
	args := append(append([]string(nil), self[1:]...), ReaperMode, root)
	cmd := exec.Command(self[0], args...)
	// A session of its own: neither a Ctrl-C nor a hangup of gpuq run's terminal
	// reaches it before it has done its work.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	pipe, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the reaper of %s: %w", root, err)
	}
	// Its own orphans go to init or a subreaper above; nobody waits for it here but
	// Close.
	return &Reaper{cmd: cmd, pipe: pipe}, nil
}

// Close tells the reaper that gpuq run is ending, and waits for it to have stopped
// what was left.
func (r *Reaper) Close() error {
	r.pipe.Close()
	return r.cmd.Wait()
}

// Reap is the reaper's main: it waits until its standard input ends, which it does when
// the gpuq run that started it has ended (or closed it), then stops every process of
// the attempts under root (SIGTERM, SIGKILL after GroupGrace).
func Reap(root string) error {
	io.Copy(io.Discard, os.Stdin)
	remains{mark: attemptsUnder(root), fs: hostProcs}.stop(map[int]bool{}, GroupGrace)
	return nil
}
