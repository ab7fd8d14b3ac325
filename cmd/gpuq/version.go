package main

import (
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// version is set at build time with -ldflags "-X main.version=..."; otherwise gpuq
// tells its version from what the go command stamped into the binary (see versionOf).
var version = "dev"

// build is the stamp of one build, set with -ldflags "-X main.build=..." (make build),
// which gives gpuq-supervisor, built beside it, the same: gpuq starts its attempts'
// supervisors with that binary only where it says the same stamp.
var build string

// versionText is gpuq's version, as --version prints it and a daemon reports it.
func versionText() string {
	info, _ := debug.ReadBuildInfo()
	return versionOf(version, info)
}

// newVersionCmd is gpuq version, for those who type the verb rather than --version: it
// prints what --version prints (cobra's default version template).
func newVersionCmd(io ioStreams) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print gpuq's version, as --version does",
		Args:  noArgs,
		// As --version, it reads no settings: a bad config file must not hide the version.
		PersistentPreRunE: func(*cobra.Command, []string) error { return nil },
		RunE: func(cmd *cobra.Command, _ []string) error {
			root := cmd.Root()
			_, err := fmt.Fprintf(io.Out, "%s version %s\n", root.Name(), root.Version)
			return err
		},
	}
}

// versionOf is the version set at build time, or else the main module's (a tag, or a
// pseudo-version naming the commit), then the commit it was built from, when, and
// whether the tree had changes, and the Go that built it; "dev" where the build says
// none of this (go run, go test).
func versionOf(set string, info *debug.BuildInfo) string {
	v := set
	if info == nil {
		return v
	}
	if v == "dev" && info.Main.Version != "" && info.Main.Version != "(devel)" {
		v = info.Main.Version
	}
	vcs := map[string]string{}
	for _, s := range info.Settings {
		vcs[s.Key] = s.Value
	}
	var from []string
	if rev := vcs["vcs.revision"]; rev != "" {
		from = append(from, "commit "+rev[:min(len(rev), 12)])
	}
	if t := vcs["vcs.time"]; t != "" {
		from = append(from, t)
	}
	if vcs["vcs.modified"] == "true" {
		from = append(from, "with changes not committed")
	}
	if len(from) > 0 {
		v += " (" + strings.Join(from, ", ") + ")"
	}
	if info.GoVersion != "" {
		v += fmt.Sprintf(", built with %s", info.GoVersion)
	}
	return v
}
