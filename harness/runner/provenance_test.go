package runner

import (
	"os"
	"os/exec"
	"runtime/debug"
	"strings"
	"testing"
)

// git_revision is the binary's own, from its build
// information, not the repository of the directory the run starts in.
func TestGitRevisionIsTheBinarys(t *testing.T) {
	info := &debug.BuildInfo{Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.modified", Value: "true"}}}
	if got := revisionOf(info); got != "0123456789ab-dirty" {
		t.Errorf("revisionOf = %q, want 0123456789ab-dirty", got)
	}
	if got := revisionOf(&debug.BuildInfo{}); got != "unknown" {
		t.Errorf("no vcs stamp: %q, want unknown", got)
	}
	// Started inside some other repository, the run must not report its
	// revision.
	repo := t.TempDir()
	git := func(args ...string) string {
		cmd := exec.Command("git", append([]string{"-c", "user.email=t@t", "-c", "user.name=t"}, args...)...)
		cmd.Dir = repo
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Skipf("git %v: %v %s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "-q")
	git("commit", "-q", "--allow-empty", "-m", "decoy")
	decoy := git("rev-parse", "--short=12", "HEAD")
	wd, _ := os.Getwd()
	os.Chdir(repo)
	defer os.Chdir(wd)
	if got := gitRevision(); strings.HasPrefix(got, decoy) {
		t.Errorf("gitRevision = %q: the revision of the current directory's repository", got)
	}
}
