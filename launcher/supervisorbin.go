package launcher

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// A daemon starts a supervisor for every attempt, and gpuq's own binary is a slow one
// to start: large, linked dynamically (NVML needs cgo), with every verb's dependencies
// to initialise. SupervisorBinary is a small binary of the supervisor mode alone,
// linked statically, that make build puts beside gpuq: measured, it takes about half
// of gpuq's CPU to start, which is most of a supervisor's cost where trainers are short.
// It is used only where it was built with the gpuq that starts it (the same build
// stamp): one left from another build may not speak its language.
const (
	SupervisorBinary = "gpuq-supervisor"
	// BuildMode is the hidden argument that makes SupervisorBinary print its build
	// stamp.
	BuildMode = "__build"
)

// askBuildWithin is how long SupervisorBinary may take to say its stamp.
const askBuildWithin = 10 * time.Second

// SupervisorCommand is the command that starts attempts' supervisors for self, gpuq's
// binary, built with the stamp build: the SupervisorBinary beside self where it says
// the same stamp, and otherwise self (its supervisor mode). A gpuq without a stamp
// (built without make) uses itself.
func SupervisorCommand(self, build string) []string {
	if build == "" {
		return []string{self}
	}
	helper := filepath.Join(filepath.Dir(self), SupervisorBinary)
	ctx, cancel := context.WithTimeout(context.Background(), askBuildWithin)
	defer cancel()
	out, err := exec.CommandContext(ctx, helper, BuildMode).Output()
	if err != nil || strings.TrimSpace(string(out)) != build {
		return []string{self}
	}
	return []string{helper}
}
