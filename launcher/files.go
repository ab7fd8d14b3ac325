package launcher

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// An attempt's files carry what its trainer was given, API keys in the environment
// included: they are its owner's alone (files 0600, directories 0700), and are never
// written through a link someone planted where one of them goes.

// createPrivate creates an attempt's file at path, replacing one a run before left
// there. O_EXCL fails on any name that exists, a symbolic link included, so nothing
// outside the attempt is written or truncated.
func createPrivate(path string) (*os.File, error) {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	return os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
}

// writePrivate writes data to a new private file at path.
func writePrivate(path string, data []byte) error {
	f, err := createPrivate(path)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// PrivateDir makes dir (0700) where it is missing, and refuses one that others may
// write to, or that lies where they could replace it (see OwnDir): they could plant
// links or directories in it where attempts' files go, or read what the trainers were
// given.
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

// OwnDir refuses a directory that is not the user's own, or that lies inside one that
// other users could change, as ssh's StrictModes does: each directory above it must
// belong to root or the user, and be writable by no one else, unless it has the sticky
// bit (as /tmp does) or the group that may write is the user's own. Otherwise another
// user could plant the links gpuq writes through, replace the socket that gpuq sends
// environments to, or swap the whole directory for one of theirs.
func OwnDir(dir string) error {
	real, err := filepath.EvalSymlinks(dir)
	if err == nil {
		real, err = filepath.Abs(real)
	}
	if err != nil {
		return err
	}
	uid, gid := os.Getuid(), os.Getgid()
	for p := real; ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
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
		perm := fi.Mode().Perm()
		switch {
		case p == real && int(st.Uid) != uid:
			return UnsafeDir(fmt.Sprintf("%s belongs to another user (uid %d), who could plant links in it: choose a directory of your own", dir, st.Uid))
		case int(st.Uid) != uid && st.Uid != 0:
			return UnsafeDir(fmt.Sprintf("%s%s belongs to another user (uid %d), who could replace what is in it: choose a directory of your own", p, above, st.Uid))
		case p != real && fi.Mode()&os.ModeSticky == 0 && (perm&0o002 != 0 || perm&0o020 != 0 && int(st.Gid) != gid):
			return UnsafeDir(fmt.Sprintf("%s%s may be written by other users (mode %04o, group %d) and has no sticky bit, so they could replace what is in it: "+
				"run chmod go-w %s, or choose a directory elsewhere", p, above, perm, st.Gid, p))
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}

// WriteJSON writes v to path whole or not at all: a temporary file, synced, renamed.
func WriteJSON(path string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	tmp := path + ".new"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
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
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		var d *os.File
		if d, err = os.Open(filepath.Dir(path)); err == nil {
			err = d.Sync()
			d.Close()
		}
	}
	return err
}
