package swarm

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/goccy/go-yaml"

	"tokenbed/experiments"
)

// Fault is what the shrinker keeps or drops as one: the schedule steps of
// one drawn fault (an outage; a crash and its restart; a profile change
// and the restore of the direction's own profile). Keeping a crash's
// restart with it keeps every subset of faults a valid schedule.
type Fault struct {
	Kind  string // outage, crash, profile
	Steps []Step
}

// Step is one schedule step as the experiment file writes it.
type Step struct {
	At      time.Duration
	Action  string
	Link    string
	Profile string
	For     time.Duration
	Agent   string
}

// drawSalt separates the swarm's draws from the experiment's own use of
// its seed (its schedule's count steps, the agents' random walks).
const drawSalt = 0x5a4a12

// Draw draws seed's faults from e's fault mix (e.Swarm): a function of
// the experiment and the seed only, so that a seed replays.
func Draw(e *experiments.Experiment, seed uint64) []Fault {
	m := e.Swarm
	if m == nil {
		return nil
	}
	rnd := rand.New(rand.NewPCG(seed, drawSalt))
	var agents []string
	for _, a := range e.Agents {
		if !a.Later {
			agents = append(agents, a.Name)
		}
	}
	D := e.Duration
	// at and length of one fault of kind k, on a millisecond grid (the
	// shrunk schedule reads as a person would write it).
	span := func(k experiments.FaultKind) (time.Duration, time.Duration) {
		l := k.Min
		if k.Max > k.Min {
			l += time.Duration(rnd.Int64N(int64(k.Max - k.Min)))
		}
		l = max(l.Round(time.Millisecond), time.Millisecond)
		at := time.Duration(rnd.Int64N(int64(D - l))).Round(time.Millisecond)
		return at, l
	}
	pick := func(xs []string) string { return xs[rnd.IntN(len(xs))] }
	pair := func() (string, string) {
		a := rnd.IntN(len(e.Agents))
		b := (a + 1 + rnd.IntN(len(e.Agents)-1)) % len(e.Agents)
		return e.Agents[a].Name, e.Agents[b].Name
	}
	var out []Fault
	for range rnd.IntN(m.Outages.Count + 1) {
		at, l := span(m.Outages)
		a, b := pair()
		sep := ">"
		if rnd.IntN(2) == 0 {
			sep = "-"
		}
		out = append(out, Fault{Kind: "outage", Steps: []Step{{At: at, Action: experiments.ActOutage, Link: a + sep + b, For: l}}})
	}
	// Crashes do not overlap in time: a crash never targets an agent a
	// kept crash has taken down, whichever subset the shrinker keeps.
	var down [][2]time.Duration
	for range rnd.IntN(m.Crashes.Count + 1) {
		at, l := span(m.Crashes)
		// An agent, or one of the protocol's target words (token
		// passing: holder, whoever holds a token then).
		target := pick(agents)
		if rnd.IntN(2) == 0 && len(e.Targets) > 0 {
			target = pick(e.Targets)
		}
		restart := rnd.Float64() < m.Restarts
		end := D
		if restart {
			end = at + l
		}
		overlap := false
		for _, iv := range down {
			overlap = overlap || (at <= iv[1] && iv[0] <= end)
		}
		if overlap {
			continue
		}
		down = append(down, [2]time.Duration{at, end})
		f := Fault{Kind: "crash", Steps: []Step{{At: at, Action: experiments.ActCrash, Agent: target}}}
		if restart {
			f.Steps = append(f.Steps, Step{At: at + l, Action: experiments.ActRestart, Agent: target})
		}
		out = append(out, f)
	}
	for range rnd.IntN(m.ProfileChanges.Count + 1) {
		at, l := span(m.ProfileChanges)
		a, b := pair()
		d, _ := e.Direction(a, b)
		p := strings.TrimSpace(d.Text)
		for _, x := range []struct {
			what string
			max  float64
		}{{"loss", m.Loss}, {"duplicate", m.Duplicate}, {"reorder", m.Reorder}} {
			if x.max > 0 {
				p += fmt.Sprintf(" %s %.2f%%", x.what, rnd.Float64()*x.max)
			}
		}
		link := a + ">" + b
		out = append(out, Fault{Kind: "profile", Steps: []Step{
			{At: at, Action: experiments.ActProfile, Link: link, Profile: strings.TrimSpace(p)},
			{At: at + l, Action: experiments.ActProfile, Link: link, Profile: d.Text},
		}})
	}
	return out
}

// File is the experiment file of one swarm run: raw (the experiment as
// loaded) with seed as its seed and the faults after its own schedule.
// Run as it is (harness run --backend sim FILE) it replays the run.
func File(raw []byte, seed uint64, faults []Fault) ([]byte, error) {
	var doc yaml.MapSlice
	if err := yaml.UnmarshalWithOptions(raw, &doc, yaml.UseOrderedMap()); err != nil {
		return nil, err
	}
	var sched []any
	seenSeed, seenSched := false, false
	for i, it := range doc {
		switch it.Key {
		case "seed":
			doc[i].Value, seenSeed = seed, true
		case "schedule":
			if s, ok := it.Value.([]any); ok {
				sched = s
			}
			seenSched = true
		}
	}
	for _, f := range faults {
		for _, s := range f.Steps {
			sched = append(sched, s.yaml())
		}
	}
	if !seenSeed {
		doc = append(doc, yaml.MapItem{Key: "seed", Value: seed})
	}
	if !seenSched {
		doc = append(doc, yaml.MapItem{Key: "schedule", Value: nil})
	}
	for i, it := range doc {
		if it.Key == "schedule" {
			doc[i].Value = sched
		}
	}
	return yaml.Marshal(doc)
}

func (s Step) yaml() yaml.MapSlice {
	m := yaml.MapSlice{{Key: "action", Value: s.Action}}
	add := func(k string, v any, ok bool) {
		if ok {
			m = append(m, yaml.MapItem{Key: k, Value: v})
		}
	}
	add("link", s.Link, s.Link != "")
	add("agent", s.Agent, s.Agent != "")
	add("profile", s.Profile, s.Action == experiments.ActProfile)
	add("at", s.At.String(), true)
	add("for", s.For.String(), s.For > 0)
	return m
}

// Schedule writes faults as the schedule section of an experiment file,
// one flow mapping per step, as the experiment files write them.
func Schedule(faults []Fault) string {
	var b bytes.Buffer
	b.WriteString("schedule:\n")
	for _, f := range faults {
		for _, s := range f.Steps {
			out, _ := yaml.MarshalWithOptions(s.yaml(), yaml.Flow(true))
			fmt.Fprintf(&b, "  - %s\n", strings.TrimSpace(string(out)))
		}
	}
	return b.String()
}
