package launcher

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// An attempt's files carry what its trainer was given, API keys in the environment
// included: they are its owner's alone (files 0600, directories 0700), and are never
// written through a link someone planted where one of them goes.

// createPrivate creates an attempt's file at path, replacing one a run before (or a
// crash) left there. O_EXCL fails on any name that exists, a symbolic link included, and
// O_NOFOLLOW refuses a link planted between the remove and the open, so nothing outside
// the attempt is written or truncated.
func createPrivate(path string) (*os.File, error) {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if err := diskRefuses("open", path); err != nil {
		return nil, err
	}
	return os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
}

// openPrivate opens one of an attempt's files that is kept across runs (its lock, the
// supervisor's log) for flag, made 0600 where it is missing, never through a link.
func openPrivate(path string, flag int) (*os.File, error) {
	if err := diskRefuses("open", path); err != nil {
		return nil, err
	}
	return os.OpenFile(path, flag|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
}

// writePrivate writes data to a new private file at path.
func writePrivate(path string, data []byte) error {
	f, err := createPrivate(path)
	if err != nil {
		return err
	}
	err = write(f, data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// write writes data to f, as a full disk may refuse (see diskRefuses).
func write(f *os.File, data []byte) error {
	if err := diskRefuses("write", f.Name()); err != nil {
		return err
	}
	_, err := f.Write(data)
	return err
}

// diskFault, set by tests alone, is what the disk says to each step of starting an
// attempt that writes to it (an op and the base name of the file): an errno
// (ENOSPC) fails the step as a full disk would.
var diskFault func(op, name string) syscall.Errno

// diskRefuses is the error a test's full disk gives the step op on path; nil otherwise.
func diskRefuses(op, path string) error {
	if diskFault == nil {
		return nil
	}
	if errno := diskFault(op, filepath.Base(path)); errno != 0 {
		return &fs.PathError{Op: op, Path: path, Err: errno}
	}
	return nil
}

// PrivateDir makes dir (0700) where it is missing, and refuses one that others may
// write to, or that lies where they could replace it (see OwnDir): they could plant
// links or directories in it where attempts' files go, or read what the trainers were
// given. dir should be a real path (see ResolveDir).
func PrivateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := OwnDir(dir); err != nil {
		return err
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if perm := fi.Mode().Perm(); perm&0o022 != 0 {
		return UnsafeDir(fmt.Sprintf("%s may be written by other users (mode %04o), who could plant links in it: run chmod go-w %s, or choose a new directory (gpuq makes it 0700)", dir, perm, dir))
	}
	return nil
}

// UnsafeDir is why PrivateDir or OwnDir refused a directory: the user's choice of
// directory is at fault, not gpuq's work, so it is bad input.
type UnsafeDir string

func (e UnsafeDir) Error() string { return string(e) }

// trust is whose files gpuq trusts: the user's own (uid, gid) and root's. owner reads
// the uid of a file; tests stand another user's files in for the user's own with it.
type trust struct {
	uid, gid int
	owner    func(path string, fi fs.FileInfo) int
}

func hostTrust() trust { return trust{uid: os.Getuid(), gid: os.Getgid(), owner: statOwner} }

func statOwner(_ string, fi fs.FileInfo) int {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid)
	}
	return -1
}

// ResolveDir returns the real path of dir, every link in it followed, for gpuq to use
// from then on: a link that someone may later point elsewhere (another user's, or one
// in a directory others may write) is followed once, here, and never again. A link
// that belongs to another user than root or the user is refused: its owner would decide
// where gpuq's files go. The part of dir that does not exist yet is kept as written, to
// be made.
func ResolveDir(dir string) (string, error) { return hostTrust().resolve(dir) }

// maxLinks is how many links one path may go through, as Linux allows (ELOOP).
const maxLinks = 40

func (t trust) resolve(dir string) (string, error) {
	path := dir
	if !filepath.IsAbs(path) {
		wd, err := os.Getwd()
		if err != nil {
			return "", err
		}
		path = wd + "/" + path // not Join: ".." after a link is resolved as the kernel does
	}
	rest := strings.Split(path, "/")
	real := "/"
	for links := 0; len(rest) > 0; {
		name := rest[0]
		rest = rest[1:]
		switch name {
		case "", ".":
			continue
		case "..":
			real = filepath.Dir(real)
			continue
		}
		next := filepath.Join(real, name)
		fi, err := os.Lstat(next)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return filepath.Join(append([]string{next}, rest...)...), nil
		case err != nil:
			return "", err
		case fi.Mode()&fs.ModeSymlink == 0:
			real = next
			continue
		}
		if links++; links > maxLinks {
			return "", &fs.PathError{Op: "resolve", Path: dir, Err: syscall.ELOOP}
		}
		if uid := t.owner(next, fi); uid != t.uid && uid != 0 {
			return "", UnsafeDir(fmt.Sprintf("%s, on the way to %s, is a link that belongs to another user (uid %d), who could point it anywhere: "+
				"give the directory it points to, or one of your own", next, dir, uid))
		}
		target, err := os.Readlink(next)
		if err != nil {
			return "", err
		}
		if filepath.IsAbs(target) {
			real = "/"
		}
		rest = append(strings.Split(target, "/"), rest...)
	}
	return real, nil
}

