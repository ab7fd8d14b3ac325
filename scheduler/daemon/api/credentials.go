package api

// The credentials of a daemon's network listener (gpuq daemon --listen): a secret that
// every request carries and a certificate that clients trust alone, made by the daemon
// in its state directory, read there by its workers and remote clients.

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Files of the listener in the state directory.
const (
	SecretFile = "secret"  // what workers and remote clients present
	CertFile   = "tls.crt" // the daemon's certificate, which they trust alone
	KeyFile    = "tls.key"
	// serverName is the name in the certificate; clients check it, not a host name, so
	// that a worker may reach the daemon by any address.
	serverName = "gpuq"
)

// Credentials are what a worker or a remote client needs to reach a daemon over the
// network: its secret, and its certificate (PEM).
type Credentials struct {
	Secret string
	Cert   []byte
}

// LoadCredentials reads a daemon's credentials from its state directory.
func LoadCredentials(dir string) (Credentials, error) {
	path := filepath.Join(dir, SecretFile)
	secret, err := readPrivate(path)
	if err != nil {
		return Credentials{}, err
	}
	s := strings.TrimSpace(string(secret))
	if _, err := hex.DecodeString(s); err != nil || len(s) != 2*secretBytes {
		return Credentials{}, fmt.Errorf("%s is not a secret a gpuq daemon made (%d hex digits): a crash may have cut it short; "+
			"remove it, and the daemon makes a new one when started again (its workers and clients then read the new one)", path, 2*secretBytes)
	}
	cert, err := readPrivate(filepath.Join(dir, CertFile))
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

// MakeCredentials makes the daemon's secret, key and certificate where they are missing,
// once: a daemon started again keeps them, so that its workers and clients still reach it.
func MakeCredentials(dir string) (Credentials, tls.Certificate, error) {
	secretPath := filepath.Join(dir, SecretFile)
	if _, err := os.Stat(secretPath); errors.Is(err, os.ErrNotExist) {
		b := make([]byte, secretBytes)
		rand.Read(b)
		if err := writeNew(secretPath, []byte(hex.EncodeToString(b)+"\n")); err != nil {
			return Credentials{}, tls.Certificate{}, err
		}
	}
	certPath, keyPath := filepath.Join(dir, CertFile), filepath.Join(dir, KeyFile)
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

// ClientTLS trusts the daemon's certificate alone.
func ClientTLS(cert []byte) (*tls.Config, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(cert) {
		return nil, errors.New("the daemon's certificate (tls.crt in its state directory) holds no certificate")
	}
	return &tls.Config{RootCAs: pool, ServerName: serverName, MinVersion: tls.VersionTLS13}, nil
}
