package state

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// The state directory is the user's own (0700, see daemon.MakeStateDir), and still no
// state file is read or written through a link planted in its place: each is opened
// O_NOFOLLOW, and each file made anew is made O_EXCL. (launcher's attempt files are
// made the same way; the scheduler's core may not import it.)

// openFile opens a state file, never through a link.
func openFile(path string, flag int, perm os.FileMode) (*os.File, error) {
	f, err := os.OpenFile(path, flag|syscall.O_NOFOLLOW, perm)
	if errors.Is(err, syscall.ELOOP) {
		return nil, fmt.Errorf("%s is a link, which gpuq does not follow in its state directory: put the file it points to in its place: %w", path, err)
	}
	return f, err
}

// createNew creates a file of gpuq's own at path, replacing one a run before (or a
// crash) left there: O_EXCL fails on any name there, a planted link included, and
// O_NOFOLLOW refuses a link planted between the remove and the open.
func createNew(path string) (*os.File, error) {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	return openFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
}

// readPrivate reads a state file whole, never through a link.
func readPrivate(path string) ([]byte, error) {
	f, err := openFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// writeNew writes data to path whole or not at all (path.new, made afresh, renamed).
func writeNew(path string, data []byte) error {
	f, err := createNew(path + ".new")
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
		err = os.Rename(path+".new", path)
	}
	if err != nil {
		os.Remove(path + ".new")
	}
	return err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func truncate(path string, size int64) error {
	f, err := openFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	err = f.Truncate(size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
