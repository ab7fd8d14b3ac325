package main

import (
	"path/filepath"
	"time"
)

// runDir is where a run keeps its attempts' configs and logs.
func runDir(sweep string, now time.Time) string {
	return filepath.Join(xdgDir("XDG_STATE_HOME", filepath.Join(".local", "state")), "gpuq", "runs",
		sweep+"-"+now.Format("20060102-150405"))
}
