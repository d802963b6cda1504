package analysis

import (
	"fmt"
	"slices"
	"strings"

	"tokenbed/agent/eventlog"
	"tokenbed/experiments"
	"tokenbed/internal/results"
)

// Checker is one check, as Jepsen's checker protocol: it takes a history
// and returns a verdict. A checker is a pure function of its Context:
// the run, its protocol's part (its history, the capture's facts) and
// what the checkers run before it derived there (token passing: the
// losses, for liveness). A protocol brings its own checkers; the
// framework does not change.
type Checker interface {
	Check(c *Context) Requirement
}

// CheckerFunc adapts a function to Checker.
type CheckerFunc func(c *Context) Requirement

// Check implements Checker.
func (f CheckerFunc) Check(c *Context) Requirement { return f(c) }

// Context is what checkers judge: the run, read by the frame, and the
// part its protocol's analysis derived from it (Part). Checkers leave the
// figures of the summary and what later checkers use in the part.
type Context struct {
	info    results.RunInfo
	topo    results.Topology
	exp     *experiments.Experiment
	harness []eventlog.Event
	// events reads every process's events again, all kinds (Events).
	events func(func(eventlog.Event) error) error
	dir    string // the results directory ("": a literal history)
	s      *Summary
	part   Part
	// harnessDamage is where the harness's log is damaged (nil: whole).
	harnessDamage *eventlog.ParseError
}

// NewContext is a context of a run that is not in a results directory (a
// literal history, in tests): its record, topology, experiment (nil:
// none), the harness's events and a reader of every process's events. A
// protocol's analysis (Plugin.Analysis) is not loaded: the caller sets
// its part with SetPart.
func NewContext(info results.RunInfo, topo results.Topology, exp *experiments.Experiment, harness []eventlog.Event,
	events func(func(eventlog.Event) error) error) *Context {
	return &Context{info: info, topo: topo, exp: exp, harness: harness, events: events,
		s: &Summary{Requirements: map[string]Requirement{}, NetworkTimeScale: 1}}
}

// SetPart sets the part the protocol's checkers read (Part).
func (c *Context) SetPart(p Part) { c.part = p }

// Part is what the run's protocol's analysis derived from the run before
// the checkers ran (its Load), nil for a protocol without one: its
// checkers assert it to their own type.
func (c *Context) Part() Part { return c.part }

// Summary is the summary being written: the envelope (its time scales,
// notes) and, in Figures, the protocol's part.
func (c *Context) Summary() *Summary { return c.s }

// Dir is the results directory, where a protocol's analysis writes its
// plots and failure bundles; "" for a literal history (write nothing).
func (c *Context) Dir() string { return c.dir }

// What a checker of any protocol reads: the run through these accessors,
// and its protocol's part.

// Info is the run's record (run.json): its protocol, seed, time scales,
// status.
func (c *Context) Info() results.RunInfo { return c.info }

// Topology is the run's placement of processes (topology.json).
func (c *Context) Topology() results.Topology { return c.topo }

// Experiment is the experiment that ran, with the time scales and
// replicas it ran at; nil when the results hold none.
func (c *Context) Experiment() *experiments.Experiment { return c.exp }

// HarnessEvents is the harness's own log: schedule steps, crashes,
// outages, notices. When the log is damaged (HarnessLogDamage), the events
// before the damage.
func (c *Context) HarnessEvents() []eventlog.Event { return c.harness }

// HarnessLogDamage is the file and line at which the harness's log is
// damaged (cut mid-line, or a line that is not an event), nil when it is
// whole. Only a DamageAware analysis sees a damaged one.
func (c *Context) HarnessLogDamage() *eventlog.ParseError { return c.harnessDamage }

// Events calls f with every event of every process's log, each log in its
// own order (processes one after another): every kind, with a protocol's
// own fields in Event.Extra. It reads the logs again at each call, so
// that the frame keeps none of them in memory. An error of f stops it and
// is returned.
func (c *Context) Events(f func(eventlog.Event) error) error {
	if c.events == nil {
		return nil
	}
	return c.events(f)
}

// Note adds a line to the summary's notes (report.md, summary.json).
func (c *Context) Note(format string, a ...any) {
	c.s.Notes = append(c.s.Notes, fmt.Sprintf(format, a...))
}

// Composite is the merged verdict of several checkers (Jepsen's compose).
type Composite struct {
	Names   []string // in the order they ran
	Results map[string]Requirement
}

// Verdict merges: fail if any failed; pass only if every one passed;
// otherwise not judged. A check with nothing to judge never passes.
func (c Composite) Verdict() Verdict {
	v := VerdictPass
	for _, n := range c.Names {
		switch c.Results[n].Verdict {
		case VerdictFail:
			return VerdictFail
		case VerdictNotJudged:
			v = VerdictNotJudged
		}
	}
	return v
}

// Compose runs the named checkers of the run's protocol (all of its
// registered ones when names is empty) on c, in registration order, and
// merges their verdicts. An unknown name is an error listing the
// registered ones; so is a protocol without checkers (nothing would be
// judged, and nothing passes vacuously).
func Compose(c *Context, names ...string) (Composite, error) {
	proto := c.protocol()
	regs := plugin(proto).Checkers
	if len(regs) == 0 {
		return Composite{}, fmt.Errorf("protocol %q: no checkers registered", proto)
	}
	want := map[string]bool{}
	for _, n := range names {
		if !slices.ContainsFunc(regs, func(r NamedChecker) bool { return r.Name == n }) {
			var known []string
			for _, r := range regs {
				known = append(known, r.Name)
			}
			return Composite{}, fmt.Errorf("checker %q of %s: want one of %s", n, proto, strings.Join(known, ", "))
		}
		want[n] = true
	}
	out := Composite{Results: map[string]Requirement{}}
	for _, r := range regs {
		if len(want) > 0 && !want[r.Name] {
			continue
		}
		out.Names = append(out.Names, r.Name)
		out.Results[r.Name] = r.Checker.Check(c)
	}
	return out, nil
}
