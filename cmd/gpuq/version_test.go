package main

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"testing"

	"github.com/creack/pty"
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

// TestVersionVerb: gpuq version prints what gpuq --version does, is listed in the help
// as the other verbs are, and, as --version, reads no config file (a broken one must not
// hide the version).
func TestVersionVerb(t *testing.T) {
	want, _, code := gpuq(t, "--version")
	if code != exitOK {
		t.Fatalf("--version: exit %d", code)
	}
	broken := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(broken, []byte("gpus: [\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"version"}, {"version", "--config", broken}} {
		if out, errOut, code := gpuq(t, args...); code != exitOK || out != want {
			t.Errorf("%v: exit %d, %q%s; want %q as --version prints", args, code, out, errOut, want)
		}
	}
	if help, _, _ := gpuq(t, "--help"); !regexp.MustCompile(`(?m)^  version +Print gpuq's version`).MatchString(help) {
		t.Errorf("gpuq --help does not list version:\n%s", help)
	}
	if _, errOut, code := gpuq(t, "version", "extra"); code != exitBadInput {
		t.Errorf("version extra: exit %d, %s; want bad input", code, errOut)
	}
}

// TestACommandAsksTheTerminalNothing: gpuq on a terminal that answers no query (script,
// expect, a relayed ssh -tt) writes what it says and nothing else, and ends. A package
// of top's once asked every command's terminal for its background colour before main
// ran, and waited five seconds for an answer that never came.
func TestACommandAsksTheTerminalNothing(t *testing.T) {
	cmd := exec.Command(os.Args[0], "version")
	cmd.Env = append(os.Environ(), asGPUQ+"=1", "TERM=xterm-256color")
	ptmx, err := pty.Start(cmd) // its terminal, controlling, in the foreground
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	out, _ := io.ReadAll(ptmx) // to the end: EIO once it has exited
	if err := cmd.Wait(); err != nil {
		t.Fatalf("gpuq version: %v\n%q", err, out)
	}
	if bytes.ContainsRune(out, '\x1b') || !bytes.HasPrefix(out, []byte("gpuq version ")) {
		t.Errorf("gpuq version wrote %q to its terminal, want its version alone", out)
	}
}
