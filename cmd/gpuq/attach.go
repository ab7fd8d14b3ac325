package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/gpuq/gpuq/launcher"
	"github.com/gpuq/gpuq/scheduler"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/state"
)

// detachKey is Ctrl-], telnet's escape: a pdb prompt, a REPL or a progress bar has no
// use for it.
const detachKey = 0x1d

func newAttachCmd(io ioStreams, st *settings) *cobra.Command {
	var readOnly bool
	cmd := &cobra.Command{
		Use:   "attach ID",
		Short: "Attach to a running job's terminal, as tmux attach does",
		Long: `Show the running attempt's terminal: the last 64 KiB of its output, then what it
writes as it writes it. What you type goes to the trainer, so a pdb prompt or a
"continue? [y/n]" works; Ctrl-C too, which interrupts the trainer as in its own
terminal. The trainer's terminal takes the size of yours, as you attach and as you
resize it, so that what it draws fits, and its own (160 columns) once the last who
types at it has gone. Ctrl-] detaches and leaves the trainer running;
so does closing the terminal. A trainer that writes faster than your terminal shows
is not held up: what your terminal missed is skipped, saying so (gpuq logs has it).
--read-only only watches: what you type is neither sent nor shown, the trainer's
terminal keeps its size, and Ctrl-C or Ctrl-] stops watching.`,
		Example: `  gpuq attach gla-e1.3
  gpuq attach gla-e1.3 --read-only`,
		Args:              exactArgs(1),
		ValidArgsFunction: completeJobs(st),
		RunE: func(_ *cobra.Command, args []string) error {
			return runAttach(io, st, args[0], readOnly)
		},
	}
	cmd.Flags().BoolVar(&readOnly, "read-only", false, "watch only; send no keystrokes")
	return cmd
}

func runAttach(ios ioStreams, st *settings, id string, readOnly bool) error {
	c, err := st.readClient()
	if err != nil {
		return err
	}
	// Where no daemon runs, a terminal is the daemon's to give: an unknown job is
	// refused all the same.
	if sr, ok := stateFor(c, sweepOfJob(id)); ok {
		return sr.need(api.StatesRequest{IDs: []string{id}})
	}
	j, err := c.Job(id)
	if err != nil {
		return err
	}
	if len(j.Attempts) == 0 {
		return notStarted(j)
	}
	if j.Attempts[len(j.Attempts)-1].Outcome != "" || j.Attempts[len(j.Attempts)-1].Log == "" {
		return scheduler.Refused(fmt.Sprintf("%s %s, not running: gpuq logs %s prints its log", id, state.JobState(j.State).Told(), id))
	}
	a := j.Attempts[len(j.Attempts)-1]
	defer catchBrokenPipe()() // see watch
	request := api.StreamAttach
	if readOnly {
		request = api.StreamAttachReadOnly
	}
	conn, err := dialTerminal(context.Background(), st, id, a, api.StreamRequest{Kind: request})
	if err != nil {
		return fmt.Errorf("%s: attempt %d has just ended, or its supervisor does not answer: %w", id, a.N, err)
	}
	defer conn.Close()
	note, left := "Ctrl-] detaches", "detached from"
	if readOnly {
		note, left = "read-only; Ctrl-C or Ctrl-] stops watching", "stopped watching"
	}
	fmt.Fprintf(ios.Err, "[gpuq: attached to %s, attempt %d; %s]\r\n", id, a.N, note)
	var resize func(rows, cols int) // watching alone changes nothing of the trainer's
	if !readOnly {
		resize = func(rows, cols int) { sizeTerminal(st, id, a, rows, cols) }
	}
	detached, err := watch(ios, conn, readOnly, resize)
	switch {
	case errors.Is(err, errOutputGone):
		return err
	case err != nil || detached:
		fmt.Fprintf(ios.Err, "\r\n[gpuq: %s %s; it runs on]\r\n", left, id)
		return err
	}
	if !attemptEnded(st.client, id, a.N, 10*time.Second) {
		fmt.Fprintf(ios.Err, "\r\n[gpuq: the terminal of attempt %d of %s was cut off, but it has not ended]\r\n", a.N, id)
		return fmt.Errorf("%s: attempt %d runs on where its terminal could not be reached (its worker away, or its supervisor not answering): gpuq attach %s again once it is back", id, a.N, id)
	}
	fmt.Fprintf(ios.Err, "\r\n[gpuq: attempt %d of %s has ended; gpuq status %s says how]\r\n", a.N, id, id)
	return nil
}

