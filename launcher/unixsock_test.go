package launcher

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestUnixSocketAtAnyPathLength: a socket in a directory whose path alone passes the
// 107 bytes a unix socket's address holds is listened on (mode 0600), reached, and
// removed when closed.
func TestUnixSocketAtAnyPathLength(t *testing.T) {
	dir := filepath.Join(t.TempDir(), strings.Repeat("a-rather-long-directory-name/", 5))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "sock")
	if len(path) <= 107 {
		t.Fatalf("the path is only %d bytes", len(path))
	}
	ln, err := ListenUnix(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket %v, %v; want mode 0600", fi.Mode(), err)
	}
	go func() {
		if c, err := ln.Accept(); err == nil {
			io.WriteString(c, "hello")
			c.Close()
		}
	}()
	c, err := DialUnix(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(c)
	c.Close()
	if string(got) != "hello" {
		t.Errorf("read %q", got)
	}
	ln.Close()
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("the socket is left after Close: %v", err)
	}
	if _, err := DialUnix(context.Background(), path); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("dialing a closed socket: %v; want an error naming %s", err, path)
	}
}

// TestOwnSocketServesOnlyItsUser: a supervisor's socket serves the processes of its own
// user alone, as the kernel tells them. The test's connections stand for another
// user's: the listener is told it belongs to another uid.
func TestOwnSocketServesOnlyItsUser(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sock")
	ln, err := listenOwn(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	own, ok := ln.(ownerOnly)
	if !ok || own.uid != os.Getuid() {
		t.Fatalf("listenOwn gives %T %+v; want one for uid %d alone", ln, ln, os.Getuid())
	}
	served := make(chan net.Conn, 1)
	go func() {
		if c, err := (ownerOnly{own.Listener, os.Getuid() + 1}).Accept(); err == nil {
			served <- c
		}
	}()
	c, err := DialUnix(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "stop\n")
	if got, _ := io.ReadAll(c); len(got) != 0 {
		t.Errorf("another uid read %q", got)
	}
	select {
	case <-served:
		t.Error("a connection of another uid was served")
	default:
	}
	if uid, err := PeerUID(c); err != nil || uid != os.Getuid() {
		t.Errorf("the client's peer: uid %d, %v", uid, err)
	}
}
