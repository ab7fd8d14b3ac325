package api

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/gpuq/gpuq/launcher"
)

// ServeAttempt serves an attempt's log (from its start, or its last Tail lines; to its
// end with Follow) or its terminal on a stream, from the attempt's directory: the
// daemon's for its own attempts, a worker's for its. A problem is written on the stream.
func ServeAttempt(ctx context.Context, s io.ReadWriteCloser, dir string, req StreamRequest) {
	defer s.Close()
	if req.Kind == StreamSize {
		if sc, err := launcher.Dial(dir, launcher.SizeRequest(req.Rows, req.Cols)); err == nil {
			// The supervisor ends the request once the size is set, and the stream ends
			// after it: a client gives the next size only then (see gpuq attach), so
			// that sizes are set in the order they were given.
			sc.SetReadDeadline(time.Now().Add(sizeWait))
			io.Copy(io.Discard, sc)
			sc.Close()
		}
		return
	}
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

// sizeWait is how long a supervisor may take to set a size before the stream that
// asked for it ends all the same: one that is stopped (SIGSTOP) holds no request.
const sizeWait = 5 * time.Second

// Pipe copies each way between a, the client's end, and b until one side ends, then
// closes both. What the client sent before it went (keys typed, then a detach) still
// reaches b: where the copy to it fails first, a is read on, for up to
// launcher.KeysGrace, until what it holds has gone to b.
func Pipe(a, b io.ReadWriteCloser) {
	in, out := make(chan struct{}), make(chan struct{})
	var outErr error
	go func() { io.Copy(b, a); close(in) }()
	go func() { _, outErr = io.Copy(a, b); close(out) }()
	select {
	case <-in:
	case <-out:
		if outErr != nil {
			select {
			case <-in:
			case <-time.After(launcher.KeysGrace):
			}
		}
	}
	a.Close()
	b.Close()
	<-in
	<-out
}
