// Package campaign is the campaign file's format: a night's (or any
// batch's) jobs, in order. Each job is an experiment (a file, a backend,
// replicas, seeds or a swarm, and overrides of the experiment's fields)
// or a study (a registered reproduction, such as the Wandering Token
// tables). Parse decodes strictly (internal/strictyaml): an unknown
// field, a bad value, a missing experiment file or an override that
// leaves an invalid experiment is an error at its file and line.
//
// The format is in docs/reference/campaign-file.md. What runs a
// campaign is harness/campaign; nothing here starts a process.
package campaign

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"tokenbed/experiments"
	"tokenbed/internal/strictyaml"
)

// File is the campaign file as written.
type File struct {
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
	Jobs        []Job  `yaml:"jobs"`
}

// Job is one job as written: exactly one of Experiment and Study.
type Job struct {
	Name string `yaml:"name"`
	// Experiment is an experiment file, relative to the directory the
	// campaign runs in (as harness run's argument is).
	Experiment string `yaml:"experiment"`
	Backend    string `yaml:"backend"`  // harness run --backend; default netns
	Replicas   int    `yaml:"replicas"` // harness run --replicas; 0: the experiment's (1 on sim)
	// Seeds runs the experiment once per seed (the seed field
	// overridden); none: once, with the experiment's seed.
	Seeds []uint64 `yaml:"seeds"`
	// Swarm runs harness swarm over this many seeds instead (the
	// experiment needs a swarm section); sim only.
	Swarm    int           `yaml:"swarm"`
	Duration time.Duration `yaml:"duration"` // harness run --duration; 0: the experiment's
	// Overrides set experiment fields by path (Override), validated by
	// parsing the experiment after them.
	Overrides map[string]any `yaml:"overrides"`

	// Study is a registered study's name; Args are its arguments.
	Study string   `yaml:"study"`
	Args  []string `yaml:"args"`

	// Estimate is the job's expected wall time on the project's 2-core
	// machine (docs/reference/campaign-file.md states where each comes
	// from); progress is shown against it.
	Estimate time.Duration `yaml:"estimate"`
	// Timeout stops the job (SIGINT, then SIGKILL) after this long; 0:
	// four times the estimate, or none without one.
	Timeout time.Duration `yaml:"timeout"`
	// Root marks a job that needs root (network namespaces, containers):
	// it is reported as error, not run, without it.
	Root bool `yaml:"root"`
}

// Kinds of job.
const (
	KindExperiment = "experiment"
	KindStudy      = "study"
)

// Kind is the job's kind.
func (j *Job) Kind() string {
	if j.Study != "" {
		return KindStudy
	}
	return KindExperiment
}

// Options are what Parse checks the file against.
type Options struct {
	// Dir resolves relative experiment paths (default: the current
	// directory).
	Dir string
	// Studies reports whether a study name is registered, and Known lists
	// them for the error.
	Studies func(name string) bool
	Known   []string
	// Backends are the backend names a job may give.
	Backends []string
}

// Campaign is a parsed campaign file.
type Campaign struct {
	Name, Description string
	Jobs              []Job
	// Raw is the file as read.
	Raw []byte
}

var jobName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

// Load reads and parses the campaign file at path.
func Load(path string, o Options) (*Campaign, error) {
	b, err := strictyaml.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, b, o)
}

// Parse decodes data (named name in errors) and checks every job.
func Parse(name string, data []byte, o Options) (*Campaign, error) {
	var f File
	yf, err := strictyaml.Decode(name, data, &f)
	if err != nil {
		return nil, err
	}
	if f.Name == "" {
		yf.Errorf("$.name", "missing: the campaign's name")
	}
	if len(f.Jobs) == 0 {
		yf.Errorf("$.jobs", "no jobs")
	}
	seen := map[string]int{}
	for i := range f.Jobs {
		checkJob(yf, fmt.Sprintf("$.jobs[%d]", i), &f.Jobs[i], o)
		if prev, dup := seen[f.Jobs[i].Name]; dup && f.Jobs[i].Name != "" {
			yf.Errorf(fmt.Sprintf("$.jobs[%d].name", i), "%q is also job %d's name: a job's name tags its runs", f.Jobs[i].Name, prev)
		}
		seen[f.Jobs[i].Name] = i
	}
	if err := yf.Err(); err != nil {
		return nil, err
	}
	return &Campaign{Name: f.Name, Description: f.Description, Jobs: f.Jobs, Raw: data}, nil
}

