// Package experiments holds the experiment files of the testbed and their
// format: which agents run, the netem profile of every link direction, a
// schedule of faults, the seed, the time scale and the tolerances of the
// checks. Load decodes a file strictly, reports every error at once with
// its file and line, and resolves it.
//
// Resolution order (as in containerlab): built-in defaults, then the
// file's defaults section, then each agent's and each link's own
// settings. A pair of agents without a links entry gets defaults.profile
// in both directions; a links entry's profile sets both directions, and
// its a_to_b / b_to_a set one direction each.
//
// All times in an experiment file are paper time. time_scale divides the
// application's durations (hold, regeneration, the schedule, the run's
// length); network_time_scale divides the link delays and the passing
// timeouts (1, the default, keeps the network at real scale).
package experiments

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
	"tokenbed/agent/clock"

	"tokenbed/agent/wire"
	"tokenbed/internal/strictyaml"
	"tokenbed/netem"
)

// File is an experiment file as written.
type File struct {
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
	// Protocol names the protocol plug-in the processes run (package
	// protocol); empty means token passing.
	Protocol         string        `yaml:"protocol"`
	Seed             uint64        `yaml:"seed"`
	TimeScale        float64       `yaml:"time_scale"`
	NetworkTimeScale float64       `yaml:"network_time_scale"`
	Duration         time.Duration `yaml:"duration"`
	Replicas         int           `yaml:"replicas"`
	// WarmStart starts every agent with its peers' keys cached, as
	// replicas after the first always do: for runs that stand for the
	// middle of a long operation (cold, 360 agents would pay 129,240
	// first contacts, a Move timeout each).
	WarmStart bool        `yaml:"warm_start"`
	Defaults  Defaults    `yaml:"defaults"`
	Agents    []AgentSpec `yaml:"agents"`
	Links     []LinkSpec  `yaml:"links"`
	Schedule  []StepSpec  `yaml:"schedule"`
	Checks    Checks      `yaml:"checks"`
	Swarm     *FaultMix   `yaml:"swarm"` // faultmix.go
}

// Defaults apply to every agent and link unless they say otherwise.
type Defaults struct {
	Role string `yaml:"role"`
	// Agent is the configuration every agent starts from: the protocol's
	// (for token passing, agent/config's fields and the policies'
	// sections), kept undecoded here.
	Agent   strictyaml.Node `yaml:"agent"`
	Profile string          `yaml:"profile"`
	// Clock is every agent's local clock against the reference (an agent's
	// own clock field overrides it field by field).
	Clock ClockSpec `yaml:"clock"`
}

// ClockSpec is an agent's clock as written: offset (paper time, may be
// negative) and drift (a rate: 1e-4 is 100 ppm fast); unset fields come
// from defaults.clock, then 0 (agent/clock).
type ClockSpec struct {
	Offset *time.Duration `yaml:"offset"`
	Drift  *float64       `yaml:"drift"`
}

// over is c with the fields it leaves unset taken from d.
func (c ClockSpec) over(d ClockSpec) clock.Skew {
	var s clock.Skew
	for _, x := range []ClockSpec{d, c} {
		if x.Offset != nil {
			s.Offset = *x.Offset
		}
		if x.Drift != nil {
			s.Drift = *x.Drift
		}
	}
	return s
}

// AgentSpec is one agent.
type AgentSpec struct {
	Name string `yaml:"name"`
	Role string `yaml:"role"`
	// Generate makes the agent generate a token when it starts.
	Generate bool `yaml:"generate"`
	// Later agents start only when a join step starts them.
	Later bool `yaml:"later"`
	// Config is the agent's own configuration, over defaults.agent; the
	// protocol decodes it.
	Config strictyaml.Node `yaml:"config"`
	// Clock is the agent's local clock, over defaults.clock.
	Clock ClockSpec `yaml:"clock"`
}

// LinkSpec sets the profiles between two agents.
type LinkSpec struct {
	Between []string `yaml:"between"`
	Profile string   `yaml:"profile"`
	AToB    string   `yaml:"a_to_b"`
	BToA    string   `yaml:"b_to_a"`
}

