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
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"time"

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
	// middle of a long operation (issue 16: 360 agents would pay 129,240
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

func resolve(name string, f *File, yf *strictyaml.File) (*Experiment, error) {
	e := &Experiment{Source: name, Name: f.Name, Description: f.Description, Protocol: f.Protocol, Seed: f.Seed,
		TimeScale: f.TimeScale, NetworkTimeScale: f.NetworkTimeScale, Duration: f.Duration, Replicas: f.Replicas, WarmStart: f.WarmStart, Checks: f.Checks, Swarm: f.Swarm}
	checkFaultMix(f.Swarm, f.Duration, yf)
	if f.Name == "" {
		yf.Errorf("$.name", "missing")
	}
	if e.TimeScale == 0 {
		e.TimeScale = 1
	}
	if e.TimeScale < 0 {
		yf.Errorf("$.time_scale", "must be positive, got %v", f.TimeScale)
	}
	if e.NetworkTimeScale == 0 {
		e.NetworkTimeScale = 1
	}
	if e.NetworkTimeScale < 0 {
		yf.Errorf("$.network_time_scale", "must be positive, got %v", f.NetworkTimeScale)
	}
	if f.Duration <= 0 {
		yf.Errorf("$.duration", "must be positive (paper time, e.g. 3600s)")
	}
	if e.Replicas == 0 {
		e.Replicas = 1
	}
	if e.Replicas < 0 || e.Replicas > 64 {
		yf.Errorf("$.replicas", "must be in 1..64, got %d", f.Replicas)
	}
	// The protocol decides the roles, the agents' configuration sections
	// and the schedule's target words.
	schema, err := lookupSchema(f.Protocol)
	if err != nil {
		yf.Errorf("$.protocol", "%v", err)
	} else {
		e.Targets = schema.Targets()
		if _, err := schema.Role(f.Defaults.Role); err != nil && f.Defaults.Role != "" {
			yf.Errorf("$.defaults.role", "%v", err)
		}
	}
	defProfile := netem.Profile{}
	if f.Defaults.Profile != "" {
		p, err := netem.Parse(f.Defaults.Profile)
		if err != nil {
			yf.Errorf("$.defaults.profile", "%v", err)
		}
		defProfile = p
	}

	// Agents.
	names := map[string]int{}
	if len(f.Agents) < 2 {
		yf.Errorf("$.agents", "need at least two agents, got %d", len(f.Agents))
	}
	for i, a := range f.Agents {
		path := fmt.Sprintf("$.agents[%d]", i)
		if msg := nameProblem(a.Name, e.Targets); msg != "" {
			yf.Errorf(path+".name", "%q: %s", a.Name, msg)
		} else if _, dup := names[a.Name]; dup {
			yf.Errorf(path+".name", "%q defined twice", a.Name)
		}
		names[a.Name] = i
		ag := Agent{Name: a.Name, Role: a.Role, Generate: a.Generate, Later: a.Later,
			Config: strictyaml.Merge(f.Defaults.Agent, a.Config)}
		if ag.Role == "" {
			ag.Role = f.Defaults.Role
		}
		if schema != nil {
			r, err := schema.Role(ag.Role)
			if err != nil {
				if a.Role != "" || f.Defaults.Role == "" {
					yf.Errorf(path+".role", "%v", err)
				}
			} else {
				ag.Role = r
				yf.Add(schema.CheckConfig(ag))
			}
		}
		e.Agents = append(e.Agents, ag)
	}
	if schema != nil && len(f.Agents) > 0 {
		for _, p := range schema.CheckAgents(e.Agents) {
			yf.Errorf(p.Path, "%s", p.Msg)
		}
	}

	// Links: every ordered pair, the defaults' profile unless a link sets
	// one (prof holds those: a map of every pair was a second copy of the
	// n(n-1) directions).
	prof := map[[2]string]Direction{}
	seenLink := map[[2]string]bool{}
	for i, l := range f.Links {
		path := fmt.Sprintf("$.links[%d]", i)
		if len(l.Between) != 2 {
			yf.Errorf(path+".between", "want two agent names, got %d", len(l.Between))
			continue
		}
		a, b := l.Between[0], l.Between[1]
		ok := true
		for j, n := range l.Between {
			if _, known := names[n]; !known {
				yf.Errorf(fmt.Sprintf("%s.between[%d]", path, j), "unknown agent %q", n)
				ok = false
			}
		}
		if a == b {
			yf.Errorf(path+".between", "a link joins two different agents")
			ok = false
		}
		if !ok {
			continue
		}
		pair := [2]string{min(a, b), max(a, b)}
		if seenLink[pair] {
			yf.Errorf(path+".between", "link %s-%s defined twice", a, b)
		}
		seenLink[pair] = true
		set := func(text, field string, dirs ...[2]string) {
			if text == "" {
				return
			}
			p, err := netem.Parse(text)
			if err != nil {
				yf.Errorf(path+"."+field, "%v", err)
				return
			}
			for _, d := range dirs {
				prof[d] = Direction{From: d[0], To: d[1], Profile: p, Text: text}
			}
		}
		set(l.Profile, "profile", [2]string{a, b}, [2]string{b, a})
		set(l.AToB, "a_to_b", [2]string{a, b})
		set(l.BToA, "b_to_a", [2]string{b, a})
	}
	if n := len(e.Agents) * (len(e.Agents) - 1); n > 0 {
		e.Directions = make([]Direction, 0, n)
	}
	for _, a := range e.Agents {
		for _, b := range e.Agents {
			if a.Name != b.Name {
				d, ok := prof[[2]string{a.Name, b.Name}]
				if !ok {
					d = Direction{From: a.Name, To: b.Name, Profile: defProfile, Text: f.Defaults.Profile}
				}
				e.Directions = append(e.Directions, d)
			}
		}
	}

	// Schedule.
	agentNames := make([]string, len(e.Agents))
	for i, a := range e.Agents {
		agentNames[i] = a.Name
	}
	rnd := rand.New(rand.NewPCG(f.Seed, 0x5c4ed))
	parseLink := func(path, s string) (from, to string, both, ok bool) {
		sep := ">"
		if strings.Contains(s, "-") && !strings.Contains(s, ">") {
			sep, both = "-", true
		}
		from, to, found := strings.Cut(s, sep)
		if !found {
			yf.Errorf(path, "%q: want A>B (one direction) or A-B (both)", s)
			return "", "", false, false
		}
		for _, n := range []string{from, to} {
			if _, known := names[n]; !known {
				yf.Errorf(path, "unknown agent %q in %q", n, s)
				return "", "", false, false
			}
		}
		if from == to {
			yf.Errorf(path, "%q joins an agent to itself", s)
			return "", "", false, false
		}
		return from, to, both, true
	}
	for i, s := range f.Schedule {
		path := fmt.Sprintf("$.schedule[%d]", i)
		if s.At < 0 || s.At > f.Duration {
			yf.Errorf(path+".at", "%v is outside the run (0 to duration %v)", s.At, f.Duration)
		}
		n := max(s.Count, 1)
		if s.Count < 0 {
			yf.Errorf(path+".count", "must not be negative")
		}
		if s.Count > 1 && (s.Until <= s.At || s.Until > f.Duration) {
			yf.Errorf(path+".until", "with count > 1, until must be after at and within the run")
		}
		st := Step{Action: s.Action, For: s.For, Agent: s.Agent, Via: s.Via, Groups: s.Groups, Index: i}
		needLink := func() bool {
			if s.Link == "" && len(s.Links) == 0 {
				yf.Errorf(path+".link", "the %s action needs link (A>B or A-B) or links", s.Action)
				return false
			}
			return true
		}
		needAgent := func(allowTarget bool) {
			if allowTarget && slices.Contains(e.Targets, s.Agent) {
				return
			}
			if _, known := names[s.Agent]; !known {
				yf.Errorf(path+".agent", "unknown agent %q", s.Agent)
			}
		}
		if len(s.Groups) > 0 && s.Action != ActPartition {
			yf.Errorf(path+".groups", "groups are for partition steps, not %s", s.Action)
		}
		switch s.Action {
		case ActProfile:
			needLink()
			p, err := netem.Parse(s.Profile)
			if err != nil {
				yf.Errorf(path+".profile", "%v", err)
			}
			st.Profile = &p
		case ActOutage:
			needLink()
			if s.For <= 0 {
				yf.Errorf(path+".for", "an outage needs a positive length")
			}
		case ActPartition:
			if s.Link != "" || len(s.Links) > 0 {
				yf.Errorf(path+".link", "a partition names groups of agents, not links")
			}
			checkPartition(path, s.Groups, agentNames, e.Targets, yf)
			if s.For <= 0 {
				yf.Errorf(path+".for", "a partition needs a positive length")
			}
		case ActCrash:
			needAgent(true)
		case ActRestart:
			needAgent(true)
		case ActLeave:
			needAgent(false)
		case ActJoin:
			needAgent(false)
			if _, known := names[s.Via]; !known {
				yf.Errorf(path+".via", "unknown agent %q to join through", s.Via)
			} else if s.Via == s.Agent {
				yf.Errorf(path+".via", "%q cannot join through itself", s.Via)
			}
			if i, known := names[s.Agent]; known && !f.Agents[i].Later {
				yf.Errorf(path+".agent", "%q is not later: true, so it runs from the start and cannot join; set later: true on it (agents[%d]) to start it with this step", s.Agent, i)
			}
		default:
			yf.Errorf(path+".action", "%q: actions are profile, outage, partition, crash, restart, join, leave", s.Action)
		}
		links := s.Links
		if s.Link != "" {
			links = append([]string{s.Link}, links...)
		}
		for r := 0; r < n; r++ {
			st := st
			st.At = s.At
			if s.Count > 1 && s.Until > s.At {
				st.At = s.At + time.Duration(rnd.Int64N(int64(s.Until-s.At)))
			}
			if len(links) > 0 {
				l := links[rnd.IntN(len(links))]
				if from, to, both, ok := parseLink(path+".link", l); ok {
					st.From, st.To, st.Both = from, to, both
				}
			}
			e.Schedule = append(e.Schedule, st)
		}
	}
	slices.SortStableFunc(e.Schedule, func(a, b Step) int { return int(a.At - b.At) })
	if yf.Err() == nil {
		checkLifecycle(e, yf)
	}

	// Checks.
	for i, c := range f.Checks.Latency {
		path := fmt.Sprintf("$.checks.latency[%d]", i)
		from, to, found := strings.Cut(c.Link, ">")
		_, ka := names[from]
		_, kb := names[to]
		if !found || !ka || !kb {
			yf.Errorf(path+".link", "%q: want FROM>TO between known agents", c.Link)
		}
		if c.Mean <= 0 && c.P50 <= 0 && c.P99 <= 0 {
			yf.Errorf(path, "give mean, p50 or p99 (or several)")
		}
		if c.Tolerance < 0 || c.Tolerance > 10 {
			yf.Errorf(path+".tolerance", "must be in 0..10 (relative), got %v", c.Tolerance)
		}
		if c.Tolerance == 0 {
			e.Checks.Latency[i].Tolerance = DefaultTolerance
		}
	}
	if r := f.Checks.Return; r != nil {
		if _, known := names[r.Agent]; !known {
			yf.Errorf("$.checks.return_time.agent", "unknown agent %q", r.Agent)
		}
		if r.Tolerance == 0 {
			rc := *r
			rc.Tolerance = DefaultTolerance
			e.Checks.Return = &rc
		}
	}
	if err := yf.Err(); err != nil {
		return nil, err
	}
	return e, nil
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
