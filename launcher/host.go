package launcher

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// HostMemory reads the machine's RAM from /proc/meminfo: its total, and what is
// available to new processes without swapping (MemAvailable).
func HostMemory() (total, available int64, err error) {
	data, err := os.ReadFile("/proc/meminfo")
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
