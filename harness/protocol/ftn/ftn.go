// Package ftn is the run half of the FTN lock service's plug-in (seed
// 001); its declaration is protocols/ftn. Its processes take roles "server" and
// "client"; Config writes each one's agent/ftn/ftnconfig file (every
// server of the experiment in the shared list, 001 "Configuration"),
// Args starts `agent ftn run --config F`, the observer resolves the
// schedule word "leader" from the servers' logs, and the clients'
// holds are the application time. The analysis half is analysis/ftn.
package ftn

import (
	"fmt"
	"slices"

	"github.com/goccy/go-yaml"

	"tokenbed/agent/eventlog"
	"tokenbed/agent/ftn/ftnconfig"
	"tokenbed/agent/ftn/ftnlog"
	"tokenbed/experiments"
	"tokenbed/harness/protocol"
	decl "tokenbed/protocols/ftn"
)

// Protocol is the run half of protocol ftn; its declaration (name,
// schema, paper-clock basis) is protocols/ftn.
type Protocol struct{ decl.Declaration }

var _ protocol.Protocol = Protocol{}

func init() { protocol.Register(Protocol{}) }

// Config implements protocol.Protocol.
func (Protocol) Config(e *experiments.Experiment, p protocol.Process, peers []protocol.Process, f protocol.Files, seed uint64) ([]byte, error) {
	role := p.Spec.Role
	if role != ftnconfig.RoleServer && role != ftnconfig.RoleClient {
		return nil, fmt.Errorf("%s: role %q: protocol ftn has roles %s and %s", p.Name, role, ftnconfig.RoleServer, ftnconfig.RoleClient)
	}
	all := append([]protocol.Process{p}, peers...)
	var servers []ftnconfig.Peer
	for _, q := range all {
		if q.Spec.Role == ftnconfig.RoleServer && !slices.ContainsFunc(servers, func(s ftnconfig.Peer) bool { return s.Name == q.Instance }) {
			servers = append(servers, ftnconfig.Peer{Name: q.Instance, Addr: q.Addr.String()})
		}
	}
	slices.SortFunc(servers, func(a, b ftnconfig.Peer) int {
		if a.Name < b.Name {
			return -1
		}
		if a.Name > b.Name {
			return 1
		}
		return 0
	})
	if len(servers) == 0 {
		return nil, fmt.Errorf("%s: protocol ftn needs at least one process with role server", p.Name)
	}
	ts := e.TimeScale
	if ts == 0 {
		ts = 1
	}
	sec, err := decl.DecodeSection(p.Spec)
	if err != nil {
		return nil, err
	}
	if sec.Tick == 0 {
		sec.Tick = decl.Tick
	}
	c := ftnconfig.Config{Name: p.Instance, Role: role, Listen: p.Addr.String(), CA: f.CACert, Credentials: f.Credentials,
		Log: f.Log, Seed: seed, Tick: sec.Tick, TimeScale: ts, Servers: servers, Server: sec.Server, Client: sec.Client}
	if role == ftnconfig.RoleClient {
		w := decl.DefaultWorkload
		if sec.Workload != nil {
			w = *sec.Workload
		}
		c.Workload = &w
	}
	b, err := yaml.Marshal(c)
	if err != nil {
		return nil, err
	}
	// Check it as the process will.
	if _, err := ftnconfig.Decode(p.Instance+".yaml", b); err != nil {
		return nil, err
	}
	return b, nil
}

// Args implements protocol.Protocol: the role is in the file.
func (Protocol) Args(cfg string, o protocol.Start) []string {
	return []string{"ftn", "run", "--config", cfg}
}

// NominalNS implements protocol.Protocol: a client's hold, scaled.
func (Protocol) NominalNS(e *experiments.Experiment, a experiments.Agent) int64 {
	if a.Role != ftnconfig.RoleClient {
		return 0
	}
	ts := e.TimeScale
	if ts == 0 {
		ts = 1
	}
	hold := decl.DefaultWorkload.Hold
	if s, err := decl.DecodeSection(a); err == nil && s.Workload != nil {
		hold = s.Workload.Hold
	}
	return int64(float64(hold) / ts)
}

// NewObserver implements protocol.Protocol.
func (Protocol) NewObserver() protocol.Observer { return &observer{holds: map[string][]string{}} }

// observer follows the leader and the clients' holds.
type observer struct {
	leader   string
	holds    map[string][]string // client instance → names held
	acquired int
}

func (o *observer) Observe(inst string, e eventlog.Event) {
	switch e.Kind {
	case decl.EventLeader:
		o.leader = inst
	case decl.EventStepDown, decl.EventReinit:
		if o.leader == inst {
			o.leader = ""
		}
	case ftnlog.Invoke, ftnlog.Complete:
		r, _, err := ftnlog.Parse(e)
		if err != nil {
			return
		}
		switch {
		case e.Kind == ftnlog.Complete && r.Op == "acquire" && r.Result == ftnlog.OK:
			o.holds[inst] = append(o.holds[inst], r.Name)
			o.acquired++
		case e.Kind == ftnlog.Invoke && r.Op == "release":
			o.holds[inst] = slices.DeleteFunc(o.holds[inst], func(n string) bool { return n == r.Name })
		}
	case decl.EventInvalid:
		delete(o.holds, inst)
	}
}

func (o *observer) Down(inst string) {
	if o.leader == inst {
		o.leader = ""
	}
	delete(o.holds, inst)
}

// Target resolves "leader": the server that last logged becoming leader
// and has not stepped down or stopped since.
func (o *observer) Target(word string, among []string) (string, bool) {
	if word != decl.TargetLeader || o.leader == "" || !slices.Contains(among, o.leader) {
		return "", false
	}
	return o.leader, true
}

// Holds names the tokens a client holds, sorted.
func (o *observer) Holds(inst string) string {
	hs := slices.Clone(o.holds[inst])
	slices.Sort(hs)
	s := ""
	for i, h := range hs {
		if i > 0 {
			s += ","
		}
		s += h
	}
	return s
}

func (o *observer) Progress() (int, string) { return o.acquired, "acquisitions" }
