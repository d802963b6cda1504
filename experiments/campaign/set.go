package campaign

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/goccy/go-yaml"

	"tokenbed/internal/strictyaml"
)

// Set is one command-line override, JOB:PATH=VALUE (harness campaign run
// and submit's --set): PATH as in Override, VALUE as YAML (a number
// stays a number, a string needs no quotes).
type Set struct {
	Flag  string // as given, for errors
	Job   string
	Path  string
	Value any
}

// ParseSet parses s, JOB:PATH=VALUE; errors name the flag.
func ParseSet(s string) (Set, error) {
	out := Set{Flag: s}
	job, rest, ok := strings.Cut(s, ":")
	path, val, ok2 := strings.Cut(rest, "=")
	if !ok || !ok2 || job == "" || path == "" {
		return out, fmt.Errorf("--set %q: want JOB:PATH=VALUE", s)
	}
	if _, err := parsePath(path); err != nil {
		return out, fmt.Errorf("--set %q: path %q: %v", s, path, err)
	}
	if err := yaml.Unmarshal([]byte(val), &out.Value); err != nil {
		return out, fmt.Errorf("--set %q: value %q: %v", s, val, err)
	}
	out.Job, out.Path = job, path
	return out, nil
}

// ApplySets layers sets on the jobs' overrides (a set of a path the file
// also overrides wins), then checks each changed job's experiment as
// Parse checks the file's overrides. Errors name the flag.
func (c *Campaign) ApplySets(sets []Set, o Options) error {
	for _, s := range sets {
		j := c.job(s.Job)
		switch {
		case j == nil:
			var names []string
			for _, j := range c.Jobs {
				names = append(names, j.Name)
			}
			return fmt.Errorf("--set %q: no job %q in campaign %s (jobs: %s)", s.Flag, s.Job, c.Name, strings.Join(names, ", "))
		case j.Kind() == KindStudy:
			return fmt.Errorf("--set %q: job %s is a study: its experiments are not overridden", s.Flag, s.Job)
		case s.Path == "seed" && len(j.Seeds) > 0:
			return fmt.Errorf("--set %q: job %s runs one run per seed (seeds:): override seed with one or the other", s.Flag, s.Job)
		}
		next := map[string]any{s.Path: s.Value}
		for k, v := range j.Overrides {
			if k != s.Path {
				next[k] = v
			}
		}
		path := j.Experiment
		if !filepath.IsAbs(path) && o.Dir != "" {
			path = filepath.Join(o.Dir, path)
		}
		b, err := strictyaml.ReadFile(path)
		if err != nil {
			return fmt.Errorf("--set %q: %v", s.Flag, err)
		}
		if _, err := Apply(path, b, next); err != nil {
			return fmt.Errorf("--set %q: %v", s.Flag, err)
		}
		j.Overrides = next
	}
	return nil
}

func (c *Campaign) job(name string) *Job {
	for i := range c.Jobs {
		if c.Jobs[i].Name == name {
			return &c.Jobs[i]
		}
	}
	return nil
}