// StepSpec is one scheduled change.
type StepSpec struct {
	At     time.Duration `yaml:"at"`
	Action string        `yaml:"action"`
	// Link: "A>B" for one direction, "A-B" for both.
	Link string `yaml:"link"`
	// Links: pick one at random for each repetition.
	Links []string `yaml:"links"`
	// Groups are a partition's sides: agents, target words or "*" (the
	// agents no group names); every link between two groups is cut.
	Groups  [][]string    `yaml:"groups"`
	Profile string        `yaml:"profile"`
	For     time.Duration `yaml:"for"`
	Agent   string        `yaml:"agent"`
	Via     string        `yaml:"via"`
	// Count > 1 repeats the step at seeded random times in [At, Until).
	Count int           `yaml:"count"`
	Until time.Duration `yaml:"until"`
}

// Checks are the tolerances of the requirement checks (002 §2).
type Checks struct {
	Latency []LatencyCheck `yaml:"latency"`
	Return  *ReturnCheck   `yaml:"return_time"`
	// MaxLosses is how many token losses not caused by a crash of the
	// holder are tolerated: 0 (the default) — requirement (i).
	MaxLosses int `yaml:"max_unexplained_losses"`
}

// LatencyCheck compares one direction's pass latency with the paper.
type LatencyCheck struct {
	Link string        `yaml:"link"` // "A>B"
	Mean time.Duration `yaml:"mean"`
	// P50 is the median: unlike the mean it ignores the few passes that
	// waited for a retry (a cold start's certificate exchange, 002 §3),
	// so it checks that the profiles hold.
	P50 time.Duration `yaml:"p50"`
	P99 time.Duration `yaml:"p99"`
	// Tolerance is relative: |measured/expected - 1| ≤ Tolerance. The
	// default, 0.15, catches a 20% regression.
	Tolerance float64 `yaml:"tolerance"`
}

// ReturnCheck compares the return time with the paper (002 §3.3).
type ReturnCheck struct {
	Agent     string        `yaml:"agent"`
	Mean      time.Duration `yaml:"mean"`
	P99       time.Duration `yaml:"p99"`
	Tolerance float64       `yaml:"tolerance"`
}

// DefaultTolerance of latency and return-time checks.
const DefaultTolerance = 0.15

// Actions of schedule steps.
const (
	ActProfile = "profile" // change a link direction's profile in place
	ActOutage  = "outage"  // 100% loss on a link for a period
	// ActPartition cuts every link between groups of agents at once, both
	// directions, and heals them at once: one outage of each (partition.go).
	ActPartition = "partition"
	ActCrash     = "crash"   // SIGKILL an agent ("holder": whoever holds a token)
	ActRestart   = "restart" // start a crashed or left agent again ("holder": the holder crashed last)
	ActJoin      = "join"    // start a later agent, joining via a member (002 §3.2)
	ActLeave     = "leave"   // stop an agent silently (002 §3.2)
)

// Agent is a resolved agent.
type Agent struct {
	Name     string
	Role     string
	Generate bool
	Later    bool
	// Config is defaults.agent overridden by the agent's config, key by
	// key (strictyaml.Merge), undecoded: the protocol plug-in decodes it,
	// and its errors name the file and line of each value.
	Config strictyaml.Node
	// Clock is the agent's local clock (agent/clock): defaults.clock
	// overridden by the agent's clock, field by field. The protocol
	// writes it into the agent's configuration (clock:).
	Clock clock.Skew
}

// Direction is one direction of a link with its profile.
type Direction struct {
	From, To string
	Profile  netem.Profile
	Text     string // the profile as written, for reports
}

// Key is "FROM>TO".
func (d Direction) Key() string { return d.From + ">" + d.To }

// Step is a resolved schedule step, at paper time At.
type Step struct {
	At      time.Duration
	Action  string
	From    string // link steps: direction From>To; Both for both directions
	To      string
	Both    bool
	Groups  [][]string // partition steps: the groups as written (partition.go)
	Profile *netem.Profile
	For     time.Duration
	Agent   string
	Via     string
	Index   int // position in the file's schedule
}

