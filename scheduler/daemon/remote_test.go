package daemon

import (
	"bufio"
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuq/gpuq/scheduler/daemon/api"
	"github.com/gpuq/gpuq/scheduler/schedtest"
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
	schedtest.WaitFor(t, "the job to run", func() bool { return len(mustJobs(t, d.client, "", "running")) == 1 })
	info, err := d.client.Info()
	if err != nil || !strings.HasPrefix(info.Listen, "127.0.0.1:") {
		t.Fatalf("listen %q: %v", info.Listen, err)
	}
	for _, f := range []string{api.SecretFile, api.CertFile, api.KeyFile, api.ListenFile} {
		if fi, err := os.Stat(filepath.Join(cfg.StateDir, f)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v, want mode 0600", f, fi.Mode(), err)
		}
	}
	creds, err := api.LoadCredentials(cfg.StateDir)
	if err != nil {
		t.Fatal(err)
	}

	// With them, the API is the socket's.
	c, err := api.DialRemote(info.Listen, creds)
	if err != nil {
		t.Fatal(err)
	}
	if jobs, err := c.Jobs("", nil); err != nil || len(jobs) != 1 || jobs[0].Sweep != "private-sweep" {
		t.Errorf("jobs over the network: %+v %v", jobs, err)
	}

	wrong := creds
	wrong.Secret = strings.Repeat("0", len(creds.Secret))
	if _, err := api.DialRemote(info.Listen, wrong); !errors.Is(err, api.ErrUnauthorized) {
		t.Errorf("a wrong secret: %v, want it refused", err)
	}
	// No secret: whatever the request, a 401 that says nothing of the daemon.
	tlsCfg, err := api.ClientTLS(creds.Cert)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg}}
	for _, req := range []string{"GET /v1/daemon", "GET /v1/jobs", "GET /v1/jobs/private-sweep.1/attempts/1/log", "GET /v1/worker",
		"GET /v1/workers", "POST /v1/cancel", "POST /v1/shutdown"} {
		method, path, _ := strings.Cut(req, " ")
		r, _ := http.NewRequest(method, "https://"+info.Listen+path, strings.NewReader(`{"sweep":"private-sweep","stop_trainers":true}`))
		r.Header.Set("Connection", "Upgrade")
		r.Header.Set("Upgrade", api.Upgrade)
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
	// Nor one that trusts another daemon's: the certificate is pinned, not its name.
	impostor, _, err := api.MakeCredentials(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	impostor.Secret = creds.Secret
	if _, err := api.DialRemote(info.Listen, impostor); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("a client trusting another daemon's certificate: %v, want a certificate error", err)
	}
	// Credentials that others may read are not credentials.
	if err := os.Chmod(filepath.Join(cfg.StateDir, api.SecretFile), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := api.LoadCredentials(cfg.StateDir); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("a secret others may read: %v", err)
	}
}

// TestStrangersHoldNoConnection: whoever reaches the listener without the secret gets
// the 401 at once and the connection closed, even with a body still to come a byte at a
// time; a connection with the secret that is left idle is closed once idle for
// idleTimeout. Otherwise anyone could hold as many of the daemon's descriptors as they
// open connections.
func TestStrangersHoldNoConnection(t *testing.T) {
	defer func(d time.Duration) { idleTimeout = d }(idleTimeout)
	dir := t.TempDir()
	creds, _, err := api.MakeCredentials(dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := api.ClientTLS(creds.Cert)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, request string
		idle          time.Duration
	}{
		{"a body that trickles", "POST /v1/submit HTTP/1.1\r\nHost: gpuq\r\nContent-Length: 100\r\n\r\n{", time.Hour},
		{"a request, then nothing", "GET /v1/daemon HTTP/1.1\r\nHost: gpuq\r\n\r\n", time.Hour},
		{"the secret, then nothing", "GET /v1/daemon HTTP/1.1\r\nHost: gpuq\r\nAuthorization: Bearer " + creds.Secret + "\r\n\r\n",
			200 * time.Millisecond},
	} {
		idleTimeout = tc.idle
		ln, err := listenRemote(dir, "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := tcpServer(authorized(ln.secret, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			io.WriteString(w, "{}")
		})))
		go srv.Serve(ln)
		c, err := tls.Dial("tcp", ln.Addr().String(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		// Far longer than any answer takes; a connection still open then is held.
		c.SetDeadline(time.Now().Add(10 * time.Second))
		io.WriteString(c, tc.request)
		r := bufio.NewReader(c)
		if resp, err := http.ReadResponse(r, nil); err != nil {
			t.Errorf("%s: no answer: %v", tc.name, err)
		} else {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if _, err := r.ReadByte(); err != io.EOF {
				t.Errorf("%s (%s): the connection stays open (%v), want it closed", tc.name, resp.Status, err)
			}
		}
		c.Close()
		srv.Close()
	}
}
