package launcher

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
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

// PrivateDir makes dir (0700) where it is missing, and refuses one that another user
// owns or that others may write to: they could plant links or directories in it where
// attempts' files go, or read what the trainers were given.
func PrivateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() {
		return fmt.Errorf("%s belongs to another user (uid %d), who could plant links in it: choose a directory of your own", dir, st.Uid)
	}
	if perm := fi.Mode().Perm(); perm&0o022 != 0 {
		return fmt.Errorf("%s may be written by other users (mode %04o), who could plant links in it: run chmod go-w %s, or choose a new directory (gpuq makes it 0700)", dir, perm, dir)
	}
	return nil
}
