package runner

import (
	"context"
	"net/netip"
	"path/filepath"

	"tokenbed/experiments"
	"tokenbed/internal/results"
	"tokenbed/netem"
)

// impair applies every direction's profile, scaled to network time, on
// the queue toward its receiver, keyed by sender (impairKernel).
func (r *run) impair() error {
	r.trees = map[string]*netem.Tree{}
	return r.links.impair(r)
}

func (r *run) startCapture(ctx context.Context) error {
	c, err := r.capture.start(ctx, r)
	if err != nil {
		return err
	}
	r.cap = c
	return nil
}

// nominalHold is inst's nominal interval of application time in wall ns
// (the protocol's; 0 when it has none).
func (r *run) nominalHold(inst string) int64 { return r.proto.NominalNS(r.e, r.agents[inst].spec) }

func (r *run) writeTopology() error {
	var t results.Topology
	t.Port = AgentPort
	for _, inst := range r.order {
		a := r.agents[inst].a
		p, _ := r.be.AgentPort(inst)
		where := p.Name
		if where == "" {
			where = filepath.Base(p.NSPath)
		}
		t.Agents = append(t.Agents, results.AgentInfo{Name: a.Name, Replica: a.Replica, Instance: inst,
			Addr: netip.AddrPortFrom(a.Addr, AgentPort).String(), Namespace: where, Interface: p.Link,
			Log: filepath.Join(results.LogsDir, inst+".jsonl"), HoldNS: r.nominalHold(inst)})
	}
	if n := len(r.e.Directions); n > 0 { // (none is null in the file, as it was)
		t.Directions = make([]results.DirectionInfo, 0, n)
	}
	for _, d := range r.e.Directions {
		t.Directions = append(t.Directions, results.DirectionInfo{From: d.From, To: d.To,
			Profile: experiments.ScaleNetwork(d.Profile, r.e.NetworkTimeScale).String(), Paper: d.Text})
	}
	return results.WriteJSON(r.dir, results.TopologyFile, t)
}