// watch shows an attempt's terminal, conn, on ios.Out and sends it what is typed at
// ios.In (see takeKeys) until the terminal closes, or the person detaches, which it
// reports, or leaves it otherwise: errStoppedWatching for Ctrl-C where it is a signal
// (input that is no terminal, or kill -INT) or SIGTERM, errOutputGone once what reads
// ios.Out has gone (gpuq attach … | head; see shownOutput). Either way the terminal is
// given back as detaching gives it, not raw and with its cursor shown, which a gpuq
// killed by the signal would not do. Where resize is not nil, it is given the size of
// the terminal at ios.In, at once and as it changes (see followSize), until then.
func watch(ios ioStreams, conn io.ReadWriteCloser, readOnly bool, resize func(rows, cols int)) (detached bool, err error) {
	defer tidyTerminal(ios.Out)
	sigs := make(chan os.Signal, 1) // heard before the terminal is made raw
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	detach := make(chan struct{})
	defer takeKeys(ios.In, conn, readOnly, detach)()
	stopSize := func() {}
	if resize != nil {
		stopSize = followSize(ios.In, resize)
	}
	// No size is given once the terminal is left: the trainer's goes back to its own
	// as the last attach ends (see launcher's attach), and a late one would undo that.
	defer stopSize()
	gone := make(chan struct{})
	defer whenReaderGone(ios.Out, func() { close(gone) })()
	copied := make(chan error, 1)
	go func() {
		_, err := io.Copy(shownOutput{context.Background(), ios.Out}, conn)
		copied <- err
	}()
	leave := func() {
		stopSize()
		conn.Close()
		<-copied
	}
	select {
	case err := <-copied:
		if errors.Is(err, errOutputGone) {
			return false, errOutputGone
		}
		return false, nil
	case <-detach:
		leave()
		return true, nil
	case <-sigs:
		leave()
		return false, errStoppedWatching
	case <-gone:
		leave()
		return false, errOutputGone
	}
}

// tidyTerminal undoes, on a terminal, what a trainer's output may have left set there:
// a hidden cursor (rich's progress bars hide it while they draw) and a colour (a detach
// may come between a colour and its reset). Nothing else of what it may have set is
// known to be safe to reset blindly.
func tidyTerminal(out io.Writer) {
	if isTerminal(out) {
		io.WriteString(out, "\x1b[0m\x1b[?25h")
	}
}

// followSize gives resize the size of the terminal at in, as soon as it can and
// whenever it changes (SIGWINCH), on a goroutine of its own (a worker's trainer is
// reached through the daemon, which may take a while), until the function it returns
// is called, which may be called again; input that is no terminal has no size to give.
func followSize(in io.Reader, resize func(rows, cols int)) (stop func()) {
	f, ok := in.(*os.File)
	if !ok || !isTerminal(f) {
		return func() {}
	}
	give := func() {
		if cols, rows := termSize(f); cols > 0 && rows > 0 {
			resize(rows, cols)
		}
	}
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	winch <- syscall.SIGWINCH // its size as it is now
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-winch:
				give()
			case <-done:
				return
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			signal.Stop(winch)
			close(done)
		})
	}
}

// sizeTerminal gives an attempt's terminal a size, as dialTerminal reaches it, within
// sizeWait, and returns once it is set: the supervisor (and the daemon, between) end
// the request only then. Each request is served on a goroutine of its own, so a size
// sent before the last was set could be set after it, when a window is dragged; given
// one at a time (followSize's goroutine, the sizes it missed meanwhile taken as one),
// the last the person set is the one that holds. A supervisor too old to know the
// request, or one that has just ended, leaves the size as it was: nothing to tell the
// person watching.
func sizeTerminal(st *settings, id string, a api.AttemptSummary, rows, cols int) {
	ctx, cancel := context.WithTimeout(context.Background(), sizeWait)
	defer cancel()
	s, err := dialTerminal(ctx, st, id, a, api.StreamRequest{Kind: api.StreamSize, Rows: rows, Cols: cols})
	if err != nil {
		return
	}
	defer context.AfterFunc(ctx, func() { s.Close() })()
	io.Copy(io.Discard, s)
	s.Close()
}

