package campaign

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"tokenbed/experiments"
	_ "tokenbed/protocols/ftn"
	_ "tokenbed/protocols/tokenpassing"
)

// repoRoot is the module root: experiment paths in campaign files are
// relative to where the campaign runs.
const repoRoot = "../.."

var opts = Options{
	Dir:      repoRoot,
	Studies:  func(n string) bool { return n == "wandering" },
	Known:    []string{"wandering"},
	Backends: []string{"netns", "container", "sim"},
}

// Every mistake of the literal file is reported, each at its line.
func TestErrorsAtTheirLines(t *testing.T) {
	_, err := Load("testdata/errors.yaml", opts)
	if err == nil {
		t.Fatal("testdata/errors.yaml parsed")
	}
	msg := err.Error()
	t.Log(msg)
	// The decoder stops at the first unknown field (colour) or bad
	// duration: the file is fixed and read again below for the rest.
	if !strings.Contains(msg, "testdata/errors.yaml:3") && !strings.Contains(msg, "testdata/errors.yaml:35") && !strings.Contains(msg, "testdata/errors.yaml:36") {
		t.Errorf("no file:line in %q", msg)
	}
	b, _ := os.ReadFile("testdata/errors.yaml")
	fixed := strings.Replace(strings.Replace(string(b), "    colour: blue\n", "", 1), "estimate: ten minutes", "estimate: 10m", 1)
	_, err = Parse("errors.yaml", []byte(fixed), opts)
	if err == nil {
		t.Fatal("fixed file still has its other mistakes, and parsed")
	}
	msg = err.Error()
	t.Log(msg)
	for _, want := range []string{
		`errors.yaml:3:`, `"Bad Name"`,
		`errors.yaml:8:`, "not both",
		`errors.yaml:10:`, `unknown study "tables"`,
		`errors.yaml:12:`, "no-such.yaml",
		`errors.yaml:17:`, "links[7]: the list has 3 elements",
		`errors.yaml:22:`, "after the overrides is invalid",
		`errors.yaml:25:`, "give backend: sim",
		`errors.yaml:29:`, "seed 1 twice",
		`errors.yaml:30:`, `"dupseed" is also job 7's name`,
		`errors.yaml:32:`, `unknown backend "qemu"`,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("missing %q in\n%s", want, msg)
		}
	}
}

// The shipped campaigns parse.
func TestShippedCampaignsParse(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(repoRoot, "experiments", "*.campaign.yaml"))
	files = append(files, filepath.Join(repoRoot, "experiments", "nightly.yaml"))
	for _, f := range files {
		c, err := Load(f, Options{Dir: repoRoot, Backends: opts.Backends})
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if len(c.Jobs) == 0 {
			t.Errorf("%s: no jobs", f)
		}
	}
}

// An override replaces a field by path, adds a missing last key, and
// refuses a path that does not exist; the experiment after it is what
// Apply parses.
func TestOverride(t *testing.T) {
	path := filepath.Join(repoRoot, "experiments", "three-agents.yaml")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	e, err := Apply(path, b, map[string]any{"links[0].profile": "delay 6ms", "seed": uint64(11), "description": "x"})
	if err != nil {
		t.Fatal(err)
	}
	if e.Seed != 11 || e.Description != "x" {
		t.Errorf("seed %d description %q", e.Seed, e.Description)
	}
	d, ok := e.Direction("A", "B")
	if !ok || !strings.Contains(d.Profile.String(), "6ms") {
		t.Errorf("A>B profile %v, want delay 6ms", d.Profile)
	}
	orig, _ := experiments.Parse(path, b)
	if o, _ := orig.Direction("A", "C"); !slices.Equal([]string{o.Profile.String()}, []string{mustDir(t, e, "A", "C")}) {
		t.Errorf("A>C changed: %v", o.Profile)
	}
	for path, want := range map[string]string{
		"links[9].profile": "the list has 3 elements",
		"nosuch.field":     "nosuch: no such field",
		"links.profile":    "a list: select an element",
		"seed.x":           "is a value",
		"links[x]":         "want [INDEX]",
	} {
		if _, err := Override(b, map[string]any{path: 1}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("override %s: %v, want %q", path, err, want)
		}
	}
}

func mustDir(t *testing.T, e *experiments.Experiment, from, to string) string {
	d, ok := e.Direction(from, to)
	if !ok {
		t.Fatalf("no direction %s>%s", from, to)
	}
	return d.Profile.String()
}

// The shipped night fits the 90 minutes by its own estimates.
func TestNightlyEstimate(t *testing.T) {
	c, err := Load(filepath.Join(repoRoot, "experiments", "nightly.yaml"), Options{Dir: repoRoot})
	if err != nil {
		t.Fatal(err)
	}
	var sum time.Duration
	for _, j := range c.Jobs {
		if j.Estimate == 0 {
			t.Errorf("job %s has no estimate", j.Name)
		}
		sum += j.Estimate
	}
	if sum > 90*time.Minute {
		t.Errorf("the night's estimates sum to %v, over 90 min", sum)
	}
	t.Logf("the night's estimates sum to %v", sum)
}

// The night's wandering job is make wandering: its args are the
// Makefile's WANDERING_FLAGS, so that scenarios added to the study and
// skipped by make wandering (too long for the short form) are skipped by
// the night too, whose estimate and timeout assume the short form.
func TestNightlyWanderingIsMakeWandering(t *testing.T) {
	c, err := Load(filepath.Join(repoRoot, "experiments", "nightly.yaml"), Options{Dir: repoRoot})
	if err != nil {
		t.Fatal(err)
	}
	mk, err := os.ReadFile(filepath.Join(repoRoot, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^WANDERING_FLAGS \?= (.*)$`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("Makefile: no WANDERING_FLAGS ?= line")
	}
	// The Makefile's shell quoting: single-quoted words, else split on spaces.
	var want []string
	for _, w := range regexp.MustCompile(`'[^']*'|\S+`).FindAllString(string(m[1]), -1) {
		want = append(want, strings.Trim(w, "'"))
	}
	for _, j := range c.Jobs {
		if j.Study == "wandering" {
			if !slices.Equal(j.Args, want) {
				t.Errorf("nightly.yaml job %s: args %q, the Makefile's WANDERING_FLAGS %q", j.Name, j.Args, want)
			}
			return
		}
	}
	t.Error("nightly.yaml has no wandering study")
}
