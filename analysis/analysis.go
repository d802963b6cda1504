// Package analysis is the frame that turns a run's results directory
// (internal/results) into verdicts and a report, for any protocol: it reads
// the run (run.json, topology.json, the experiment, the harness's log,
// every process's events: Context), runs the checkers registered for the
// run's protocol (Register's Plugin.Checkers, Compose) and writes
// report.md, summary.json and junit.xml around what the protocol's own
// analysis (Plugin.Analysis: its history, its figures, its report
// sections and plots) contributes. Token passing's is package
// analysis/tokenpassing; FTN's is analysis/ftn.
// Analyze can run again on any results directory, including one whose
// run was killed.
//
// # summary.json
//
// A Summary (schema_version 2): the run's identity (run_id, experiment,
// seed, git_revision, kernel, backend, impairment, time scales, replicas,
// status, partial), a requirements object with one Requirement per check
// (verdict, pass, value, detail, bundle), check_names (report order), the
// protocol's own figures flat beside them (Summary.Figures) and notes.
package analysis

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"tokenbed/agent/eventlog"
	"tokenbed/experiments"
	"tokenbed/internal/results"
	"tokenbed/protocols"
)

// SchemaVersion of summary.json. 2: a requirement has a verdict, which
// may be "not judged"; checks liveness and agents.
const SchemaVersion = 2

// Verdict of one check.
type Verdict string

// Verdicts. A check with nothing to judge says so: it never passes
// vacuously.
const (
	VerdictPass      Verdict = "pass"
	VerdictFail      Verdict = "fail"
	VerdictNotJudged Verdict = "not judged"
)

// Checks names token passing's checks in report order.
//
// Deprecated: a run's checks are its protocol's: use Summary.Order. Kept
// for callers written before protocols plugged in.
var Checks = []string{"loss", "duplication", "latency", "validation", "liveness", "agents"}

// Requirement is one check's verdict.
type Requirement struct {
	Verdict Verdict `json:"verdict"`
	Pass    bool    `json:"pass"` // Verdict is pass
	Value   string  `json:"value"`
	// Detail says exactly what was checked, or why nothing was.
	Detail string `json:"detail"`
	// Bundle is the failure bundle's directory, relative to the results.
	Bundle string `json:"bundle,omitempty"`
}

// VerdictOf is a pass or a fail, to be given its value and detail.
func VerdictOf(pass bool) Requirement {
	if pass {
		return Requirement{Verdict: VerdictPass, Pass: true}
	}
	return Requirement{Verdict: VerdictFail}
}

// Unjudged is the verdict of a check with nothing to judge, saying why.
func Unjudged(detail string) Requirement {
	return Requirement{Verdict: VerdictNotJudged, Value: "not judged", Detail: "not judged: " + detail}
}

// Summary is summary.json: the frame's envelope, and the protocol's
// figures (Figures) written flat beside it.
type Summary struct {
	SchemaVersion    int                    `json:"schema_version"`
	RunID            string                 `json:"run_id"`
	Experiment       string                 `json:"experiment"`
	Seed             uint64                 `json:"seed"`
	GitRevision      string                 `json:"git_revision"`
	Kernel           string                 `json:"kernel"`
	Backend          string                 `json:"backend"`
	Impairment       string                 `json:"impairment"`
	TimeScale        float64                `json:"time_scale"`
	NetworkTimeScale float64                `json:"network_time_scale"`
	Replicas         int                    `json:"replicas"`
	Status           string                 `json:"status"`
	Partial          bool                   `json:"partial"`
	PaperSeconds     float64                `json:"paper_seconds"`
	WallSeconds      float64                `json:"wall_seconds"`
	Requirements     map[string]Requirement `json:"requirements"`
	// HostCPU is what the host's CPUs did while the agents ran (run.json);
	// a latency figure is only as good as the host's scheduling.
	HostCPU *results.HostCPU `json:"host_cpu,omitempty"`
	// Engine is the userspace engine's account of its timing (run.json).
	Engine *results.EngineFidelity `json:"engine,omitempty"`
	// CheckNames are the run's checks in report order (its protocol's).
	CheckNames []string `json:"check_names,omitempty"`
	// Figures is the protocol's part (Part.Figures; token passing's:
	// tokenpassing.Figures), written flat beside the fields above: a JSON
	// object's fields, whose names must not be the envelope's.
	Figures any      `json:"-"`
	Notes   []string `json:"notes"`
}