// sizeWait is how long a size is given to reach a trainer: the next resize gives it
// again.
const sizeWait = 2 * time.Second

// attemptEnded reports whether attempt n of a job has ended, as the daemon says once
// its terminal closed: its end is recorded within a moment of its trainer's, and a
// terminal that closed while the attempt runs on was cut off (a worker away). One
// that cannot be asked is taken to have ended, as before. It asks for up to wait.
func attemptEnded(client func() (daemonClient, error), id string, n int, wait time.Duration) bool {
	for deadline := time.Now().Add(wait); ; time.Sleep(100 * time.Millisecond) {
		j, err := fetchJob(client, id)
		if err != nil || len(j.Attempts) < n || j.Attempts[n-1].Outcome != "" {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// dialTerminal makes req (one of api's stream kinds but the log) of an attempt's
// terminal: through its supervisor's socket on this machine, or through the daemon,
// within ctx, when it runs on a worker or the daemon is remote.
func dialTerminal(ctx context.Context, st *settings, id string, a api.AttemptSummary, req api.StreamRequest) (io.ReadWriteCloser, error) {
	if a.Worker == "" && !st.remote() {
		line := req.Kind
		if req.Kind == api.StreamSize {
			line = launcher.SizeRequest(req.Rows, req.Cols)
		}
		return launcher.Dial(filepath.Dir(a.Log), line)
	}
	c, err := st.dial()
	if err != nil {
		return nil, err
	}
	req.Attempt = api.AttemptRef{Job: id, N: a.N}
	return c.AttemptContext(ctx, req)
}

// takeKeys takes what is typed at in while attached, until detached is closed: a
// terminal is put in raw mode, so that no key is echoed among the trainer's output and
// keystrokes (Ctrl-C included) go to the trainer's own terminal; read-only, they go
// nowhere, and Ctrl-C, which would otherwise end gpuq with the terminal still raw, stops
// watching as the detach key does. Read-only, input that is no terminal is not read:
// Ctrl-C is a signal there. It returns what gives the terminal back as it was.
func takeKeys(in io.Reader, conn io.Writer, readOnly bool, detached chan<- struct{}) (restore func()) {
	restore, raw := func() {}, false
	if f, ok := in.(*os.File); ok {
		if r, err := rawTerminal(f); err == nil {
			restore, raw = r, true
		}
	}
	switch {
	case !readOnly:
		go forwardKeys(in, conn, string([]byte{detachKey}), detached)
	case raw:
		go forwardKeys(in, io.Discard, string([]byte{detachKey, ctrlC}), detached)
	}
	return restore
}

// ctrlC is what a raw terminal reads of Ctrl-C.
const ctrlC = 0x03

// forwardKeys sends what is typed to conn until one of the keys in stop; an end of
// input stops sending, not watching.
func forwardKeys(in io.Reader, conn io.Writer, stop string, detached chan<- struct{}) {
	buf := make([]byte, 4096)
	for {
		n, err := in.Read(buf)
		if i := bytes.IndexAny(buf[:n], stop); i >= 0 {
			conn.Write(buf[:i])
			close(detached)
			return
		}
		if n > 0 {
			if _, werr := conn.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// rawTerminal puts a terminal in raw mode, as cfmakeraw(3) does, so that keystrokes
// (Ctrl-C included) go to the trainer's own terminal; restore undoes it.
func rawTerminal(f *os.File) (restore func(), err error) {
	fd := int(f.Fd())
	old, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return nil, err
	}
	raw := *old
	raw.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
	raw.Oflag &^= unix.OPOST
	raw.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
	raw.Cflag &^= unix.CSIZE | unix.PARENB
	raw.Cflag |= unix.CS8
	raw.Cc[unix.VMIN], raw.Cc[unix.VTIME] = 1, 0
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, &raw); err != nil {
		return nil, err
	}
	return func() { unix.IoctlSetTermios(fd, unix.TCSETS, old) }, nil
}
