package api

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestCredentialsAreTheUsersFilesAlone: a worker or a remote client trusts the
// certificate it reads and sends the secret it reads, so each must be a file of the
// user's own that nobody else can read, and the secret one the daemon made: a link to
// another of the user's files, a pipe, a file of another user's (which gpuq as root
// could read), a secret cut short, are each refused, and nothing hangs on them.
func TestCredentialsAreTheUsersFilesAlone(t *testing.T) {
	for _, tt := range []struct {
		name  string
		plant func(t *testing.T, path string)
		want  string
	}{
		{"a link to a private file", func(t *testing.T, path string) {
			other := filepath.Join(t.TempDir(), "id_ed25519")
			os.WriteFile(other, []byte("-----BEGIN OPENSSH PRIVATE KEY-----\n"), 0o600)
			os.Remove(path)
			os.Symlink(other, path)
		}, "is a symbolic link"},
		{"a pipe", func(t *testing.T, path string) {
			os.Remove(path)
			if err := syscall.Mkfifo(path, 0o600); err != nil {
				t.Fatal(err)
			}
		}, "is not a file"},
		{"cut short", func(t *testing.T, path string) { os.WriteFile(path, nil, 0o600) }, "is not a secret a gpuq daemon made"},
		{"short", func(t *testing.T, path string) { os.WriteFile(path, []byte("hunter2\n"), 0o600) }, "is not a secret a gpuq daemon made"},
		{"another user's", func(t *testing.T, path string) {
			if os.Getuid() != 0 {
				t.Skip("only root can give a file to another user")
			}
			if err := os.Chown(path, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}, "belongs to uid 65534"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if _, _, err := MakeCredentials(dir); err != nil {
				t.Fatal(err)
			}
			tt.plant(t, filepath.Join(dir, SecretFile))
			done := make(chan error, 1)
			go func() {
				_, err := LoadCredentials(dir)
				done <- err
			}()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Errorf("credentials read: %v, want %q", err, tt.want)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("reading the credentials hangs")
			}
		})
	}
}