// envelope is Summary's fields as written, without its methods.
type envelope Summary

// MarshalJSON writes the envelope's fields, the protocol's figures and
// the notes, in that order, as one object.
func (s *Summary) MarshalJSON() ([]byte, error) {
	env := *s
	env.Notes = nil
	head, err := json.Marshal((*envelope)(&env))
	if err != nil {
		return nil, err
	}
	head = bytes.TrimSuffix(bytes.TrimSuffix(head, []byte("}")), []byte(`,"notes":null`))
	var b bytes.Buffer
	b.Write(head)
	if s.Figures != nil {
		fig, err := json.Marshal(s.Figures)
		if err != nil {
			return nil, fmt.Errorf("figures: %w", err)
		}
		if len(fig) < 2 || fig[0] != '{' {
			return nil, fmt.Errorf("figures: %T is not written as a JSON object", s.Figures)
		}
		if inner := bytes.TrimSpace(fig[1 : len(fig)-1]); len(inner) > 0 {
			b.WriteByte(',')
			b.Write(inner)
		}
	}
	notes, err := json.Marshal(s.Notes)
	if err != nil {
		return nil, err
	}
	b.WriteString(`,"notes":`)
	b.Write(notes)
	b.WriteByte('}')
	return b.Bytes(), nil
}

// Failed lists the checks that failed (not those not judged).
func (s *Summary) Failed() []string { return s.with(VerdictFail) }

// NotJudged lists the checks that had nothing to judge.
func (s *Summary) NotJudged() []string { return s.with(VerdictNotJudged) }

// Order lists the run's checks in report order.
func (s *Summary) Order() []string {
	if len(s.CheckNames) > 0 {
		return s.CheckNames
	}
	return Checks // a summary written before check_names
}

func (s *Summary) with(v Verdict) []string {
	var f []string
	for _, k := range s.Order() {
		if r, ok := s.Requirements[k]; ok && r.Verdict == v {
			f = append(f, k)
		}
	}
	return f
}

// Analyze judges the run in dir with its protocol's checkers (run.json's
// protocol, default token passing) and writes report.md, summary.json,
// junit.xml and what the protocol's analysis adds (plots, failure
// bundles). The protocol's analysis package must be linked in (a blank
// import), or nothing is judged and that is an error.
func Analyze(dir string) (*Summary, error) {
	info, topo, err := readRun(dir)
	if err != nil {
		return nil, err
	}
	var exp *experiments.Experiment
	if b, err := os.ReadFile(filepath.Join(dir, results.ExperimentFile)); err == nil {
		if exp, err = experiments.Parse(filepath.Join(dir, results.ExperimentFile), b); err != nil {
			return nil, err
		}
	}
	if exp != nil {
		// What ran, not what the file says: harness run --time-scale and
		// --replicas override the file, and the simulator runs every
		// experiment at paper speed in one replica.
		if info.TimeScale > 0 {
			exp.TimeScale = info.TimeScale
		}
		if info.NetScale > 0 {
			exp.NetworkTimeScale = info.NetScale
		}
		if info.Replicas > 0 {
			exp.Replicas = info.Replicas
		}
	}
	harness, damage, err := readHarnessLog(dir)
	if err != nil {
		return nil, err
	}
	c := NewContext(info, topo, exp, harness, func(f func(eventlog.Event) error) error { return eachLogEvent(dir, topo, f) })
	c.dir = dir
	proto := c.protocol()
	if damage != nil {
		// Only an analysis that says what it could not judge without the
		// rest of the schedule's record gets a report; for any other the
		// damage stays an error, as a report judged on half a schedule
		// could pass.
		if _, ok := plugin(proto).Analysis.(DamageAware); !ok {
			return nil, damage
		}
		c.harnessDamage = damage
		c.Note("%s: the harness's log is damaged (%v): read up to line %d; the checks that need the schedule's record say what they could not judge", damage.File, damage.Err, damage.Line-1)
	}
	if a := plugin(proto).Analysis; a != nil {
		if c.part, err = a.Load(c); err != nil {
			return nil, err
		}
	} else if len(plugin(proto).Checkers) == 0 {
		return nil, fmt.Errorf("%s: protocol %q: no analysis registered (link its plug-in, plugins/NAME, in by the binary's aggregator file, as harness/plugins.go does)", results.RunFile, proto)
	}
	s := c.Judge()
	return s, writeOutputs(c)
}

