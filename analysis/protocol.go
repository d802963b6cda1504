package analysis

import (
	"fmt"
	"slices"

	"tokenbed/internal/registry"
)

// Plugin is the analysis half of a protocol plug-in, registered under its
// declaration's name (package protocols) from its package's init: one
// value holds all the protocol brings to the analysis. A new protocol
// brings its own; the framework does not change.
type Plugin struct {
	// Protocol is the protocol's name (protocols.Declaration.Name).
	Protocol string
	// Analysis derives the protocol's part of a run before its checkers
	// run; nil: the frame alone.
	Analysis Analysis
	// Checkers judge the protocol's runs, in the order they run: a
	// checker may use what the ones before it derived (liveness the
	// losses).
	Checkers []NamedChecker
	// Samples reads a run's raw figures (ReadSamples); nil: none.
	Samples SamplesReader
}

// NamedChecker is a checker under its name in the report.
type NamedChecker struct {
	Name    string
	Checker Checker
}

var plugins = registry.New[Plugin]("protocol analysis")

// Register makes a protocol's analysis half known by its name. A plug-in
// with neither an analysis nor a checker would judge nothing, and two
// checkers of one name could not both be reported: both are programming
// errors and panic, as registering a protocol twice does.
func Register(p Plugin) {
	if p.Analysis == nil && len(p.Checkers) == 0 {
		panic(fmt.Sprintf("analysis: protocol %s registers neither an analysis nor a checker", p.Protocol))
	}
	for i, c := range p.Checkers {
		if slices.ContainsFunc(p.Checkers[:i], func(d NamedChecker) bool { return d.Name == c.Name }) {
			panic("analysis: checker " + c.Name + " of " + p.Protocol + " registered twice")
		}
	}
	plugins.Register(p.Protocol, p)
}

// Protocols lists the protocols whose analysis half is linked in, sorted.
func Protocols() []string { return plugins.Names() }

// plugin is proto's analysis half, or the zero Plugin when none is linked
// in.
func plugin(proto string) Plugin {
	p, _ := plugins.Lookup(proto)
	return p
}

// Analysis is a protocol's own analysis, registered by the protocol's
// name beside its checkers (Plugin): what its checkers judge
// beyond the run the frame reads (token passing: its history of holds,
// the capture's facts), its part of summary.json and its sections of
// report.md. A protocol without one gets the frame alone: the checks
// table, the notes, summary.json's envelope and junit.xml.
type Analysis interface {
	// Load derives the protocol's part from the run, before any checker
	// runs: c's accessors, and c.Dir() for files of its own (the
	// capture).
	Load(c *Context) (Part, error)
}

// DamageAware is an Analysis whose checkers judge a run whose harness's
// log is damaged (Context.HarnessLogDamage): those that need the whole
// schedule's record fail or are not judged, naming the file and line.
// Analyze writes the report of such a run; for an analysis that is not
// DamageAware a damaged harness's log stays an error and no report.
type DamageAware interface {
	Analysis
	JudgesDamagedHarnessLog()
}

// Part is a protocol's part of one run's analysis (Context.Part).
type Part interface {
	// Frame is how the report names the run and its checks.
	Frame() Frame
	// Figures is the protocol's part of summary.json: a value written
	// as a JSON object whose fields sit beside the envelope's
	// (Summary.Figures).
	Figures() any
	// Begin adds what precedes the checkers to the summary (its notes on
	// what was read, figures no checker derives).
	Begin(c *Context)
	// Finish completes the figures once every checker ran.
	Finish(c *Context)
	// Sections writes the protocol's sections of report.md, after the
	// checks table and before the notes, drawing its plots under
	// c.Dir(). An error (a plot not drawn) is reported at the end of the
	// report; the sections are kept.
	Sections(c *Context) (string, error)
}

// Frame is how report.md and junit.xml name a protocol's run and checks.
type Frame struct {
	Title string // "Endurance report": the heading, before ": run ID"
	// Checks is what the checks table covers, in its heading's
	// parentheses ("" none).
	Checks string
	// AllPass is what passes when every check does, in the headline
	// ("Every check passes: ALLPASS."; "" none).
	AllPass string
	// Order is the report order of the checks (nil: the order they run).
	Order []string
	// Labels name checks in the table (a check without one: its name).
	Labels map[string]string
	// Suite names the junit suite, before the run ID.
	Suite string
}

// frame is the part's frame, or the frame of a protocol with checkers
// alone.
func (c *Context) frame() Frame {
	if c.part != nil {
		return c.part.Frame()
	}
	return Frame{Title: "Report", Suite: "tokenbed " + c.protocol()}
}
