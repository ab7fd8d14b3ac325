package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/gpuq/gpuq/launcher"
	"github.com/gpuq/gpuq/scheduler"
	"github.com/gpuq/gpuq/scheduler/state"
)

// oneOffOutput shows what a one-off's trainer writes, as it writes it, on w: each
// attempt's log without gpuq's header and closing line, one attempt after the other,
// each to its end (a requeued attempt's successor follows it). gpuq's own events go
// to the progress stream meanwhile.
type oneOffOutput struct {
	w      io.Writer
	errs   io.Writer
	store  *state.Store
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	last   chan struct{} // closed once the log of the attempt that started last is copied
}

func newOneOffOutput(w, errs io.Writer) *oneOffOutput {
	ctx, cancel := context.WithCancel(context.Background())
	return &oneOffOutput{w: w, errs: errs, ctx: ctx, cancel: cancel}
}

// event follows the log of an attempt that has started.
func (t *oneOffOutput) event(ev scheduler.Event) {
	if ev.Kind != "started" || t.store == nil {
		return
	}
	as := t.store.View().Attempts(ev.Job)
	if ev.Attempt < 1 || ev.Attempt > len(as) || as[ev.Attempt-1].Log == "" {
		return
	}
	path := as[ev.Attempt-1].Log
	// One attempt's log at a time, in the order they started, without holding up the
	// engine that tells of the start.
	t.mu.Lock()
	prev, done := t.last, make(chan struct{})
	t.last = done
	t.mu.Unlock()
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		defer close(done)
		if prev != nil {
			<-prev
		}
		// A reader that has gone stops the run (see readerGone): nothing to say here.
		if err := t.follow(path); err != nil && !errors.Is(err, syscall.EPIPE) {
			fmt.Fprintf(t.errs, "gpuq: warning: the trainer's output: %v (gpuq logs %s --attempt %d has it)\n", err, ev.Job, ev.Attempt)
		}
	}()
}

// follow copies the trainer's output from a log until its attempt has ended, or until
// the run has ended, and then what is left of it.
func (t *oneOffOutput) follow(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	out := launcher.TrainerOutput(t.w)
	if err := launcher.FollowLog(t.ctx, f, filepath.Dir(path), out); err != nil && t.ctx.Err() == nil {
		return err
	}
	if _, err = io.Copy(out, f); err != nil {
		return err
	}
	return out.Close()
}

// wait returns once every log followed has been copied whole; the run has ended, so
// that no attempt writes more.
func (t *oneOffOutput) wait() {
	t.cancel()
	t.wg.Wait()
}

// readerGone is gpuq run's stdout: once what reads it has gone (gpuq run … | head),
// the run stops as Ctrl-C stops it, its trainers cleanly, where Go would otherwise
// kill gpuq at its next write to a broken stdout, its trainers left to its reaper and
// its socket behind. what names what stdout carries, for the line that says so.
type readerGone struct {
	w, errs io.Writer
	what    string
	stop    context.CancelFunc
	once    sync.Once
}

// stopWhenReaderGone is w, as a readerGone where it is not a terminal: a terminal's
// reader does not go (its hangup is SIGHUP), and the run's live table needs w itself.
func stopWhenReaderGone(w, errs io.Writer, what string, stop context.CancelFunc) io.Writer {
	if isTerminal(w) {
		return w
	}
	return &readerGone{w: w, errs: errs, what: what, stop: stop}
}

func (g *readerGone) Write(p []byte) (int, error) {
	n, err := g.w.Write(p)
	if errors.Is(err, syscall.EPIPE) {
		g.once.Do(func() {
			fmt.Fprintf(g.errs, "gpuq: what reads %s has ended; stopping the run\n", g.what)
			g.stop()
		})
	}
	return n, err
}

// catchBrokenPipe has a write to a broken stdout fail with EPIPE (see readerGone)
// rather than kill gpuq. The signal is caught rather than ignored: an ignored one
// would be ignored by the trainers gpuq starts too. It returns the function that
// undoes it.
func catchBrokenPipe() (undo func()) {
	pipe := make(chan os.Signal, 1)
	signal.Notify(pipe, syscall.SIGPIPE)
	return func() { signal.Stop(pipe) }
}

// shownOutput is where gpuq logs and attach show what a trainer writes: w, until ctx
// ends (Ctrl-C: no more of the trainer's output may follow the terminal's tidying, see
// tidyTerminal). With catchBrokenPipe, a write to w once what reads it has gone (gpuq
// logs -f … | head) fails rather than kill gpuq, and fails with errOutputGone, which
// ends gpuq quietly, as tail -f ends, its terminal given back as it was.
type shownOutput struct {
	ctx context.Context
	w   io.Writer
}

func (s shownOutput) Write(p []byte) (int, error) {
	if err := s.ctx.Err(); err != nil {
		return 0, err
	}
	n, err := s.w.Write(p)
	if errors.Is(err, syscall.EPIPE) {
		err = errOutputGone
	}
	return n, err
}

// whenReaderGone calls gone once what reads w, a pipe, has gone: a follower whose
// trainer is quiet for a while would otherwise hear of it only at its next write, and
// gpuq logs -f … | head would not end when head has, as tail -f's does. It watches
// until the function it returns is called; output that is no pipe loses no reader.
func whenReaderGone(w io.Writer, gone func()) (stop func()) {
	f, ok := w.(*os.File)
	if !ok {
		return func() {}
	}
	fi, err := f.Stat()
	if err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		return func() {}
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		for {
			// A pipe's writing end polls as an error once its reader has gone, whatever
			// was asked; the wait is short, to hear of done.
			var lost bool
			rc.Control(func(fd uintptr) {
				fds := []unix.PollFd{{Fd: int32(fd)}}
				n, _ := unix.Poll(fds, 200)
				lost = n > 0 && fds[0].Revents&(unix.POLLERR|unix.POLLHUP) != 0
			})
			if lost {
				gone()
				return
			}
			select {
			case <-done:
				return
			default:
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(done) }) }
}
