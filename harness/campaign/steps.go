package campaign

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml"

	"tokenbed/experiments/campaign"
	"tokenbed/internal/registry"
	"tokenbed/internal/results"
	"tokenbed/internal/strictyaml"
)

// Step is one command of a job.
type Step struct {
	Argv []string
	// Judged: exit status 1 (a check failed) fails the job. A study's
	// runs whose verdict is a later step's (sim against real: the
	// comparison) are not judged.
	Judged bool
	// Overrides tag the runs the step makes (results.OverridesEnv).
	Overrides map[string]string
}

// Env is what a job's steps are built from.
type Env struct {
	Harness  string // the harness binary
	Agent    string // the agent binary
	Root     string // the results root
	Campaign string // the campaign ID
	Job      string
	JobDir   string // RESULTS/campaigns/ID/JOB: files the job's commands read (overridden experiments)
}

// Study builds a study's steps from its arguments.
type Study interface {
	Steps(e Env, args []string) ([]Step, error)
	// About says what the study reproduces, for help and docs.
	About() string
}

var studies = registry.New[Study]("study")

// RegisterStudy adds a study under name.
func RegisterStudy(name string, s Study) { studies.Register(name, s) }

// Studies lists the registered studies.
func Studies() []string { return studies.Names() }

// IsStudy reports whether name is a registered study.
func IsStudy(name string) bool { _, err := studies.Lookup(name); return err == nil }

// jobSteps is the commands job j runs.
func jobSteps(e Env, j *campaign.Job) ([]Step, error) {
	if j.Kind() == campaign.KindStudy {
		s, err := studies.Lookup(j.Study)
		if err != nil {
			return nil, err
		}
		return s.Steps(e, j.Args)
	}
	b, err := strictyaml.ReadFile(j.Experiment)
	if err != nil {
		return nil, err
	}
	if j.Swarm > 0 {
		exp, err := writeExperiment(e, "experiment.yaml", b, j.Overrides)
		if err != nil {
			return nil, err
		}
		argv := []string{e.Harness, "swarm", "--seeds", strconv.Itoa(j.Swarm), "--results", e.Root}
		if j.Duration > 0 {
			argv = append(argv, "--duration", j.Duration.String())
		}
		return []Step{{Argv: append(argv, exp), Judged: true, Overrides: tags(j.Overrides)}}, nil
	}
	seeds := []*uint64{nil}
	if len(j.Seeds) > 0 {
		seeds = seeds[:0]
		for i := range j.Seeds {
			seeds = append(seeds, &j.Seeds[i])
		}
	}
	var out []Step
	for _, seed := range seeds {
		over, name := j.Overrides, "experiment.yaml"
		if seed != nil {
			over = map[string]any{"seed": *seed}
			for k, v := range j.Overrides {
				over[k] = v
			}
			name = fmt.Sprintf("experiment-seed%d.yaml", *seed)
		}
		exp, err := writeExperiment(e, name, b, over)
		if err != nil {
			return nil, err
		}
		argv := []string{e.Harness, "run", "--backend", j.Backend, "--results", e.Root}
		if e.Agent != "" && j.Backend != "sim" {
			argv = append(argv, "--agent", e.Agent)
		}
		if j.Replicas > 0 {
			argv = append(argv, "--replicas", strconv.Itoa(j.Replicas))
		}
		if j.Duration > 0 {
			argv = append(argv, "--duration", j.Duration.String())
		}
		out = append(out, Step{Argv: append(argv, exp), Judged: true, Overrides: tags(over)})
	}
	return out, nil
}

// writeExperiment writes the experiment after the overrides into the
// job's directory and returns its path; without overrides it is the file
// as read, so that the run's experiment.yaml keeps its comments.
func writeExperiment(e Env, name string, data []byte, over map[string]any) (string, error) {
	out, err := campaign.Override(data, over)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(e.JobDir, 0o755); err != nil {
		return "", err
	}
	p := filepath.Join(e.JobDir, name)
	return p, os.WriteFile(p, out, 0o644)
}

// WriteOverridden writes experiment file exp after the overrides into
// dir as name and returns its path: what the Slurm engine's shards run.
func WriteOverridden(exp, dir, name string, over map[string]any) (string, error) {
	b, err := strictyaml.ReadFile(exp)
	if err != nil {
		return "", err
	}
	return writeExperiment(Env{JobDir: dir}, name, b, over)
}

// Tags are overrides as run.json records them (results.OverridesEnv).
func Tags(over map[string]any) map[string]string { return tags(over) }

// tags are overrides as run.json records them: each value as YAML text.
func tags(over map[string]any) map[string]string {
	if len(over) == 0 {
		return nil
	}
	out := map[string]string{}
	for k, v := range over {
		b, err := yaml.Marshal(v)
		if err != nil {
			out[k] = fmt.Sprint(v)
			continue
		}
		out[k] = strings.TrimSpace(string(b))
	}
	return out
}

// environ is the step's environment: the harness's, with the campaign's
// tags.
func environ(e Env, s Step) []string {
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return k == results.CampaignEnv || k == results.JobEnv || k == results.OverridesEnv
	})
	env = append(env, results.CampaignEnv+"="+e.Campaign, results.JobEnv+"="+e.Job)
	if len(s.Overrides) > 0 {
		b, _ := json.Marshal(s.Overrides) // map[string]string: cannot fail
		env = append(env, results.OverridesEnv+"="+string(b))
	}
	return env
}
