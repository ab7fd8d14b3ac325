package launcher

// NVIDIA's Multi-Process Service for a sweep's jobs (sharing: mps): gpuq starts the
// MPS control daemon with pipe and log directories of its own, gives the trainers the
// environment that reaches it, and stops it when the sweep ends. Under MPS the kernels
// of the processes sharing a card run at once rather than in turns, which is how
// Robroek et al. ("An Analysis of Collocation on GPUs for Deep Learning Training", 2022)
// recommend one user's jobs share a card.

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/gpuq/gpuq/plans"
)

// MPSControl is the MPS control daemon's program, from the driver's utilities.
const MPSControl = "nvidia-cuda-mps-control"

// MPS is an MPS control daemon gpuq started.
type MPS struct {
	control   string // the program's path
	pipe, log string
}

// ErrNoMPS is returned where the MPS control daemon cannot be found.
var ErrNoMPS = errors.New("NVIDIA MPS is not available here")

// StartMPS starts an MPS control daemon whose pipe and log directories are under dir
// (made private), with the control program found on path (a PATH list).
func StartMPS(dir, path string) (*MPS, error) {
	control, ok := plans.OnPath(MPSControl, path)
	if !ok {
		return nil, fmt.Errorf("%w: %s is not on the PATH (it comes with the NVIDIA driver's utilities, and works on Volta or later cards); "+
			"remove sharing: mps to share cards by time-slicing", ErrNoMPS, MPSControl)
	}
	m := &MPS{control: control, pipe: filepath.Join(dir, "mps-pipe"), log: filepath.Join(dir, "mps-log")}
	for _, d := range []string{m.pipe, m.log} {
		if err := PrivateDir(d); err != nil {
			return nil, fmt.Errorf("MPS: %w", err)
		}
	}
	// -d daemonizes: the command returns once the daemon is up.
	if out, err := m.command(nil, "-d").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("%w: %s -d: %v: %s%s", ErrNoMPS, control, err, strings.TrimSpace(string(out)), m.logTail())
	}
	return m, nil
}

// Env is what a trainer's environment needs to reach the daemon.
func (m *MPS) Env() []string {
	return []string{"CUDA_MPS_PIPE_DIRECTORY=" + m.pipe, "CUDA_MPS_LOG_DIRECTORY=" + m.log}
}

// Stop asks the daemon to quit; it exits once its clients have.
func (m *MPS) Stop() error {
	if out, err := m.command(strings.NewReader("quit\n")).CombinedOutput(); err != nil {
		return fmt.Errorf("stopping MPS: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

func (m *MPS) command(stdin *strings.Reader, args ...string) *exec.Cmd {
	cmd := exec.Command(m.control, args...)
	cmd.Env = append(os.Environ(), m.Env()...)
	if stdin != nil {
		cmd.Stdin = stdin
	}
	return cmd
}

// logTail is the end of the daemon's control log, where it says why it did not start.
func (m *MPS) logTail() string {
	data, err := os.ReadFile(filepath.Join(m.log, "control.log"))
	if err != nil || len(data) == 0 {
		return ""
	}
	lines := bytes.Split(bytes.TrimSpace(data), []byte("\n"))
	return "; its log ends: " + string(lines[len(lines)-1])
}
