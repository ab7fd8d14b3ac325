package main

import (
	"runtime/debug"
	"testing"
)

// TestVersion: --version says the version set at build time, or the module's and the
// commit the binary was built from, when, and whether the tree had changes; a build
// that says nothing (go test) is "dev".
func TestVersion(t *testing.T) {
	stamped := &debug.BuildInfo{GoVersion: "go1.24.2", Main: debug.Module{Version: "v0.0.0-20261125175916-84e37b9a1b2c+dirty"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "84e37b9a1b2c3d4e5f"}, {Key: "vcs.time", Value: "2026-11-25T17:59:16Z"},
			{Key: "vcs.modified", Value: "true"}}}
	for _, tc := range []struct {
		set  string
		info *debug.BuildInfo
		want string
	}{
		{"dev", stamped, "v0.0.0-20261125175916-84e37b9a1b2c+dirty (commit 84e37b9a1b2c, 2026-11-25T17:59:16Z, with changes not committed), built with go1.24.2"},
		{"1.2.0", &debug.BuildInfo{GoVersion: "go1.24.2", Main: debug.Module{Version: "(devel)"}}, "1.2.0, built with go1.24.2"},
		{"dev", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "dev"},
		{"dev", nil, "dev"},
	} {
		if got := versionOf(tc.set, tc.info); got != tc.want {
			t.Errorf("versionOf(%q) = %q, want %q", tc.set, got, tc.want)
		}
	}
	if out, _, code := gpuq(t, "--version"); code != exitOK || out == "gpuq version dev\n" {
		t.Errorf("--version: %d %q", code, out)
	}
}
