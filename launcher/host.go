package launcher

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
)

// HostMemory reads the machine's RAM from /proc/meminfo: its total, and what is
// available to new processes without swapping (MemAvailable).
func HostMemory() (total, available int64, err error) {
	data, err := meminfo.read()
	if err != nil {
		return 0, 0, err
	}
	total, okT := meminfoField(data, "MemTotal:")
	available, okA := meminfoField(data, "MemAvailable:")
	if !okT || !okA {
		return 0, 0, fmt.Errorf("/proc/meminfo has no MemTotal or MemAvailable")
	}
	return total, available, nil
}

// meminfo is /proc/meminfo, kept open from its first read and read again from its
// start each time (the kernel writes it anew): a daemon whose descriptors have all been
// taken (a flood of connections) still reads the host's memory every round, rather than
// stop for want of one.
var meminfo = procFile{path: "/proc/meminfo"}

type procFile struct {
	path string
	mu   sync.Mutex
	f    *os.File
	buf  []byte
}

func (p *procFile) read() ([]byte, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.f == nil {
		f, err := os.Open(p.path)
		if err != nil {
			return nil, err
		}
		p.f, p.buf = f, make([]byte, 4<<10)
	}
	for {
		n, err := p.f.ReadAt(p.buf, 0)
		if n < len(p.buf) && (err == nil || err == io.EOF) {
			return append([]byte(nil), p.buf[:n]...), nil
		}
		if err != nil && err != io.EOF {
			return nil, err
		}
		p.buf = make([]byte, 2*len(p.buf)) // it grew past what was read
	}
}

// meminfoField reads a "Key:   123 kB" line in bytes: a field of /proc/meminfo, or of
// a process's smaps_rollup. It allocates nothing: the daemon reads a trainer's every
// round.
func meminfoField(data []byte, key string) (int64, bool) {
	for len(data) > 0 {
		var line []byte
		line, data, _ = bytes.Cut(data, []byte{'\n'})
		rest, ok := bytes.CutPrefix(line, []byte(key))
		if !ok || len(rest) > 0 && rest[0] != ' ' && rest[0] != '\t' {
			continue
		}
		rest = bytes.TrimLeft(rest, " \t")
		digits, unit := rest, []byte(nil)
		if i := bytes.IndexAny(rest, " \t"); i >= 0 {
			digits, unit = rest[:i], rest[i:]
		}
		if len(digits) == 0 {
			continue // the key without a value
		}
		n, err := strconv.ParseInt(string(digits), 10, 64)
		if err != nil {
			return 0, false
		}
		if string(bytes.TrimSpace(unit)) == "kB" {
			n <<= 10
		}
		return n, true
	}
	return 0, false
}
