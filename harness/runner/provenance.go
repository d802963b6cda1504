package runner

import (
	"runtime/debug"

	"golang.org/x/sys/unix"
)

// gitRevision is the revision the running binary was built from, as the
// Go toolchain stamped it: not whatever repository the run happens to be
// started in.
// GitRevision is the harness's revision as run.json records it.
func GitRevision() string { return gitRevision() }

func gitRevision() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	return revisionOf(info)
}

func revisionOf(info *debug.BuildInfo) string {
	rev, dirty := "", false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "unknown"
	}
	rev = rev[:min(len(rev), 12)]
	if dirty {
		rev += "-dirty"
	}
	return rev
}

func kernelRelease() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "unknown"
	}
	return unix.ByteSliceToString(u.Release[:]) + " " + unix.ByteSliceToString(u.Version[:])
}
