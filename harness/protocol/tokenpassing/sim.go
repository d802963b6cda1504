package tokenpassing

import (
	"crypto/ed25519"
	"errors"
	"net/netip"
	"time"

	"github.com/goccy/go-yaml"

	"tokenbed/agent/ca"
	"tokenbed/agent/config"
	"tokenbed/agent/driver"
	"tokenbed/agent/eventlog"
	"tokenbed/agent/node"
	"tokenbed/agent/wire"
	"tokenbed/experiments"
	"tokenbed/harness/protocol"
	"tokenbed/harness/sim"
	"tokenbed/internal/strictyaml"
)

var (
	_ protocol.Simulated     = Protocol{}
	_ protocol.SimConfigured = Protocol{}
)

// SimProcess implements protocol.Simulated: the agent that `agent run
// --config cfg` would run, built by the same code (config.Resolved.Node),
// wrapped as agent/driver wraps it: events logged before datagrams sent,
// rejections sampled, presigning after each step.
func (Protocol) SimProcess(cfg string, o protocol.Start, now time.Time) (sim.Process, string, error) {
	c, err := config.Load(cfg)
	if err != nil {
		return nil, "", err
	}
	return simProcess(cfg, c, o, now)
}

// SimConfig implements protocol.SimConfigured: the configuration Config
// writes, kept in memory. All of it but the peers goes through YAML as
// the file would (written, parsed and decoded at each start, as the
// agent reads its file); the peers, each agent's list of every other
// member, are given to the decoded configuration as they are, plain
// names, addresses and paths that a YAML round trip returns unchanged.
// TestSimConfigIsTheFile: the same resolved configuration as from the
// file.
func (Protocol) SimConfig(e *experiments.Experiment, p protocol.Process, peers []protocol.Process, f protocol.Files, seed uint64) (protocol.SimStart, error) {
	name, load, err := inMemory(e, p, peers, f, seed)
	if err != nil {
		return nil, err
	}
	return func(o protocol.Start, now time.Time) (sim.Process, string, error) {
		c, err := load()
		if err != nil {
			return nil, "", err
		}
		return simProcess(name, c, o, now)
	}, nil
}

// inMemory is SimConfig's configuration: load returns, at each call, what
// config.Load returns for the file Config writes, named name in errors.
func inMemory(e *experiments.Experiment, p protocol.Process, peers []protocol.Process, f protocol.Files, seed uint64) (name string, load func() (*config.Config, error), err error) {
	c, err := agentConfig(e, p, peers, f, seed)
	if err != nil {
		return "", nil, err
	}
	ps := c.Peers
	c.Peers = nil
	b, err := yaml.Marshal(c)
	if err != nil {
		return "", nil, err
	}
	name = p.Instance + ".yaml (in memory)"
	return name, func() (*config.Config, error) {
		n, err := strictyaml.Parse(name, b)
		if err != nil {
			return nil, err
		}
		c, err := config.Decode(n)
		if err != nil {
			return nil, err
		}
		c.Peers = ps // read, never written, by Validate and Node
		return c, nil
	}, nil
}

// simProcess is the agent `agent run` runs with configuration c (from
// the file cfg) and the flags o.
func simProcess(cfg string, c *config.Config, o protocol.Start, now time.Time) (sim.Process, string, error) {
	if o.Join != "" {
		c.Join = o.Join
		c.SetByFlag("$.join", "join")
	}
	r, err := c.Validate()
	if err != nil {
		return nil, "", err
	}
	cred, err := ca.LoadMember(r.Credentials, r.Name, r.CA)
	if err != nil {
		return nil, "", err
	}
	n, err := r.Node(cred, o.Verified, now)
	if err != nil {
		return nil, "", errors.New(cfg + ": " + err.Error())
	}
	a := &simAgent{n: n, started: r.Started(c.Fault, r.DropRate), pub: cred.Key.Public().(ed25519.PublicKey), addr: r.Listen}
	if r.DropRate > 0 {
		// The agent's own test transport (agent --drop-rate), seeded
		// from its seed as the agent seeds it: the same datagrams drop.
		a.drop = driver.NewLossy(kept{}, r.DropRate, r.Seed)
	}
	// The agent's clock (clock:), as agent/driver applies it.
	return sim.Skewed(a, r.Clock), r.Log, nil
}

// simAgent is a node.Node as the simulator runs it: what agent/driver
// does around a node, without the socket and the clock.
type simAgent struct {
	n       *node.Node
	rej     driver.RejectionSampler
	started eventlog.Event
	pub     ed25519.PublicKey // what the receivers verify its datagrams with
	addr    netip.AddrPort
	drop    *driver.Lossy // drop_rate, or nil
}

// dropped is drop_rate's verdict on the next datagram: the Lossy
// transport's own draw, on no socket.
func (a *simAgent) dropped(to netip.AddrPort, data []byte) bool {
	if a.drop == nil {
		return false
	}
	return a.drop.WriteTo(data, to) == nil
}

// kept is the transport under drop_rate's Lossy: it hears of every
// datagram Lossy keeps (the simulator sends it).
type kept struct{ driver.Transport }

var errKept = errors.New("kept")

func (kept) WriteTo([]byte, netip.AddrPort) error { return errKept }

func (a *simAgent) out(now time.Time, first ...eventlog.Event) sim.Output {
	r := a.n.Ready()
	evs := append(first, a.rej.Filter(now, r.Events)...)
	o := sim.Output{Events: evs}
	for _, p := range r.Packets {
		if a.dropped(p.To, p.Data) {
			continue
		}
		o.Packets = append(o.Packets, sim.Packet{To: p.To, Data: p.Data})
		// The receiver's verification, on another core (agent/wire).
		o.Ahead = append(o.Ahead, wire.VerifyAhead(p.Data, a.pub, a.addr, p.To))
	}
	// As the driver: sign ahead while the datagrams are on their way.
	o.After = func() { a.n.Prepare(now) }
	return o
}

func (a *simAgent) Start(now time.Time) sim.Output {
	a.n.Start(now)
	return a.out(now, a.started)
}

func (a *simAgent) Receive(now time.Time, from netip.AddrPort, data []byte) sim.Output {
	a.n.Receive(now, from, data)
	return a.out(now)
}

func (a *simAgent) Tick(now time.Time) sim.Output {
	// The deadline may have been the rejections summary's.
	if d, ok := a.n.Deadline(); ok && !now.Before(d) {
		a.n.Tick(now)
	}
	return a.out(now)
}

func (a *simAgent) Deadline() (time.Time, bool) {
	d, ok := a.n.Deadline()
	if sd, sok := a.rej.Due(); sok && (!ok || sd.Before(d)) {
		d, ok = sd, true
	}
	return d, ok
}

// Stop is the agent's SIGTERM: the driver stops the node with its
// context's cause, logs the pending rejection summary, and the agent its
// agent_stopping.
func (a *simAgent) Stop(now time.Time, _ string) sim.Output {
	a.n.Stop("context canceled")
	o := a.out(now)
	o.Events = append(o.Events, a.rej.Final()...)
	o.Events = append(o.Events, driver.Stopping("signal", a.n.Rejected()))
	return o
}
