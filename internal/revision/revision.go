// Package revision names the commit a binary ran: from the Go
// toolchain's VCS stamp when the build has one, and otherwise from git at
// run time, in the tokenbed tree the binary was built in (or started
// from). A nightly result that cannot name its commit is of little use,
// and `GOFLAGS=-buildvcs=false` (common in CI) and `go test` binaries
// carry no stamp.
//
// A repository that is not tokenbed's (its top-level go.mod does not
// declare module tokenbed) is never asked: a run started inside some
// other checkout must not report that checkout's revision.
package revision

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
)

// Module is the module whose repositories may name the revision.
const Module = "tokenbed"

// Revision is the commit a binary ran.
type Revision struct {
	ID     string // 12 hex digits, or "unknown"
	Dirty  bool   // the tree had uncommitted changes
	Source string // "build" (the VCS stamp), "git" (asked at run time) or "" (unknown)
}

// String is the revision as run.json records it: ID, with "-dirty"
// appended when the tree had changes.
func (r Revision) String() string {
	if r.Dirty {
		return r.ID + "-dirty"
	}
	return r.ID
}

// Unknown is the revision when neither the build nor git names one.
var Unknown = Revision{ID: "unknown"}

var (
	once    sync.Once
	current Revision
)

// Current is the running binary's revision, found once per process.
func Current() Revision {
	once.Do(func() {
		info, _ := debug.ReadBuildInfo()
		var dirs []string
		if exe, err := os.Executable(); err == nil {
			if exe, err := filepath.EvalSymlinks(exe); err == nil {
				dirs = append(dirs, filepath.Dir(exe))
			}
		}
		if wd, err := os.Getwd(); err == nil {
			dirs = append(dirs, wd)
		}
		current = Find(info, dirs, gitCmd)
	})
	return current
}

// Git runs git with args in dir and returns its standard output.
type Git func(dir string, args ...string) (string, error)

func gitCmd(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	return string(out), err
}

// Find is the revision from info's VCS stamp, or else from the first of
// dirs inside a tokenbed repository, asked through git.
func Find(info *debug.BuildInfo, dirs []string, git Git) Revision {
	if r, ok := FromBuild(info); ok {
		return r
	}
	for _, d := range dirs {
		if r, ok := FromGit(d, git); ok {
			return r
		}
	}
	return Unknown
}

// FromBuild reads the Go toolchain's VCS stamp.
func FromBuild(info *debug.BuildInfo) (Revision, bool) {
	if info == nil {
		return Revision{}, false
	}
	r := Revision{Source: "build"}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			r.ID = s.Value
		case "vcs.modified":
			r.Dirty = s.Value == "true"
		}
	}
	if r.ID == "" {
		return Revision{}, false
	}
	r.ID = r.ID[:min(len(r.ID), 12)]
	return r, true
}

// FromGit asks git for the revision of the repository holding dir, if it
// is tokenbed's; dirty when `git status --porcelain` lists any change to
// a tracked file (untracked files, such as results/, do not count: they
// do not change what was built).
func FromGit(dir string, git Git) (Revision, bool) {
	top, err := git(dir, "rev-parse", "--show-toplevel")
	if err != nil {
		return Revision{}, false
	}
	top = strings.TrimSpace(top)
	if !isModule(filepath.Join(top, "go.mod")) {
		return Revision{}, false
	}
	id, err := git(top, "rev-parse", "--short=12", "HEAD")
	if err != nil {
		return Revision{}, false
	}
	st, err := git(top, "status", "--porcelain", "--untracked-files=no")
	if err != nil {
		return Revision{}, false
	}
	return Revision{ID: strings.TrimSpace(id), Dirty: strings.TrimSpace(st) != "", Source: "git"}, true
}

// isModule reports whether the go.mod at path declares Module.
func isModule(path string) bool {
	b, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && f[0] == "module" {
			return strings.Trim(f[1], `"`) == Module
		}
	}
	return false
}
