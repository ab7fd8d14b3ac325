package main

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"testing"
)

// TestVerbsAreClientsOfTheAPI: gpuq's verbs talk to a daemon through its API (package
// api: wire types and client); only gpuq daemon, which runs one, and gpuq run, which
// serves its sweep's (runserve.go), import the daemon's server.
func TestVerbsAreClientsOfTheAPI(t *testing.T) {
	const server = "github.com/gpuq/gpuq/scheduler/daemon"
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range parsed.Imports {
			if path, _ := strconv.Unquote(imp.Path.Value); path == server && f != "daemon.go" && f != "runserve.go" {
				t.Errorf("%s imports the daemon's server; a verb needs only its API, scheduler/daemon/api", f)
			}
		}
	}
}
