// Package schedtest holds what gpuq's tests share: golden files, waiting for what
// another goroutine or process brings about, and a buffer such a one writes. It
// imports nothing of gpuq, so that any package's tests may use it.
package schedtest

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite golden files")

// Updating reports whether the tests were asked to rewrite what they compare with
// (go test -update).
func Updating() bool { return *update }

// Golden compares got with the file testdata/name, which go test -update rewrites.
func Golden(t testing.TB, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -update writes it)", err)
	}
	if got != string(want) {
		t.Errorf("differs from %s (go test -update rewrites it); got:\n%s", path, got)
	}
}

// WaitFor polls ok until it holds, first every millisecond (an engine in the test's
// process answers at once), then up to every 20 ms (a daemon, a trainer), and fails the
// test, naming what, after 90 s: long enough for a loaded 2-core machine.
func WaitFor(t testing.TB, what string, ok func() bool) {
	t.Helper()
	step := time.Millisecond
	for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); time.Sleep(step) {
		if ok() {
			return
		}
		step = min(2*step, 20*time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

// Buffer is written by one goroutine (a daemon's log, a child's output) while the test
// reads it.
type Buffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// WithDescriptors runs fn with this process's limit on open files (the soft
// RLIMIT_NOFILE) where free more descriptors may be opened at once than are open now,
// and no more: one more open fails with EMFILE. Nothing else of the test may open or
// close files meanwhile.
func WithDescriptors(t testing.TB, free int, fn func()) {
	t.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	// The limit bounds descriptor numbers, not their count: a new one takes the lowest
	// number free.
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	self := int(d.Fd())
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		t.Fatal(err)
	}
	open := map[int]bool{}
	for _, n := range names {
		if fd, err := strconv.Atoi(n); err == nil {
			open[fd] = true
		}
	}
	open[self] = false // closed now
	limit := 0
	for left := free; ; limit++ {
		if !open[limit] {
			if left == 0 {
				break
			}
			left--
		}
	}
	low := lim
	low.Cur = uint64(limit)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	defer syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	fn()
}

// FullDisk is a file on a disk that fills up: while Full, a write puts half its bytes
// on the disk and fails with ENOSPC, as a real one may; Stuck makes taking them back
// (Truncate) fail too, with EIO. SyncsFailing is how many of the next syncs fail with
// ENOSPC, as on a network filesystem that tells of a full disk or quota only then.
type FullDisk struct {
	File interface {
		io.Writer
		Sync() error
		Truncate(size int64) error
		Close() error
	}
	Full, Stuck  bool
	SyncsFailing int
}

func (d *FullDisk) Write(b []byte) (int, error) {
	if d.Full {
		n, _ := d.File.Write(b[:len(b)/2])
		return n, syscall.ENOSPC
	}
	return d.File.Write(b)
}

// Truncate cuts the file to size, unless the disk is Stuck.
func (d *FullDisk) Truncate(size int64) error {
	if d.Stuck {
		return syscall.EIO
	}
	return d.File.Truncate(size)
}

// Sync syncs the file, unless it is one of SyncsFailing.
func (d *FullDisk) Sync() error {
	if d.SyncsFailing > 0 {
		d.SyncsFailing--
		return syscall.ENOSPC
	}
	return d.File.Sync()
}

// Close closes the file.
func (d *FullDisk) Close() error { return d.File.Close() }
