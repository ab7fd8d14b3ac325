package api

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/gpuq/gpuq/launcher"
)

// ServeAttempt serves an attempt's log (from its start, or its last Tail lines; to its
// end with Follow) or its terminal on a stream, from the attempt's directory: the
// daemon's for its own attempts, a worker's for its. A problem is written on the stream.
func ServeAttempt(ctx context.Context, s io.ReadWriteCloser, dir string, req StreamRequest) {
	defer s.Close()
	if req.Kind != StreamLog {
		sc, err := launcher.Dial(dir, req.Kind)
		if err != nil {
			fmt.Fprintf(s, "gpuq: attempt %d of %s has ended, or its supervisor does not answer: %v\r\n", req.Attempt.N, req.Attempt.Job, err)
			return
		}
		Pipe(s, sc)
		return
	}
	f, err := os.Open(launcher.LogPath(dir))
	if err != nil {
		fmt.Fprintf(s, "gpuq: %v\n", err)
		return
	}
	defer f.Close()
	if req.Tail > 0 {
		if err := launcher.SeekLastLines(f, req.Tail); err != nil {
			fmt.Fprintf(s, "gpuq: %v\n", err)
			return
		}
	}
	if _, err := io.Copy(s, f); err != nil || !req.Follow {
		return
	}
	// A reader that goes away says so by closing its end: nothing else is read.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		io.Copy(io.Discard, s)
		cancel()
	}()
	launcher.FollowLog(ctx, f, dir, s)
}

// Pipe copies each way between a and b until one side ends, then closes both.
func Pipe(a, b io.ReadWriteCloser) {
	done := make(chan struct{}, 2)
	go func() { io.Copy(a, b); done <- struct{}{} }()
	go func() { io.Copy(b, a); done <- struct{}{} }()
	<-done
	a.Close()
	b.Close()
	<-done
}
