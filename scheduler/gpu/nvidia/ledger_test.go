package nvidia

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// writeLedger records that pid holds bytes on card; 0 bytes removes the entry.
func writeLedger(dir string, card, pid int, bytes int64) error {
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
	if err := os.WriteFile(tmp, []byte(strconv.FormatInt(bytes, 10)), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, name)
}