// protocol is the run's protocol's name.
func (c *Context) protocol() string {
	if c.info.Protocol == "" {
		return protocols.Default
	}
	return c.info.Protocol
}

// Judge runs every checker of the run's protocol on c and completes its
// summary: the envelope from run.json, the verdicts, the check order and
// the protocol's figures (Part.Finish).
func (c *Context) Judge() *Summary {
	info, s := c.info, c.s
	s.SchemaVersion, s.RunID, s.Experiment, s.Seed, s.GitRevision = SchemaVersion, info.RunID, info.Experiment, info.Seed, info.GitRevision
	s.Kernel, s.Backend, s.Impairment, s.TimeScale, s.NetworkTimeScale = info.Kernel, info.Backend, info.Impairment, info.TimeScale, info.NetScale
	s.Replicas, s.Status, s.Partial = info.Replicas, info.Status, info.Status != "ok"
	s.HostCPU, s.Engine = info.HostCPU, info.Engine
	if s.NetworkTimeScale == 0 {
		s.NetworkTimeScale = 1
	}
	if !info.Finished.IsZero() {
		s.WallSeconds = info.Finished.Sub(info.Started).Seconds()
	}
	fr := c.frame()
	if c.part != nil {
		s.Figures = c.part.Figures()
		c.part.Begin(c)
	}
	if s.Partial {
		s.Notes = append(s.Notes, fmt.Sprintf("the run did not finish (status %q): figures cover what was recorded", info.Status))
	}
	all, err := Compose(c)
	if err != nil {
		s.Notes = append(s.Notes, "checks: "+err.Error())
	} else {
		s.Requirements = all.Results
		s.CheckNames = all.Names
		if len(fr.Order) > 0 {
			s.CheckNames = fr.Order
		}
	}
	if c.part != nil {
		c.part.Finish(c)
	}
	s.PaperSeconds = info.PaperSeconds
	unseen(s, info)
	return s
}

// unseen withholds every pass from a run merged without some of its
// shards (harness merge): no check saw their replicas, so a check that
// passed on the others is not judged, naming them; a failure seen in the
// others stands.
func unseen(s *Summary, info results.RunInfo) {
	if len(info.MissingReplicas) == 0 {
		return
	}
	why := fmt.Sprintf("shards %s missing: replicas %s not seen", strings.Join(info.MissingShards, ", "), intList(info.MissingReplicas))
	for k, r := range s.Requirements {
		if r.Verdict == VerdictPass {
			u := Unjudged(why + "; on the replicas merged: " + r.Detail)
			u.Value = r.Value
			s.Requirements[k] = u
		}
	}
	s.Notes = append(s.Notes, "merged without "+why+": no check passes on them, and the figures cover the replicas merged")
}

func intList(xs []int) string {
	var b strings.Builder
	for i, x := range xs {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprint(&b, x)
	}
	return b.String()
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// readRun reads what every reading of a run starts from: run.json and
// topology.json.
func readRun(dir string) (results.RunInfo, results.Topology, error) {
	var info results.RunInfo
	var topo results.Topology
	if err := results.ReadJSON(dir, results.RunFile, &info); err != nil {
		return info, topo, fmt.Errorf("%s: %w", results.RunFile, err)
	}
	if err := results.ReadJSON(dir, results.TopologyFile, &topo); err != nil {
		return info, topo, fmt.Errorf("%s: %w", results.TopologyFile, err)
	}
	return info, topo, nil
}
