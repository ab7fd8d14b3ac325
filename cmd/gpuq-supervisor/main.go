// Command gpuq-supervisor holds one attempt for gpuq daemon or gpuq worker, which start
// it (see launcher.Supervise): gpuq's supervisor mode alone, a small binary linked
// statically that starts in about half of gpuq's CPU. make build puts it beside gpuq,
// which uses it where it says gpuq's own build stamp (see launcher.SupervisorCommand)
// and is its own supervisor otherwise. It is not run by hand.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/gpuq/gpuq/launcher"
)

// build is the stamp of the build that made this binary and gpuq together, set with
// -ldflags "-X main.build=..." (make build).
var build string

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	switch {
	case len(args) == 2 && args[0] == launcher.SupervisorMode:
		if err := launcher.Supervise(args[1]); err != nil {
			fmt.Fprintln(stderr, "gpuq supervisor:", err)
			return 1
		}
		return 0
	case len(args) == 1 && args[0] == launcher.BuildMode:
		fmt.Fprintln(stdout, build)
		return 0
	}
	fmt.Fprintln(stderr, "gpuq-supervisor holds one attempt for gpuq daemon or gpuq worker, which start it; it is not run by hand")
	return 2
}
