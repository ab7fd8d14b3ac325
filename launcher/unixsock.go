package launcher

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// A unix socket's path may hold 107 bytes (sun_path), fewer than a state directory
// under a long $TMPDIR or home takes. So gpuq binds and reaches its sockets through
// /proc/self/fd/N/<name>, N an open descriptor of the socket's directory: the path the
// kernel sees is as short wherever the directory is, and the socket is still the file
// in that directory, guarded by the directory's mode.

// ListenUnix listens on a unix socket at path, mode 0600, however long path is. Closing
// the listener removes the socket.
func ListenUnix(path string) (net.Listener, error) {
	var ln *net.UnixListener
	err := viaDir(path, func(short string) error {
		// The socket is made 0600 from the start: a chmod after bind leaves a moment in
		// which another user could connect.
		old := syscall.Umask(0o177)
		defer syscall.Umask(old)
		var err error
		ln, err = net.ListenUnix("unix", &net.UnixAddr{Name: short, Net: "unix"})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	// The short name is only good while the descriptor was open: remove by the real one.
	ln.SetUnlinkOnClose(false)
	return &unixListener{UnixListener: ln, path: path}, nil
}

type unixListener struct {
	*net.UnixListener
	path string
}

// Close removes the socket, then closes it: a client that connected meanwhile and finds
// its connection reset also finds the socket gone (see Wait).
func (l *unixListener) Close() error {
	os.Remove(l.path)
	return l.UnixListener.Close()
}

// DialUnix connects to the unix socket at path, however long path is.
func DialUnix(ctx context.Context, path string) (net.Conn, error) {
	var c net.Conn
	err := viaDir(path, func(short string) error {
		var d net.Dialer
		var err error
		c, err = d.DialContext(ctx, "unix", short)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", path, err)
	}
	return c, nil
}

// viaDir calls fn with a short path to path's file, valid for the call.
func viaDir(path string, fn func(short string) error) error {
	dir := filepath.Dir(path)
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: dir, Err: err}
	}
	defer unix.Close(fd)
	return fn(fmt.Sprintf("/proc/self/fd/%d/%s", fd, filepath.Base(path)))
}

// PeerUID is the uid of the process at the other end of a unix socket, as the kernel
// tells it (SO_PEERCRED): for a server, its client's; for a client, the server's.
func PeerUID(c net.Conn) (int, error) {
	cred, err := peerCred(c)
	if err != nil {
		return -1, err
	}
	return int(cred.Uid), nil
}

// peerCred is who is at the other end of a unix socket: the process that connected, or
// for a client the one that listens, as they were when they did.
func peerCred(c net.Conn) (*unix.Ucred, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return nil, fmt.Errorf("%T is not a unix socket", c)
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, err
	}
	return cred, credErr
}

// listenOwn listens on a unix socket at path (see ListenUnix) for this user alone: a
// supervisor's socket is for its daemon and its user's attach, whatever the modes of
// the socket and its directory say.
func listenOwn(path string) (net.Listener, error) {
	ln, err := ListenUnix(path)
	if err != nil {
		return nil, err
	}
	return ownerOnly{ln, os.Getuid()}, nil
}

// ownerOnly is a listener that closes, unserved, the connections of processes of
// other users than uid.
type ownerOnly struct {
	net.Listener
	uid int
}

func (l ownerOnly) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if uid, err := PeerUID(c); err == nil && uid == l.uid {
			return c, nil
		}
		c.Close()
	}
}
