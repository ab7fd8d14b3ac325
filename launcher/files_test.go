package launcher

import (
	"errors"
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
		p, err := Start(c, LogPath(dir), Header(c, a, ""), nil)
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

// TestResolveDir: a directory is used by its real path, the links on the way followed
// once; a link that belongs to another user than root or the user is refused, wherever
// it is on the way (tests stand another user's link in with owner).
func TestResolveDir(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	sticky, state := filepath.Join(base, "tmp"), filepath.Join(base, "home", "state")
	for _, d := range []string{sticky, state} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(sticky, os.ModeSticky|0o777); err != nil {
		t.Fatal(err)
	}
	link, up := filepath.Join(sticky, "x"), filepath.Join(sticky, "up")
	if err := os.Symlink(state, link); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../home", up); err != nil { // relative, to a directory above
		t.Fatal(err)
	}
	const other = 4242
	for _, tc := range []struct {
		name, dir string
		// owners gives the links it names to another user, or root.
		owners  map[string]int
		want    string
		refused string
	}{
		{name: "a link of the user's", dir: link, want: state},
		{name: "a link of root's", dir: link, owners: map[string]int{link: 0}, want: state},
		{name: "a link of another user's", dir: link, owners: map[string]int{link: other},
			refused: link + ", on the way to " + link + ", is a link that belongs to another user (uid 4242)"},
		{name: "another user's link on the way", dir: filepath.Join(link, "attempts"), owners: map[string]int{link: other},
			refused: "belongs to another user (uid 4242)"},
		{name: "a relative link, then ..", dir: filepath.Join(up, "state", "..", "state"), want: state},
		{name: "what is not there yet", dir: filepath.Join(link, "new", "runs"), want: filepath.Join(state, "new", "runs")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := trust{uid: os.Getuid(), gid: os.Getgid(), owner: func(path string, fi fs.FileInfo) int {
				if uid, ok := tc.owners[path]; ok {
					return uid
				}
				return statOwner(path, fi)
			}}
			got, err := tr.resolve(tc.dir)
			switch {
			case tc.refused != "":
				var unsafe UnsafeDir
				if !errors.As(err, &unsafe) || !strings.Contains(err.Error(), tc.refused) {
					t.Errorf("resolve %s: %q, %v; want it refused: %q", tc.dir, got, err, tc.refused)
				}
			case err != nil || got != tc.want:
				t.Errorf("resolve %s: %q, %v; want %q", tc.dir, got, err, tc.want)
			}
		})
	}
}

// TestNewFilesAreNeverWrittenThroughALink: spec.json, supervisor.json and exit.json are
// written as path.new then renamed. A link planted at path.new (or a file a crash left
// there) is replaced, not followed: what it points to is not written, nor truncated.
func TestNewFilesAreNeverWrittenThroughALink(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	path := filepath.Join(dir, specFile)
	for _, plant := range []func() error{
		func() error { return os.Symlink(victim, path+".new") },
		func() error { return os.Symlink(filepath.Join(dir, "nowhere"), path+".new") }, // dangling: O_CREAT would make it
		func() error { return os.WriteFile(path+".new", []byte(`{"half":`), 0o644) },   // left by a crash
		func() error { return os.Symlink(victim, path) },                               // at the file itself
	} {
		if err := os.WriteFile(victim, []byte("mine\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := plant(); err != nil {
			t.Fatal(err)
		}
		if err := WriteJSON(path, Spec{Header: "h"}); err != nil {
			t.Fatal(err)
		}
		if data, _ := os.ReadFile(victim); string(data) != "mine\n" {
			t.Errorf("the file behind a planted link was written: %q", data)
		}
		if _, err := os.Lstat(filepath.Join(dir, "nowhere")); err == nil {
			t.Errorf("a dangling link's target was made")
		}
		fi, err := os.Lstat(path)
		data, _ := os.ReadFile(path)
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 || !strings.Contains(string(data), `"header":"h"`) {
			t.Errorf("%s: %v %v %q; want a private file of its own", path, fi.Mode(), err, data)
		}
		if _, err := os.Lstat(path + ".new"); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s.new is left: %v", path, err)
		}
		os.Remove(path)
	}
}