// Experiment is a resolved, valid experiment.
type Experiment struct {
	Source           string
	Name             string
	Description      string
	Protocol         string // "" for the default (protocol.Default)
	Seed             uint64
	TimeScale        float64
	NetworkTimeScale float64
	Duration         time.Duration // paper time
	Replicas         int
	WarmStart        bool // every agent starts with its peers' keys cached
	Agents           []Agent
	// Targets are the protocol's schedule target words (Schema.Targets):
	// a crash or restart step's agent is one of them or an agent.
	Targets    []string
	Directions []Direction // every ordered pair of agents
	Schedule   []Step      // sorted by time
	Checks     Checks
	Swarm      *FaultMix // harness swarm's faults (faultmix.go); nil: none
	// Raw is the file as loaded: the results keep exactly what ran.
	Raw []byte
}

// Load reads, validates and resolves an experiment file. Every problem is
// reported, each with the file and line.
func Load(path string) (*Experiment, error) {
	b, err := strictyaml.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, b)
}

// Parse is Load for data already read (name is used in errors).
func Parse(name string, data []byte) (*Experiment, error) {
	var f File
	yf, err := strictyaml.Decode(name, data, &f)
	if err != nil {
		return nil, err
	}
	e, err := resolve(name, &f, yf)
	if e != nil {
		e.Raw = data
	}
	return e, err
}

// Direction returns the profile from one agent to another.
func (e *Experiment) Direction(from, to string) (Direction, bool) {
	for _, d := range e.Directions {
		if d.From == from && d.To == to {
			return d, true
		}
	}
	return Direction{}, false
}

// Agent returns the agent named name.
func (e *Experiment) Agent(name string) (Agent, bool) {
	for _, a := range e.Agents {
		if a.Name == name {
			return a, true
		}
	}
	return Agent{}, false
}

// Wall converts paper time to wall time under the time scale.
func (e *Experiment) Wall(paper time.Duration) time.Duration {
	return time.Duration(float64(paper) / e.TimeScale)
}

// ScaleNetwork divides a profile's delays by the network time scale.
func ScaleNetwork(p netem.Profile, k float64) netem.Profile {
	if k == 1 {
		return p
	}
	div := func(d time.Duration) time.Duration { return time.Duration(float64(d) / k) }
	p.Delay, p.Jitter = div(p.Delay), div(p.Jitter)
	return p
}

// Names an experiment reserves. An agent's instance is NAME in replica 0
// and NAME.rN in replica N, its namespace RUNID-INSTANCE beside the
// replicas' RUNID-hubN and the kernel checks' RUNID-netemcheck and
// RUNID-owncheck, and a link step names A>B or A-B. The protocol's
// schedule target words (token passing's "holder") are reserved too.
var (
	reservedName = regexp.MustCompile(`^(hub[0-9]+|netemcheck|owncheck)$`)
	agentName    = regexp.MustCompile(`^[A-Za-z0-9_]+$`)
)

// maxReplicaSuffix is ".r63": the longest suffix a replica adds.
const maxReplicaSuffix = 4

// nameProblem says what is wrong with an agent name, or ""; targets are
// the protocol's schedule target words.
func nameProblem(n string, targets []string) string {
	switch {
	case !agentName.MatchString(n):
		return "want letters, digits and '_' only ('.' would clash with replica instances NAME.rN, '-' with the A-B link form)"
	case len(n)+maxReplicaSuffix > wire.MaxNameLen:
		return fmt.Sprintf("longer than %d characters (a replica's instance adds .rNN)", wire.MaxNameLen-maxReplicaSuffix)
	case reservedName.MatchString(n):
		return "reserved (hubN, netemcheck and owncheck name the harness's own namespaces)"
	case slices.Contains(targets, n):
		return fmt.Sprintf("reserved: the protocol's schedule target word (crash: %s); targets are %s", n, strings.Join(targets, ", "))
	}
	return ""
}