// OwnDir refuses a directory that is not the user's own, or that lies inside one that
// other users could change, as ssh's StrictModes does: each directory above it must
// belong to root or the user, and be writable by no one else, unless it has the sticky
// bit (as /tmp does) or the group that may write is the user's own; and a link on the
// way to it must be root's or the user's (see ResolveDir). Otherwise another user could
// plant the links gpuq writes through, replace the socket that gpuq sends environments
// to, or swap the whole directory for one of theirs.
func OwnDir(dir string) error { return hostTrust().ownDir(dir) }

func (t trust) ownDir(dir string) error {
	real, err := t.resolve(dir)
	if err != nil {
		return err
	}
	for p := real; ; p = filepath.Dir(p) {
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return nil
		}
		above := ""
		if p != real {
			above = ", above " + dir + ","
		}
		perm, uid := fi.Mode().Perm(), t.owner(p, fi)
		switch {
		case p == real && uid != t.uid:
			return UnsafeDir(fmt.Sprintf("%s belongs to another user (uid %d), who could plant links in it: choose a directory of your own", dir, uid))
		case uid != t.uid && uid != 0:
			return UnsafeDir(fmt.Sprintf("%s%s belongs to another user (uid %d), who could replace what is in it: choose a directory of your own", p, above, uid))
		case p != real && fi.Mode()&os.ModeSticky == 0 && (perm&0o002 != 0 || perm&0o020 != 0 && int(st.Gid) != t.gid):
			return UnsafeDir(fmt.Sprintf("%s%s may be written by other users (mode %04o, group %d) and has no sticky bit, so they could replace what is in it: "+
				"run chmod go-w %s, or choose a directory elsewhere", p, above, perm, st.Gid, p))
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}

// makeOwnDir makes dir (0700), or takes the one there if it is a directory of the
// user's own that no one else may write: not a link, which gpuq never follows into an
// attempt, and not another user's, who could read what the trainer is given or plant
// links in it.
func (t trust) makeOwnDir(dir string) error {
	if err := diskRefuses("mkdir", dir); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	switch uid := t.owner(dir, fi); {
	case fi.Mode()&fs.ModeSymlink != 0:
		return UnsafeDir(fmt.Sprintf("%s is a link, which gpuq does not follow to an attempt's files: remove it", dir))
	case !fi.IsDir():
		return UnsafeDir(fmt.Sprintf("%s is not a directory: remove it", dir))
	case uid != t.uid:
		return UnsafeDir(fmt.Sprintf("%s belongs to another user (uid %d), who could read what its trainer is given or plant links in it: remove it", dir, uid))
	case fi.Mode().Perm()&0o022 != 0:
		return UnsafeDir(fmt.Sprintf("%s may be written by other users (mode %04o): remove it", dir, fi.Mode().Perm()))
	}
	return nil
}

// WriteJSON writes v to path whole or not at all: a temporary file (path.new, made
// afresh, never through a link: see createPrivate), synced, renamed.
func WriteJSON(path string, v any) error { return writeJSON(path, v, true) }

// replaceJSON writes v to path whole or not at all, as WriteJSON does, without syncing
// it: for a record of processes that run (supervisor.json), which a crash of the
// machine ends with them, so that a copy lost with it tells nothing wrong. A sync waits
// for the disk, on every attempt's start.
func replaceJSON(path string, v any) error { return writeJSON(path, v, false) }

func writeJSON(path string, v any, durable bool) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	tmp := path + ".new"
	f, err := createPrivate(tmp)
	if err != nil {
		return err
	}
	err = write(f, data)
	if err == nil && durable {
		if err = diskRefuses("sync", tmp); err == nil {
			err = f.Sync()
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		if err = diskRefuses("rename", path); err == nil {
			err = os.Rename(tmp, path)
		}
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	if !durable {
		return nil
	}
	return syncDir(filepath.Dir(path))
}

// placeJSON writes v to path whole or not at all, as WriteJSON does, but syncs it only
// when sync is called: what it wrote can be read at once (renamed into place), and is
// on the disk once sync has returned. A crash before that may leave path cut short.
func placeJSON(path string, v any) (sync func() error, err error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	tmp := path + ".new"
	f, err := createPrivate(tmp)
	if err != nil {
		return nil, err
	}
	err = write(f, data)
	if err == nil {
		if err = diskRefuses("rename", path); err == nil {
			err = os.Rename(tmp, path)
		}
	}
	if err != nil {
		f.Close()
		os.Remove(tmp)
		return nil, err
	}
	return func() error {
		err := diskRefuses("sync", path)
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		return syncDir(filepath.Dir(path))
	}, nil
}

// syncDir syncs directory dir: the names made, renamed or removed in it.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
