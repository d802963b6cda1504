package revision

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

func TestFromBuild(t *testing.T) {
	info := &debug.BuildInfo{Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.modified", Value: "true"}}}
	r := Find(info, nil, nil)
	if r.String() != "0123456789ab-dirty" || r.Source != "build" {
		t.Errorf("stamped build: %+v (%s), want 0123456789ab-dirty from build", r, r)
	}
	if r := Find(&debug.BuildInfo{}, nil, nil); r != Unknown {
		t.Errorf("no stamp, no directory: %+v, want unknown", r)
	}
}

// repo makes a git repository whose go.mod declares module, with one
// commit, and returns its directory and a git runner for it.
func repo(t *testing.T, module string) (string, func(...string) string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git on PATH: the run-time fallback cannot be exercised")
	}
	dir := t.TempDir()
	git := func(args ...string) string {
		cmd := exec.Command("git", append([]string{"-c", "user.email=t@t", "-c", "user.name=t"}, args...)...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "-q")
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module "+module+"\n\ngo 1.26\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git("add", "go.mod")
	git("commit", "-q", "-m", "one")
	return dir, git
}

// Without a stamp, git names the revision of a tokenbed tree, dirty once
// a tracked file changes and not for an untracked one; another module's
// repository is never asked.
func TestFromGit(t *testing.T) {
	dir, git := repo(t, Module)
	head := git("rev-parse", "--short=12", "HEAD")
	sub := filepath.Join(dir, "bin")
	os.Mkdir(sub, 0o755)
	r := Find(&debug.BuildInfo{}, []string{sub}, gitCmd)
	if r.ID != head || r.Dirty || r.Source != "git" {
		t.Fatalf("clean tree: %+v, want %s clean from git", r, head)
	}
	os.WriteFile(filepath.Join(dir, "results.txt"), []byte("x"), 0o644)
	if r := Find(&debug.BuildInfo{}, []string{sub}, gitCmd); r.Dirty {
		t.Fatalf("an untracked file made it dirty: %+v", r)
	}
	os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module tokenbed\n\ngo 1.27\n"), 0o644)
	if r := Find(&debug.BuildInfo{}, []string{sub}, gitCmd); r.String() != head+"-dirty" {
		t.Fatalf("changed tracked file: %s, want %s-dirty", r, head)
	}

	decoy, _ := repo(t, "example.com/other")
	if r := Find(&debug.BuildInfo{}, []string{decoy}, gitCmd); r != Unknown {
		t.Fatalf("another module's repository named the revision: %+v", r)
	}
	// The first tokenbed directory wins: the binary's before the working
	// directory's.
	if r := Find(&debug.BuildInfo{}, []string{decoy, sub}, gitCmd); r.ID != head {
		t.Fatalf("decoy then tokenbed: %+v, want %s", r, head)
	}
}
