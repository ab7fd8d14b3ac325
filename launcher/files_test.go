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

// TestOwnDir: a directory is refused unless it is the user's own and every directory
// above it is root's or the user's, writable by no one else without the sticky bit, or
// by the user's own group. The cases with another owner need root to set up.
func TestOwnDir(t *testing.T) {
	const other = 65534 // nobody
	for _, tc := range []struct {
		name string
		// parent sets up the directory above the one checked, dir the one checked.
		parent, dir func(string) error
		refused     string
		root        bool
	}{
		{name: "the user's own, in a private directory"},
		{name: "in a directory anyone may write, with the sticky bit", parent: chmod(os.ModeSticky | 0o777)},
		{name: "in a directory its own group may write", parent: chmod(0o775)},
		{name: "in a directory anyone may write", parent: chmod(0o777), refused: "may be written by other users (mode 0777, group"},
		{name: "in a directory another group may write", parent: chown(-1, other, 0o770), root: true, refused: "may be written by other users (mode 0770, group 65534)"},
		{name: "another user's", dir: chown(other, -1, 0o777), root: true, refused: "belongs to another user (uid 65534), who could plant links"},
		{name: "in another user's directory", parent: chown(other, -1, 0o755), root: true, refused: "belongs to another user (uid 65534), who could replace"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.root && os.Getuid() != 0 {
				t.Skip("needs root to give a directory to another user")
			}
			parent := filepath.Join(t.TempDir(), "parent")
			dir := filepath.Join(parent, "state")
			if err := os.MkdirAll(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			for _, set := range []struct {
				path string
				fn   func(string) error
			}{{parent, tc.parent}, {dir, tc.dir}} {
				if set.fn != nil {
					if err := set.fn(set.path); err != nil {
						t.Fatal(err)
					}
				}
			}
			err := OwnDir(dir)
			if tc.refused == "" && err != nil || tc.refused != "" && (err == nil || !strings.Contains(err.Error(), tc.refused)) {
				t.Errorf("OwnDir: %v; want %q", err, tc.refused)
			}
		})
	}
}

func chmod(mode os.FileMode) func(string) error {
	return func(p string) error { return os.Chmod(p, mode) }
}

func chown(uid, gid int, mode os.FileMode) func(string) error {
	return func(p string) error {
		if err := os.Chown(p, uid, gid); err != nil {
			return err
		}
		return os.Chmod(p, mode)
	}
}
