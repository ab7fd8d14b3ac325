package daemon

// The network listener (gpuq daemon --listen ADDR), for gpuq workers on other nodes and
// remote clients. It is TLS with a certificate the daemon makes, and every request must
// carry the daemon's secret; both live in the state directory, 0600, where a cluster's
// shared home shows them to the user's own jobs and to no one else. Without the secret a
// request gets a 401 and nothing else. The unix socket and its uid check are unchanged.

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Files of the listener in the state directory.
const (
	secretFile = "secret"  // what workers and remote clients present
	certFile   = "tls.crt" // the daemon's certificate, which they trust alone
	keyFile    = "tls.key"
	// ListenFile holds the address the daemon listens on, while it does.
	ListenFile = "listen"
	// serverName is the name in the certificate; clients check it, not a host name, so
	// that a worker may reach the daemon by any address.
	serverName = "gpuq"
	// upgrade is the protocol a request switches to (HTTP/1.1 Upgrade) for a stream: a
	// worker's link, a log or a terminal.
	upgrade = "gpuq/1"
)

// Credentials are what a worker or a remote client needs to reach a daemon over the
// network: its secret, and its certificate (PEM).
type Credentials struct {
	Secret string
	Cert   []byte
}

// LoadCredentials reads a daemon's credentials from its state directory.
func LoadCredentials(dir string) (Credentials, error) {
	path := filepath.Join(dir, secretFile)
	secret, err := readPrivate(path)
	if err != nil {
		return Credentials{}, err
	}
	s := strings.TrimSpace(string(secret))
	if _, err := hex.DecodeString(s); err != nil || len(s) != 2*secretBytes {
		return Credentials{}, fmt.Errorf("%s is not a secret a gpuq daemon made (%d hex digits): a crash may have cut it short; "+
			"remove it, and the daemon makes a new one when started again (its workers and clients then read the new one)", path, 2*secretBytes)
	}
	cert, err := readPrivate(filepath.Join(dir, certFile))
	if err != nil {
		return Credentials{}, err
	}
	return Credentials{Secret: s, Cert: cert}, nil
}

// secretBytes is the secret's size: random bytes, written in hex.
const secretBytes = 32

// readPrivate reads a credential file, refusing one that others may read (the secret
// would no longer be one), that is not the user's own (planted where the user's gpuq
// would trust it: gpuq as root reads anybody's), or that is not a plain file (a link
// to one of the user's other files, a pipe that would never end).
func readPrivate(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("%s does not exist: is this the state directory of a gpuq daemon started with --listen? "+
			"(--state-dir, GPUQ_STATE_DIR)", path)
	case errors.Is(err, syscall.ELOOP):
		return nil, fmt.Errorf("%s is a symbolic link, which a gpuq daemon never makes: remove it, and find out who put it there", path)
	case err != nil:
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("%s is not a file (%v): remove it, and find out who put it there", path, fi.Mode().Type())
	case ok && int(st.Uid) != os.Getuid():
		return nil, fmt.Errorf("%s belongs to uid %d, not to you (uid %d): remove it, and find out who put it there", path, st.Uid, os.Getuid())
	case fi.Mode().Perm()&0o077 != 0:
		return nil, fmt.Errorf("%s may be read by others (mode %v): chmod 600 it, and remove it so that the daemon makes a new one "+
			"if someone else may have read it", path, fi.Mode().Perm())
	}
	return io.ReadAll(f)
}

// makeCredentials makes the daemon's secret, key and certificate where they are missing,
// once: a daemon started again keeps them, so that its workers and clients still reach it.
func makeCredentials(dir string) (Credentials, tls.Certificate, error) {
	secretPath := filepath.Join(dir, secretFile)
	if _, err := os.Stat(secretPath); errors.Is(err, os.ErrNotExist) {
		b := make([]byte, secretBytes)
		rand.Read(b)
		if err := writeNew(secretPath, []byte(hex.EncodeToString(b)+"\n")); err != nil {
			return Credentials{}, tls.Certificate{}, err
		}
	}
	certPath, keyPath := filepath.Join(dir, certFile), filepath.Join(dir, keyFile)
	if _, err := os.Stat(certPath); errors.Is(err, os.ErrNotExist) {
		cert, key, err := selfSigned()
		if err != nil {
			return Credentials{}, tls.Certificate{}, err
		}
		// The key first: a certificate is only ever there with its key.
		if err := writeNew(keyPath, key); err != nil {
			return Credentials{}, tls.Certificate{}, err
		}
		if err := writeNew(certPath, cert); err != nil {
			return Credentials{}, tls.Certificate{}, err
		}
	}
	creds, err := LoadCredentials(dir)
	if err != nil {
		return Credentials{}, tls.Certificate{}, err
	}
	key, err := readPrivate(keyPath)
	if err != nil {
		return Credentials{}, tls.Certificate{}, err
	}
	pair, err := tls.X509KeyPair(creds.Cert, key)
	if err != nil {
		return Credentials{}, tls.Certificate{}, fmt.Errorf("%s and %s: %w; remove both for new ones", certPath, keyPath, err)
	}
	return creds, pair, nil
}

// writeNew writes a private file that must not exist yet: two daemons never race here
// (the lock), but a file left half-written by a crash is refused rather than used.
func writeNew(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// selfSigned makes an ECDSA P-256 key and a certificate for serverName, PEM-encoded.
func selfSigned() (cert, key []byte, err error) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: serverName}, DNSNames: []string{serverName},
		NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(20, 0, 0),
		// It is its own authority: clients trust this certificate and no other.
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(priv)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

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
	creds, pair, err := makeCredentials(dir)
	if err != nil {
		return nil, fmt.Errorf("--listen: %w", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--listen %s: %w", addr, err)
	}
	if err := os.WriteFile(filepath.Join(dir, ListenFile), []byte(ln.Addr().String()+"\n"), 0o600); err != nil {
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

// clientTLS trusts the daemon's certificate alone.
func clientTLS(cert []byte) (*tls.Config, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(cert) {
		return nil, errors.New("the daemon's certificate (tls.crt in its state directory) holds no certificate")
	}
	return &tls.Config{RootCAs: pool, ServerName: serverName, MinVersion: tls.VersionTLS13}, nil
}

// stream is an upgraded connection: what was read of it before the upgrade, then the
// connection itself.
type stream struct {
	io.Reader
	net.Conn
}

func (s stream) Read(p []byte) (int, error) { return s.Reader.Read(p) }

// switchProtocols answers a request for a stream (see upgrade) and returns the stream;
// on an error the request has been answered.
func switchProtocols(w http.ResponseWriter, r *http.Request) (io.ReadWriteCloser, bool) {
	if !strings.EqualFold(r.Header.Get("Upgrade"), upgrade) {
		fail(w, http.StatusBadRequest, "this is a stream: ask for Upgrade: "+upgrade)
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
	fmt.Fprintf(rw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: %s\r\nConnection: Upgrade\r\n\r\n", upgrade)
	if err := rw.Flush(); err != nil {
		conn.Close()
		return nil, false
	}
	return stream{Reader: rw.Reader, Conn: conn}, true
}
