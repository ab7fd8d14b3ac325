package daemon

// The network listener (gpuq daemon --listen ADDR), for gpuq workers on other nodes and
// remote clients. It is TLS with a certificate the daemon makes, and every request must
// carry the daemon's secret; both live in the state directory, 0600, where a cluster's
// shared home shows them to the user's own jobs and to no one else. Without the secret a
// request gets a 401 and nothing else. The unix socket and its uid check are unchanged.

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gpuq/gpuq/scheduler/daemon/api"
)

// remoteListener is the network listener, and the secret its requests must carry.
type remoteListener struct {
	net.Listener
	secret string
	// gate holds what connections have not shown the secret yet.
	gate *gate
}

// listenRemote listens on addr with TLS, with the state directory's credentials (made
// the first time), and records the address there.
func listenRemote(dir, addr string) (*remoteListener, error) {
	creds, pair, err := api.MakeCredentials(dir)
	if err != nil {
		return nil, fmt.Errorf("--listen: %w", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--listen %s: %w", addr, err)
	}
	if err := os.WriteFile(filepath.Join(dir, api.ListenFile), []byte(ln.Addr().String()+"\n"), 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	g := newGate(ln, remoteStrangers, showSecretWithin)
	// HTTP/1.1 alone (no ALPN for h2): streams are upgraded connections.
	tln := tls.NewListener(g, &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS13})
	return &remoteListener{Listener: tln, secret: creds.Secret, gate: g}, nil
}

// serveRemote adds to the daemon's actors the API on the network listener, for those
// with the secret.
func (d *daemon) serveRemote(g *group, ln *remoteListener) {
	srv := tcpServer(authorized(ln.secret, d.routes()))
	// Handshakes that fail (anyone may knock) are not the daemon's news.
	srv.ErrorLog = log.New(io.Discard, "", 0)
	g.add(func() error {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("API on %s: %w", ln.Addr(), err)
		}
		return nil
	}, func() {
		sctx, done := context.WithTimeout(context.Background(), 5*time.Second)
		defer done()
		srv.Shutdown(sctx)
	})
}

// idleTimeout closes a TCP connection that has carried no request for that long: a
// kept-alive connection costs the daemon a descriptor, and whoever reaches the port
// could otherwise hold them all.
var idleTimeout = 2 * time.Minute

// tcpServer is an HTTP server for a TCP port, which anyone who reaches it may hold
// connections to: a request's head must come within 10 s and a kept-alive connection
// closes once idle.
func tcpServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: idleTimeout, ConnContext: withConn}
}

// authorized serves h to requests that carry the secret, and a 401 to any other. The
// 401 closes the connection, whatever of the request's body is still to come: a
// stranger neither keeps it open nor has the daemon wait for a body sent a byte a
// minute.
func authorized(secret string, h http.Handler) http.Handler {
	want := []byte("Bearer " + secret)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("Connection", "close")
			http.NewResponseController(w).SetReadDeadline(time.Now())
			fail(w, http.StatusUnauthorized, "this gpuq daemon answers only requests with its secret")
			return
		}
		admit(r.Context())
		h.ServeHTTP(w, r)
	})
}

// stream is an upgraded connection: what was read of it before the api.Upgrade, then the
// connection itself.
type stream struct {
	io.Reader
	net.Conn
}

func (s stream) Read(p []byte) (int, error) { return s.Reader.Read(p) }

// switchProtocols answers a request for a stream (see api.Upgrade) and returns the stream;
// on an error the request has been answered.
func switchProtocols(w http.ResponseWriter, r *http.Request) (io.ReadWriteCloser, bool) {
	if !strings.EqualFold(r.Header.Get("Upgrade"), api.Upgrade) {
		fail(w, http.StatusBadRequest, "this is a stream: ask for Upgrade: "+api.Upgrade)
		return nil, false
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		fail(w, http.StatusInternalServerError, "this connection cannot carry a stream")
		return nil, false
	}
	conn, rw, err := hj.Hijack()
	if err != nil {
		fail(w, http.StatusInternalServerError, err.Error())
		return nil, false
	}
	conn.SetDeadline(time.Time{})
	fmt.Fprintf(rw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: %s\r\nConnection: Upgrade\r\n\r\n", api.Upgrade)
	if err := rw.Flush(); err != nil {
		conn.Close()
		return nil, false
	}
	return stream{Reader: rw.Reader, Conn: conn}, true
}
