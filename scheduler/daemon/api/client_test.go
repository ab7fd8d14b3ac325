package api

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gpuq/gpuq/launcher"
)

// TestAClientSendsNothingToAnotherUsersSocket: gpuq's verbs check that the socket's
// daemon runs as their own uid before they send it anything (a submission carries the
// environment, tokens included). The test's daemon stands for another user's: the
// client is told it is another uid.
func TestAClientSendsNothingToAnotherUsersSocket(t *testing.T) {
	dir := t.TempDir()
	ln, err := launcher.ListenUnix(SocketPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	var served atomic.Int32
	srv := &http.Server{Handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served.Add(1) })}
	go srv.Serve(ln)
	defer srv.Close()
	_, err = dialAs(dir, os.Getuid()+1)
	want := fmt.Sprintf("it is served by uid %d, not by you (uid %d): nothing was sent to it", os.Getuid(), os.Getuid()+1)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("dial another uid's socket: %v, want %q", err, want)
	}
	if n := served.Load(); n != 0 {
		t.Errorf("the client sent %d requests", n)
	}
}
