package nvidia

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// writeLedger records that pid holds bytes on card; 0 bytes removes the entry.
func writeLedger(dir string, card, pid int, bytes int64) error {
	return writeLedgerUtil(dir, card, pid, bytes, "")
}

// writeLedgerUtil is writeLedger with the process's utilization as simtrain.py writes
// it ("" for none).
func writeLedgerUtil(dir string, card, pid int, bytes int64, util string) error {
	name := filepath.Join(dir, fmt.Sprintf("%d-%d", card, pid))
	if bytes == 0 {
		if err := os.Remove(name); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp := name + ".tmp"
	if err := os.WriteFile(tmp, []byte(strings.TrimSpace(strconv.FormatInt(bytes, 10)+" "+util)), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, name)
}