// TestAttemptDirsAreTheUsersOwn: an attempt's directory and its job's, where they are
// there already, are taken only if they are directories of the user's own that nobody
// else may write: not links, not another user's (stood in with owner).
func TestAttemptDirsAreTheUsersOwn(t *testing.T) {
	const other = 4242
	for _, tc := range []struct {
		name    string
		plant   func(job, attempt string) error
		others  func(job, attempt string) string // a directory given to another user
		refused string
	}{
		{name: "fresh"},
		{name: "there already", plant: func(job, attempt string) error { return os.MkdirAll(attempt, 0o700) }},
		{name: "the job a link", plant: func(job, _ string) error { return os.Symlink(os.TempDir(), job) }, refused: "is a link"},
		{name: "the attempt a link", plant: func(job, attempt string) error {
			os.Mkdir(job, 0o700)
			return os.Symlink(os.TempDir(), attempt)
		}, refused: "is a link"},
		{name: "the job another user's", plant: func(job, _ string) error { return os.Mkdir(job, 0o700) },
			others: func(job, _ string) string { return job }, refused: "belongs to another user (uid 4242)"},
		{name: "the attempt another user's", plant: func(_, attempt string) error { return os.MkdirAll(attempt, 0o700) },
			others: func(_, attempt string) string { return attempt }, refused: "belongs to another user (uid 4242)"},
		{name: "the attempt writable by others", plant: func(_, attempt string) error {
			os.MkdirAll(attempt, 0o700)
			return os.Chmod(attempt, 0o777)
		}, refused: "may be written by other users (mode 0777)"},
		{name: "the attempt a file", plant: func(job, attempt string) error {
			os.Mkdir(job, 0o700)
			return os.WriteFile(attempt, nil, 0o600)
		}, refused: "is not a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			job := filepath.Join(root, "t.1")
			attempt := filepath.Join(job, "attempt-1")
			if tc.plant != nil {
				if err := tc.plant(job, attempt); err != nil {
					t.Fatal(err)
				}
			}
			theirs := ""
			if tc.others != nil {
				theirs = tc.others(job, attempt)
			}
			tr := trust{uid: os.Getuid(), gid: os.Getgid(), owner: func(path string, fi fs.FileInfo) int {
				if path == theirs {
					return other
				}
				return statOwner(path, fi)
			}}
			err := makeAttemptDir(tr, attempt)
			if tc.refused == "" {
				if fi, serr := os.Lstat(attempt); err != nil || serr != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
					t.Errorf("made %s: %v %v", attempt, err, serr)
				}
				return
			}
			var unsafe UnsafeDir
			if !errors.As(err, &unsafe) || !strings.Contains(err.Error(), tc.refused) {
				t.Errorf("%v; want it refused: %q", err, tc.refused)
			}
		})
	}
}

// TestLogLineEnds: the log gets "\n" for the pty's "\r\n" (and "\r\r\n"), however the
// output is split into writes; a progress bar's lone "\r" is kept, and one that ends
// the output is written at Flush.
func TestLogLineEnds(t *testing.T) {
	for _, tc := range []struct {
		name   string
		writes []string
		want   string
	}{
		{"lines", []string{"a\r\nb\r\n"}, "a\nb\n"},
		{"split between \\r and \\n", []string{"a\r", "\nb\r", "\n"}, "a\nb\n"},
		{"a program's own \\r\\n", []string{"a\r\r\n"}, "a\n"},
		{"tqdm", []string{"\r 10%|█  |", "\r 45%|████▌|", " 450/1000\r\n", "done\r\n"}, "\r 10%|█  |\r 45%|████▌| 450/1000\ndone\n"},
		{"a bar at the end", []string{"x\r\n\r 99%", "\r"}, "x\n\r 99%\r"},
	} {
		var b strings.Builder
		l := &lineEnds{w: &b}
		for _, w := range tc.writes {
			if n, err := l.Write([]byte(w)); err != nil || n != len(w) {
				t.Fatalf("%s: wrote %d of %d: %v", tc.name, n, len(w), err)
			}
		}
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
		if b.String() != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, b.String(), tc.want)
		}
	}
}
