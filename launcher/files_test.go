package launcher

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An attempt's files are its owner's alone, and links planted where they go (in a
// shared --log-dir, say) are replaced, never followed.
func TestAttemptFilesArePrivate(t *testing.T) {
	for _, planted := range []bool{false, true} {
		root := t.TempDir()
		dir := filepath.Join(root, "t.1", "attempt-1")
		victims := map[string]string{"log": filepath.Join(root, "victim-log"), "config.yaml": filepath.Join(root, "victim-config")}
		if planted {
			if err := os.MkdirAll(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			for name, victim := range victims {
				if err := os.WriteFile(victim, []byte("mine\n"), 0o600); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(victim, filepath.Join(dir, name)); err != nil {
					t.Fatal(err)
				}
			}
		}
		s := testSweep(t)
		a := Attempt{Sweep: s, JobID: "t.1", N: 1, Params: s.Jobs[0].Params, Dir: dir}
		c, err := Prepare(a, append(os.Environ(), "GPUQ_TEST_HELPER=echo"))
		if err != nil {
			t.Fatal(err)
		}
		p, err := Start(c, LogPath(dir), Header(c, a.JobID, a.N, a.Tier, nil, ""), nil)
		if err != nil {
			t.Fatal(err)
		}
		waitDone(t, p)
		modes := map[string]fs.FileMode{filepath.Join(root, "t.1"): fs.ModeDir | 0o700, dir: fs.ModeDir | 0o700,
			c.Config: 0o600, LogPath(dir): 0o600}
		if planted {
			delete(modes, filepath.Join(root, "t.1")) // the test made them
			delete(modes, dir)
		}
		for path, want := range modes {
			if fi, err := os.Lstat(path); err != nil || fi.Mode() != want {
				t.Errorf("planted %v: %s: %v %v, want %v", planted, path, fi.Mode(), err, want)
			}
		}
		if log, _ := os.ReadFile(LogPath(dir)); !strings.Contains(string(log), "GPUQ_JOB_ID=t.1") {
			t.Errorf("planted %v: the log lacks the trainer's output:\n%s", planted, log)
		}
		for _, victim := range victims {
			if data, err := os.ReadFile(victim); planted && string(data) != "mine\n" {
				t.Errorf("%s, behind a planted link, was written: %q %v", victim, data, err)
			}
		}
	}
}

func TestPrivateDir(t *testing.T) {
	root := t.TempDir()
	fresh := filepath.Join(root, "a", "b")
	if err := PrivateDir(fresh); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(fresh); fi.Mode().Perm() != 0o700 {
		t.Errorf("made %s %v, want 0700", fresh, fi.Mode())
	}
	for _, mode := range []os.FileMode{0o777, os.ModeSticky | 0o777, 0o770, os.ModeSetgid | 0o775} {
		shared := filepath.Join(root, "shared")
		os.Mkdir(shared, 0o700)
		if err := os.Chmod(shared, mode); err != nil {
			t.Fatal(err)
		}
		if err := PrivateDir(shared); err == nil || !strings.Contains(err.Error(), "may be written by other users") {
			t.Errorf("a directory of mode %v: %v, want it refused", mode, err)
		}
	}
}
