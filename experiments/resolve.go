package experiments

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"tokenbed/internal/strictyaml"
	"tokenbed/netem"
)

// resolve turns a decoded file into an experiment, in the order of the
// package documentation: the run's settings, the agents, the link
// directions, the schedule, the checks. Every problem is reported into
// yf, with its path, and all of them are returned together.
func resolve(name string, f *File, yf *strictyaml.File) (*Experiment, error) {
	rv := &resolver{f: f, yf: yf, names: map[string]int{}}
	rv.run(name)
	rv.agents()
	rv.directions()
	rv.schedule()
	rv.checks()
	if err := yf.Err(); err != nil {
		return nil, err
	}
	return rv.e, nil
}

// resolver is one file being resolved.
type resolver struct {
	f      *File
	yf     *strictyaml.File
	e      *Experiment
	schema Schema         // nil when the protocol is unknown
	names  map[string]int // agent name → its index in f.Agents
	def    netem.Profile  // defaults.profile, parsed
}

// run resolves the run's own settings (name, scales, duration,
// replicas) and the protocol, which decides the roles, the agents'
// configuration sections and the schedule's target words.
func (rv *resolver) run(name string) {
	f, yf := rv.f, rv.yf
	rv.e = &Experiment{Source: name, Name: f.Name, Description: f.Description, Protocol: f.Protocol, Seed: f.Seed,
		TimeScale: f.TimeScale, NetworkTimeScale: f.NetworkTimeScale, Duration: f.Duration, Replicas: f.Replicas, WarmStart: f.WarmStart, Checks: f.Checks, Swarm: f.Swarm}
	e := rv.e
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
	schema, err := lookupSchema(f.Protocol)
	rv.schema = schema
	if err != nil {
		yf.Errorf("$.protocol", "%v", err)
	} else {
		e.Targets = schema.Targets()
		if _, err := schema.Role(f.Defaults.Role); err != nil && f.Defaults.Role != "" {
			yf.Errorf("$.defaults.role", "%v", err)
		}
	}
	if f.Defaults.Profile != "" {
		p, err := netem.Parse(f.Defaults.Profile)
		if err != nil {
			yf.Errorf("$.defaults.profile", "%v", err)
		}
		rv.def = p
	}
}

// agents resolves the agents: unique names, roles, and each one's
// configuration section merged over the defaults' and checked by the
// protocol.
func (rv *resolver) agents() {
	f, yf, e, schema, names := rv.f, rv.yf, rv.e, rv.schema, rv.names
	if len(f.Agents) < 2 {
		yf.Errorf("$.agents", "need at least two agents, got %d", len(f.Agents))
	}
	if field, msg := (ClockSpec{}).over(f.Defaults.Clock).Problem(); field != "" {
		yf.Errorf("$.defaults.clock."+field, "%s", msg)
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
			Config: strictyaml.Merge(f.Defaults.Agent, a.Config), Clock: a.Clock.over(f.Defaults.Clock)}
		if field, msg := ag.Clock.Problem(); field != "" && a.Clock.Drift != nil {
			yf.Errorf(path+".clock."+field, "%s", msg) // the defaults' own is reported once, above
		}
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
}

// directions resolves the links into every ordered pair of agents: the
// defaults' profile unless a link sets one (prof holds those: a map of
// every pair was a second copy of the n(n-1) directions).
func (rv *resolver) directions() {
	f, yf, e, names := rv.f, rv.yf, rv.e, rv.names
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
					d = Direction{From: a.Name, To: b.Name, Profile: rv.def, Text: f.Defaults.Profile}
				}
				e.Directions = append(e.Directions, d)
			}
		}
	}
}

// schedule resolves the schedule into steps sorted by time: each entry
// checked for its action, then expanded into count steps at seeded
// random times in [at, until), each on a link drawn from its links.
func (rv *resolver) schedule() {
	e, yf := rv.e, rv.yf
	agentNames := make([]string, len(e.Agents))
	for i, a := range e.Agents {
		agentNames[i] = a.Name
	}
	rnd := rand.New(rand.NewPCG(rv.f.Seed, 0x5c4ed))
	for i, s := range rv.f.Schedule {
		rv.step(i, s, agentNames, rnd)
	}
	slices.SortStableFunc(e.Schedule, func(a, b Step) int { return int(a.At - b.At) })
	if yf.Err() == nil {
		checkLifecycle(e, yf)
	}
}

// step resolves schedule entry i into e.Schedule.
func (rv *resolver) step(i int, s StepSpec, agentNames []string, rnd *rand.Rand) {
	f, yf, e := rv.f, rv.yf, rv.e
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
	rv.action(path, s, agentNames, &st)
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
			if from, to, both, ok := rv.parseLink(path+".link", l); ok {
				st.From, st.To, st.Both = from, to, both
			}
		}
		e.Schedule = append(e.Schedule, st)
	}
}

// action checks what entry s's action needs (a link, an agent, groups,
// a length) and parses its profile into st.
func (rv *resolver) action(path string, s StepSpec, agentNames []string, st *Step) {
	f, yf, e, names := rv.f, rv.yf, rv.e, rv.names
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
}

// parseLink parses a schedule link, A>B (one direction) or A-B (both),
// between two known agents.
func (rv *resolver) parseLink(path, s string) (from, to string, both, ok bool) {
	yf, names := rv.yf, rv.names
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

// checks resolves the checks, with their default tolerances.
func (rv *resolver) checks() {
	f, yf, e, names := rv.f, rv.yf, rv.e, rv.names
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
}
