package api

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpuq/gpuq/launcher"
)

// goneClient is a client's end of a stream that went away just after it sent keys:
// writes to it fail, and what it sent reads late (as a goroutine the machine was slow
// to run would read it), unless it was closed first.
type goneClient struct {
	sent   []byte
	after  time.Duration
	closed chan struct{}
	once   sync.Once
}

func (c *goneClient) Read(p []byte) (int, error) {
	if c.sent == nil {
		return 0, io.EOF
	}
	select {
	case <-time.After(c.after):
	case <-c.closed:
		return 0, net.ErrClosed
	}
	n := copy(p, c.sent)
	c.sent = nil
	return n, nil
}

func (c *goneClient) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }
func (c *goneClient) Close() error              { c.once.Do(func() { close(c.closed) }); return nil }

// talkingTrainer is a trainer's end that has output to send and keeps what it is sent.
type talkingTrainer struct {
	mu     sync.Mutex
	got    []byte
	said   bool
	closed chan struct{}
	once   sync.Once
}

func (t *talkingTrainer) Read(p []byte) (int, error) {
	t.mu.Lock()
	said := t.said
	t.said = true
	t.mu.Unlock()
	if !said {
		return copy(p, "step 1\r\n"), nil
	}
	<-t.closed
	return 0, io.EOF
}

func (t *talkingTrainer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.got = append(t.got, p...)
	return len(p), nil
}

func (t *talkingTrainer) Close() error { t.once.Do(func() { close(t.closed) }); return nil }

// TestPipeKeepsKeysSentBeforeTheClientWent: a client that types and detaches at once,
// while output is on its way to it, has its keys reach the trainer: the copy to the
// gone client fails first, and the stream does not close on what it has not read yet.
func TestPipeKeepsKeysSentBeforeTheClientWent(t *testing.T) {
	client := &goneClient{sent: []byte("go\n"), after: 50 * time.Millisecond, closed: make(chan struct{})}
	trainer := &talkingTrainer{closed: make(chan struct{})}
	Pipe(client, trainer)
	trainer.mu.Lock()
	defer trainer.mu.Unlock()
	if string(trainer.got) != "go\n" {
		t.Errorf("the trainer got %q of the keys %q sent before the client went", trainer.got, "go\n")
	}
}

// TestASizeIsSetBeforeItsStreamEnds: a size asked for through the daemon (a worker's
// attempt, a remote client) ends its stream only once the supervisor has set it, so
// that the client, which gives the next size only then, has its sizes set in order.
func TestASizeIsSetBeforeItsStreamEnds(t *testing.T) {
	dir := t.TempDir()
	ln, err := launcher.ListenUnix(launcher.SocketPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var set atomic.Value
	ended := make(chan struct{})
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		req, _ := bufio.NewReader(c).ReadString('\n')
		select { // a supervisor slow to set it
		case <-ended:
		case <-time.After(200 * time.Millisecond):
		}
		set.Store(strings.TrimSpace(req))
	}()
	client, served := net.Pipe()
	go ServeAttempt(context.Background(), served, dir, StreamRequest{Kind: StreamSize, Rows: 30, Cols: 100})
	io.Copy(io.Discard, client)
	got, _ := set.Load().(string)
	close(ended)
	if got != "size 30 100" {
		t.Errorf("the stream ended with the size set as %q, want it set (size 30 100)", got)
	}
}
