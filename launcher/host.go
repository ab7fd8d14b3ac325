package launcher

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
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

// meminfoField reads a "Key:   123 kB" line in bytes.
func meminfoField(data []byte, key string) (int64, bool) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == key {
			n, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return 0, false
			}
			if len(f) >= 3 && f[2] == "kB" {
				n <<= 10
			}
			return n, true
		}
	}
	return 0, false
}
