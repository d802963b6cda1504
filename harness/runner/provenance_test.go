package runner

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"tokenbed/internal/results"
)

// git_revision is the binary's own, or its tokenbed tree's, never the
// repository of the directory the run starts in; a campaign's tags come
// from the environment, and unreadable overrides stop the run.
func TestProvenance(t *testing.T) {
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
	t.Setenv(results.CampaignEnv, "c-1")
	t.Setenv(results.JobEnv, "swarm")
	t.Setenv(results.OverridesEnv, `{"seed":"7"}`)
	var info results.RunInfo
	if err := provenance(&info); err != nil {
		t.Fatal(err)
	}
	if strings.HasPrefix(info.GitRevision, decoy) {
		t.Errorf("git_revision = %q: the revision of the current directory's repository", info.GitRevision)
	}
	if info.Campaign != "c-1" || info.Job != "swarm" || info.Overrides["seed"] != "7" || info.Cores < 1 || info.Host == "" {
		t.Errorf("provenance %+v", info)
	}
	t.Setenv(results.OverridesEnv, `{"seed":`)
	if err := provenance(&info); err == nil || !strings.Contains(err.Error(), results.OverridesEnv) {
		t.Errorf("bad overrides: %v, want an error naming %s", err, results.OverridesEnv)
	}
}
