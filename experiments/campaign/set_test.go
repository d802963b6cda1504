package campaign

import (
	"path/filepath"
	"strings"
	"testing"
)

// --set JOB:PATH=VALUE layers on the file's overrides, its value read as
// YAML; a bad job, path or value is refused naming the flag.
func TestSets(t *testing.T) {
	c, err := Load(filepath.Join(repoRoot, "experiments", "nightly.yaml"), Options{Dir: repoRoot, Backends: opts.Backends})
	if err != nil {
		t.Fatal(err)
	}
	var sets []Set
	for _, f := range []string{"endurance-netns:defaults.profile=delay 3ms 150us distribution normal", "endurance-netns:seed=7"} {
		s, err := ParseSet(f)
		if err != nil {
			t.Fatal(err)
		}
		sets = append(sets, s)
	}
	if err := c.ApplySets(sets, Options{Dir: repoRoot}); err != nil {
		t.Fatal(err)
	}
	j := c.job("endurance-netns")
	if j.Overrides["defaults.profile"] != "delay 3ms 150us distribution normal" || j.Overrides["seed"] != uint64(7) {
		t.Errorf("overrides %#v", j.Overrides)
	}
	for flag, want := range map[string]string{
		"nosuch:seed=1":                     `--set "nosuch:seed=1": no job "nosuch" in campaign nightly (jobs: endurance-sim,`,
		"endurance-netns:nosuch.field=1":    `--set "endurance-netns:nosuch.field=1": override "nosuch.field": nosuch: no such field`,
		"endurance-netns:links[x]=1":        `--set "endurance-netns:links[x]=1": path "links[x]": want [INDEX] after "links"`,
		"endurance-netns:replicas=many":     `--set "endurance-netns:replicas=many": the experiment after the overrides is invalid`,
		"wandering:seed=1":                  `--set "wandering:seed=1": job wandering is a study`,
		"ftn-seeds:seed=1":                  `--set "ftn-seeds:seed=1": job ftn-seeds runs one run per seed`,
		"endurance-netns=defaults.profile=": `--set "endurance-netns=defaults.profile=": want JOB:PATH=VALUE`,
	} {
		s, err := ParseSet(flag)
		if err == nil {
			err = c.ApplySets([]Set{s}, Options{Dir: repoRoot})
		}
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("--set %s: %v\nwant %s...", flag, err, want)
		}
	}
}
