package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// version and commit are set at release builds:
//
//	go build -ldflags "-X main.version=v0.4.0 -X main.commit=$(git rev-parse HEAD)" ./cmd/regent
//
// Left empty, they come from the build info: the module version (for
// `go install ...@version`) and the VCS revision the go tool stamps,
// which it does not when building with -buildvcs=false or outside a
// checkout; then they read "devel" and "unknown".
var (
	version string
	commit  string
)

// versionInfo is the version and commit this binary reports.
func versionInfo() (ver, rev string, modified bool) {
	ver, rev = version, commit
	if bi, ok := debug.ReadBuildInfo(); ok {
		if ver == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			ver = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if rev == "" {
					rev = s.Value
				}
			case "vcs.modified":
				modified = s.Value == "true" && commit == ""
			}
		}
	}
	if ver == "" {
		ver = "devel"
	}
	if rev == "" {
		rev = "unknown"
	}
	return ver, rev, modified
}

// versionLine is what `regent version` prints.
func versionLine() string {
	ver, rev, modified := versionInfo()
	if modified {
		rev += " (modified)"
	}
	return fmt.Sprintf("regent %s commit %s %s %s/%s", ver, rev, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
