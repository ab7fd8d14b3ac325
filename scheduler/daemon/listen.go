package daemon

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"github.com/gpuq/gpuq/launcher"
	"github.com/gpuq/gpuq/scheduler/daemon/api"
)

// listener accepts only connections from processes of one user, as the kernel tells
// them (SO_PEERCRED); others get a 403 and are closed.
type listener struct {
	net.Listener
	uid int
}

// listen listens on the state directory's socket, mode 0600, for this user alone.
func listen(dir string) (*listener, error) {
	path := api.SocketPath(dir)
	os.Remove(path) // a socket left by a daemon that was killed; the lock is ours
	return listenAt(path)
}

// listenAt listens on a unix socket at path, mode 0600, for this user alone.
func listenAt(path string) (*listener, error) {
	ln, err := launcher.ListenUnix(path)
	if err != nil {
		return nil, fmt.Errorf("API socket: %w", err)
	}
	return &listener{Listener: ln, uid: os.Getuid()}, nil
}

func (l *listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		uid, err := launcher.PeerUID(c)
		if err == nil && uid == l.uid {
			return c, nil
		}
		msg := fmt.Sprintf("this gpuq daemon belongs to uid %d; uid %d may not use it", l.uid, uid)
		if err != nil {
			msg = "cannot tell who is connecting: " + err.Error()
		}
		go refuse(c, msg)
	}
}

// refuse answers a connection's request, whatever it is, with a 403, and closes it.
// It reads the request's head first: closing on an unread request would reset the
// connection and the client would never see why.
func refuse(c net.Conn, msg string) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	r := bufio.NewReader(io.LimitReader(c, 64<<10))
	for {
		line, err := r.ReadString('\n')
		if err != nil || strings.TrimSpace(line) == "" {
			break
		}
	}
	body := errorBody(msg)
	fmt.Fprintf(c, "HTTP/1.1 403 Forbidden\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
}
