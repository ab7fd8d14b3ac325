package daemon

import (
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestWithoutTheSecretNothing: over the network the daemon answers only requests that
// carry its secret, over TLS with the certificate it made; without the secret, a
// request gets a 401 and nothing else, whatever it asks. The credentials are the user's
// alone.
func TestWithoutTheSecretNothing(t *testing.T) {
	cfg := testConfig(filepath.Join(t.TempDir(), "state"), t.TempDir(), nil)
	cfg.Listen = "127.0.0.1:0"
	d := startDaemonWith(t, cfg)
	sweep := writeSweep(t, "name: private-sweep\ncommand: [sh, -c, \"sleep 60\"]\njobs: [{}]\nmemory: 1GiB\n")
	if _, err := submit(t, d.client, sweep); err != nil {
		t.Fatal(err)
	}
	// A round shows its starts once the runner has started them all.
	waitFor(t, "the job to run", func() bool { return len(mustJobs(t, d.client, "", "running")) == 1 })
	info, err := d.client.Info()
	if err != nil || !strings.HasPrefix(info.Listen, "127.0.0.1:") {
		t.Fatalf("listen %q: %v", info.Listen, err)
	}
	for _, f := range []string{secretFile, certFile, keyFile, ListenFile} {
		if fi, err := os.Stat(filepath.Join(cfg.StateDir, f)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v, want mode 0600", f, fi.Mode(), err)
		}
	}
	creds, err := LoadCredentials(cfg.StateDir)
	if err != nil {
		t.Fatal(err)
	}

	// With them, the API is the socket's.
	c, err := DialRemote(info.Listen, creds)
	if err != nil {
		t.Fatal(err)
	}
	if jobs, err := c.Jobs("", nil); err != nil || len(jobs) != 1 || jobs[0].Sweep != "private-sweep" {
		t.Errorf("jobs over the network: %+v %v", jobs, err)
	}

	wrong := creds
	wrong.Secret = strings.Repeat("0", len(creds.Secret))
	if _, err := DialRemote(info.Listen, wrong); !errors.Is(err, ErrUnauthorized) {
		t.Errorf("a wrong secret: %v, want it refused", err)
	}
	// No secret: whatever the request, a 401 that says nothing of the daemon.
	tlsCfg, err := clientTLS(creds.Cert)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg}}
	for _, req := range []string{"GET /v1/daemon", "GET /v1/jobs", "GET /v1/jobs/private-sweep.1/attempts/1/log", "GET /v1/worker",
		"GET /v1/workers", "POST /v1/cancel", "POST /v1/shutdown"} {
		method, path, _ := strings.Cut(req, " ")
		r, _ := http.NewRequest(method, "https://"+info.Listen+path, strings.NewReader(`{"sweep":"private-sweep","stop_trainers":true}`))
		r.Header.Set("Connection", "Upgrade")
		r.Header.Set("Upgrade", upgrade)
		resp, err := hc.Do(r)
		if err != nil {
			t.Fatalf("%s: %v", req, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, secret := range []string{"private-sweep", cfg.StateDir, strconv.Itoa(os.Getpid()), "test"} {
			if strings.Contains(string(body), secret) {
				t.Errorf("%s without the secret: its answer tells %q: %s", req, secret, body)
			}
		}
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s without the secret: %s, want 401", req, resp.Status)
		}
	}
	if jobs := mustJobs(t, d.client, "", "running"); len(jobs) != 1 {
		t.Errorf("requests without the secret changed the daemon: %d jobs running", len(jobs))
	}

	// A client that does not trust the daemon's certificate alone never sends it.
	plain := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS13}}}
	if _, err := plain.Get("https://" + info.Listen + "/v1/daemon"); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("a client with the system's roots: %v, want a certificate error", err)
	}
	// Credentials that others may read are not credentials.
	if err := os.Chmod(filepath.Join(cfg.StateDir, secretFile), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadCredentials(cfg.StateDir); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("a secret others may read: %v", err)
	}
}
