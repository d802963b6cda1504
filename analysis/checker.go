package analysis

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"tokenbed/agent/eventlog"
	"tokenbed/experiments"
	"tokenbed/harness/protocol"
	"tokenbed/harness/protocol/tokenpassing"
	"tokenbed/harness/results"
)

// Checker is one check, as Jepsen's checker protocol: it takes a history
// and returns a verdict. A checker is a pure function of its Context:
// the history (event logs), the capture's facts, the experiment, and what
// the checkers run before it derived (Context.losses for liveness). A
// protocol brings its own checkers; the framework does not change.
type Checker interface {
	Check(c *Context) Requirement
}

// CheckerFunc adapts a function to Checker.
type CheckerFunc func(c *Context) Requirement

// Check implements Checker.
func (f CheckerFunc) Check(c *Context) Requirement { return f(c) }

// Context is what checkers judge, and where they leave the figures of the
// summary and what later checkers use.
type Context struct {
	input
	s     *Summary
	hs    []hold
	paper map[int]time.Duration
	// Set by the checkers that derive them, for the ones after.
	lat    map[string][]float64
	losses []Loss
}

// What a checker of any protocol reads. Token passing's checkers (below)
// read the derived history of package analysis directly; another
// protocol's checkers, registered from their own package, read the run
// through these accessors and nothing else.

// Info is the run's record (run.json): its protocol, seed, time scales,
// status.
func (c *Context) Info() results.RunInfo { return c.info }

// Topology is the run's placement of processes (topology.json).
func (c *Context) Topology() results.Topology { return c.topo }

// Experiment is the experiment that ran, with the time scales and
// replicas it ran at; nil when the results hold none.
func (c *Context) Experiment() *experiments.Experiment { return c.exp }

// HarnessEvents is the harness's own log: schedule steps, crashes,
// outages, notices.
func (c *Context) HarnessEvents() []eventlog.Event { return c.h.harness }

// Events calls f with every event of every process's log, each log in its
// own order (processes one after another): every kind, with a protocol's
// own fields in Event.Extra. It reads the logs again, so that the history
// need keep nothing for protocols it does not know. An error of f stops
// it and is returned.
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

type registered struct {
	name string
	c    Checker
}

// checkers of each protocol, in the order they run: a checker may use
// what the ones before it derived (liveness the losses).
var checkers = map[string][]registered{}

// RegisterChecker adds a checker of proto's runs under name, run after
// those registered before it. A new protocol brings its own checkers; the
// framework does not change. Registering a name twice panics.
func RegisterChecker(proto, name string, c Checker) {
	if slices.ContainsFunc(checkers[proto], func(r registered) bool { return r.name == name }) {
		panic("analysis: checker " + name + " of " + proto + " registered twice")
	}
	checkers[proto] = append(checkers[proto], registered{name, c})
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
	proto := c.info.Protocol
	if proto == "" {
		proto = protocol.Default
	}
	regs := checkers[proto]
	if len(regs) == 0 {
		return Composite{}, fmt.Errorf("protocol %q: no checkers registered", proto)
	}
	want := map[string]bool{}
	for _, n := range names {
		if !slices.ContainsFunc(regs, func(r registered) bool { return r.name == n }) {
			var known []string
			for _, r := range regs {
				known = append(known, r.name)
			}
			return Composite{}, fmt.Errorf("checker %q of %s: want one of %s", n, proto, strings.Join(known, ", "))
		}
		want[n] = true
	}
	out := Composite{Results: map[string]Requirement{}}
	for _, r := range regs {
		if len(want) > 0 && !want[r.name] {
			continue
		}
		out.Names = append(out.Names, r.name)
		out.Results[r.name] = r.c.Check(c)
	}
	return out, nil
}

// The checks of token passing: requirements (i)–(iv) of 002 §2, liveness
// and agents. Duplication runs first, as it always has: the loss checker
// reads the holds it does not change.
func init() {
	RegisterChecker(tokenpassing.Name, "duplication", CheckerFunc(func(c *Context) Requirement {
		c.s.Duplications = duplication(c.hs)
		return checkDuplication(c.hs, c.s.Duplications, c.b)
	}))
	RegisterChecker(tokenpassing.Name, "loss", CheckerFunc(func(c *Context) Requirement {
		var r Requirement
		r, c.losses = checkLoss(c.s, c.h, c.hs, c.cf, c.exp, c.paper, c.b)
		return r
	}))
	RegisterChecker(tokenpassing.Name, "latency", CheckerFunc(func(c *Context) Requirement {
		c.lat = latencies(c.s, c.h)
		return checkLatency(c.s, c.topo, c.exp, c.lat, c.b)
	}))
	RegisterChecker(tokenpassing.Name, "validation", CheckerFunc(func(c *Context) Requirement { return checkValidation(c.s, c.h, c.cf, c.b) }))
	RegisterChecker(tokenpassing.Name, "liveness", CheckerFunc(func(c *Context) Requirement {
		return checkLiveness(c.s, c.h, c.exp, c.losses, c.paper, c.b)
	}))
	RegisterChecker(tokenpassing.Name, "agents", CheckerFunc(func(c *Context) Requirement { return checkAgents(c.h, c.exp) }))
}