func checkJob(yf *strictyaml.File, p string, j *Job, o Options) {
	if !jobName.MatchString(j.Name) {
		yf.Errorf(p+".name", "%q: want a name of lower-case letters, digits, '.', '_' and '-' (it tags runs and names files)", j.Name)
	}
	if j.Estimate < 0 || j.Timeout < 0 || j.Duration < 0 {
		yf.Errorf(p, "estimate, timeout and duration must not be negative")
	}
	if j.Timeout == 0 {
		j.Timeout = 4 * j.Estimate
	}
	switch {
	case j.Study != "" && j.Experiment != "":
		yf.Errorf(p+".study", "a job is an experiment or a study, not both")
		return
	case j.Study != "":
		if o.Studies != nil && !o.Studies(j.Study) {
			yf.Errorf(p+".study", "unknown study %q (known: %s)", j.Study, strings.Join(o.Known, ", "))
		}
		for _, f := range []struct {
			set  bool
			name string
		}{{j.Backend != "", "backend"}, {j.Replicas != 0, "replicas"}, {len(j.Seeds) > 0, "seeds"}, {j.Swarm != 0, "swarm"},
			{j.Duration != 0, "duration"}, {len(j.Overrides) > 0, "overrides"}} {
			if f.set {
				yf.Errorf(p+"."+f.name, "a study's job takes args, not %s", f.name)
			}
		}
		return
	case j.Experiment == "":
		yf.Errorf(p, "want experiment (a file) or study (a name)")
		return
	}
	if len(j.Args) > 0 {
		yf.Errorf(p+".args", "an experiment's job takes no args (its fields are backend, replicas, seeds, swarm, duration, overrides)")
	}
	if j.Backend == "" {
		j.Backend = "netns"
	}
	if len(o.Backends) > 0 && !slices.Contains(o.Backends, j.Backend) {
		yf.Errorf(p+".backend", "unknown backend %q (known: %s)", j.Backend, strings.Join(o.Backends, ", "))
	}
	if j.Replicas < 0 || j.Swarm < 0 {
		yf.Errorf(p, "replicas and swarm must not be negative")
	}
	if j.Swarm > 0 {
		if j.Backend != "sim" {
			yf.Errorf(p+".swarm", "a swarm runs in the simulator: give backend: sim")
		}
		if len(j.Seeds) > 0 || j.Replicas > 0 {
			yf.Errorf(p+".swarm", "a swarm draws its own seeds and runs one replica: no seeds or replicas")
		}
	}
	if _, ok := j.Overrides["seed"]; ok && len(j.Seeds) > 0 {
		yf.Errorf(p+".overrides.seed", "seeds and an override of seed: give one")
	}
	for i, s := range j.Seeds {
		if slices.Index(j.Seeds, s) != i {
			yf.Errorf(fmt.Sprintf("%s.seeds[%d]", p, i), "seed %d twice", s)
		}
	}
	path := j.Experiment
	if !filepath.IsAbs(path) && o.Dir != "" {
		path = filepath.Join(o.Dir, path)
	}
	b, err := strictyaml.ReadFile(path)
	if err != nil {
		yf.Errorf(p+".experiment", "%v", err)
		return
	}
	e, err := Apply(path, b, j.Overrides)
	if err != nil {
		yf.Errorf(p+".overrides", "%v", err)
		return
	}
	if j.Swarm > 0 && e.Swarm == nil {
		yf.Errorf(p+".swarm", "%s has no swarm section: the fault mix to draw from", j.Experiment)
	}
}

// Apply applies overrides to the experiment file data (named name) and
// parses the result: the experiment that runs.
func Apply(name string, data []byte, overrides map[string]any) (*experiments.Experiment, error) {
	out, err := Override(data, overrides)
	if err != nil {
		return nil, err
	}
	if len(overrides) > 0 {
		// Lines are the rewritten document's, not the file's.
		name += " (after the campaign's overrides)"
	}
	e, err := experiments.Parse(name, out)
	if err != nil && len(overrides) > 0 {
		return nil, fmt.Errorf("the experiment after the overrides is invalid:\n%v", err)
	}
	return e, err
}
