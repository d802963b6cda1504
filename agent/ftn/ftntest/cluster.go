// Package ftntest runs FTN servers and clients (agent/ftn/server,
// agent/ftn/client) on a deterministic in-memory network, for unit
// traces and for the checker's tests: one round delivers every message
// in flight (in order, less the cut links and the seeded random loss),
// then ticks every live process once. Nothing depends on the wall clock
// or on map order; the seed is the only source of randomness, so a seed
// replays exactly.
package ftntest

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"

	"tokenbed/agent/eventlog"
	"tokenbed/agent/ftn/client"
	"tokenbed/agent/ftn/ftnlog"
	"tokenbed/agent/ftn/msg"
	"tokenbed/agent/ftn/server"
)

// TickNS is a round's length on the history's clock (mono_ns).
const TickNS = int64(1e6)

// Options of a cluster.
type Options struct {
	Servers, Clients int
	Seed             uint64
	// Broken lists servers that skip the recovery query (a deliberately
	// broken server: server.Config.SkipRecoveryQuery).
	Broken []int
	// Server and Client are templates for every process's timing.
	Server server.Config
	Client client.Config
	// Dup is the probability that a datagram from a client to a server
	// is delivered twice, the copy 1..DupDelay rounds after the original
	// (netem's duplicate with a large delay jitter: late duplicates with
	// no attacker; 001 "Communication" repeats requests anyway).
	Dup      float64
	DupDelay int
}

type snode struct {
	peer msg.Peer
	s    *server.Server
	inc  uint64
}

type cnode struct {
	peer msg.Peer
	c    *client.Client
	life int
	ops  map[uint64]client.Op
}

type packet struct {
	from msg.Peer
	to   netip.AddrPort
	m    msg.Msg
}

// Cluster is servers and clients on one in-memory network.
type Cluster struct {
	opt     Options
	rnd     *rand.Rand
	tick    int64
	servers []*snode
	clients []*cnode
	names   map[netip.AddrPort]string
	flight  []packet
	late    map[int64][]packet // duplicates, by the round that delivers them
	cut     map[[2]string]bool
	// held: links whose datagrams wait in heldPkts until Deliver (a
	// network that delays them); drops: datagrams of a kind on a link
	// still to lose.
	held     map[[2]string]bool
	heldPkts []packet
	drops    map[dropKey]int
	// Loss is the probability that a datagram is lost.
	Loss float64
	// ShowMsgs adds the messages sent (less heartbeats) to the trace;
	// ShowAll adds heartbeats too.
	ShowMsgs, ShowAll bool

	trace []string
	log   []eventlog.Event
	seq   map[string]uint64
	sent  []packet // every datagram sent, for Replay
}

// New starts a cluster: every server and client is up at tick 0.
func New(o Options) (*Cluster, error) {
	c := &Cluster{opt: o, rnd: rand.New(rand.NewPCG(o.Seed, 0x66746e)), names: map[netip.AddrPort]string{},
		cut: map[[2]string]bool{}, seq: map[string]uint64{}, late: map[int64][]packet{},
		held: map[[2]string]bool{}, drops: map[dropKey]int{}}
	var peers []msg.Peer
	for i := range o.Servers {
		p := msg.Peer{Name: fmt.Sprintf("s%d", i), Addr: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)}), 7000)}
		peers = append(peers, p)
		c.names[p.Addr] = p.Name
	}
	for i := range o.Servers {
		c.servers = append(c.servers, &snode{peer: peers[i]})
	}
	for i := range o.Servers {
		if err := c.startServer(i, 1); err != nil {
			return nil, err
		}
	}
	for j := range o.Clients {
		p := msg.Peer{Name: fmt.Sprintf("c%d", j), Addr: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 1, byte(j + 1)}), 7000)}
		c.names[p.Addr] = p.Name
		c.clients = append(c.clients, &cnode{peer: p})
		if err := c.StartClient(j); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func (c *Cluster) serverPeers() []msg.Peer {
	var ps []msg.Peer
	for _, n := range c.servers {
		ps = append(ps, n.peer)
	}
	return ps
}

func (c *Cluster) startServer(i int, inc uint64) error {
	cfg := c.opt.Server
	cfg.Self, cfg.Servers, cfg.Inc, cfg.Seed = i, c.serverPeers(), inc, c.opt.Seed
	cfg.SkipRecoveryQuery = slices.Contains(c.opt.Broken, i)
	s, err := server.New(cfg)
	if err != nil {
		return err
	}
	c.servers[i].s, c.servers[i].inc = s, inc
	return nil
}

// StartClient starts client j (again, after a crash: a new life that
// registers anew).
func (c *Cluster) StartClient(j int) error {
	n := c.clients[j]
	cfg := c.opt.Client
	cfg.Servers = c.serverPeers()
	n.life++
	cfg.Nonce = uint64(j)*1000 + uint64(n.life)
	cl, err := client.New(cfg)
	if err != nil {
		return err
	}
	n.c, n.ops = cl, map[uint64]client.Op{}
	return nil
}

// Server returns server i (nil while crashed).
func (c *Cluster) Server(i int) *server.Server { return c.servers[i].s }

// Client returns client j (nil while crashed).
func (c *Cluster) Client(j int) *client.Client { return c.clients[j].c }

// Tick is the number of rounds run.
func (c *Cluster) Tick() int64 { return c.tick }

// Log is the history: every process's events in the eventlog schema,
// with mono_ns = tick × TickNS.
func (c *Cluster) Log() []eventlog.Event { return c.log }

// Trace returns, and forgets, the trace lines since the last call.
func (c *Cluster) Trace() string {
	s := strings.Join(c.trace, "\n")
	c.trace = nil
	return s
}

func (c *Cluster) record(agent string, e eventlog.Event) {
	c.seq[agent]++
	e.Agent, e.Seq, e.MonoNS, e.WallNS = agent, c.seq[agent], c.tick*TickNS, c.tick*TickNS
	c.log = append(c.log, e)
}

func (c *Cluster) tracef(format string, a ...any) {
	c.trace = append(c.trace, fmt.Sprintf("t=%d ", c.tick)+fmt.Sprintf(format, a...))
}

// Invoke starts an operation at client j.
func (c *Cluster) Invoke(j int, o client.Op) uint64 {
	n := c.clients[j]
	if n.c == nil {
		return 0
	}
	req := n.c.Invoke(o)
	n.ops[req] = o
	c.record(n.peer.Name, ftnlog.Invocation(n.c.ID(), req, o.Kind, o.Name, o.Mode, o.Data).Event(ftnlog.Invoke))
	c.collectClient(j)
	return req
}

// harness logs what the harness would: crashes, restarts, outages.
func (c *Cluster) harness(k eventlog.Kind, peer string) {
	c.record("harness", eventlog.Event{Kind: k, Peer: peer})
}

// CrashServer stops server i without a word (its state is lost).
func (c *Cluster) CrashServer(i int) {
	c.servers[i].s = nil
	c.harness(eventlog.AgentCrash, c.servers[i].peer.Name)
}

// RestartServer starts server i again as a new life.
func (c *Cluster) RestartServer(i int) error {
	c.harness(eventlog.AgentRestart, c.servers[i].peer.Name)
	return c.startServer(i, c.servers[i].inc+1000)
}

// CrashClient stops client j; its outstanding operations stay without
// completion (unknown).
func (c *Cluster) CrashClient(j int) {
	c.clients[j].c = nil
	c.harness(eventlog.AgentCrash, c.clients[j].peer.Name)
}

// RestartClient starts client j again: a new life that registers anew.
func (c *Cluster) RestartClient(j int) error {
	c.harness(eventlog.AgentRestart, c.clients[j].peer.Name)
	return c.StartClient(j)
}

// Partition cuts every link between two processes of different groups
// (names); processes in no group keep all their links.
func (c *Cluster) Partition(groups ...[]string) {
	for gi, a := range groups {
		for gj, b := range groups {
			if gi == gj {
				continue
			}
			for _, x := range a {
				for _, y := range b {
					c.cut[[2]string{x, y}] = true
				}
			}
		}
	}
}

// Cut cuts the link from a to b, one way.
func (c *Cluster) Cut(a, b string) { c.cut[[2]string{a, b}] = true }

// Hold keeps every datagram from a to b, from the next round on, until
// Deliver: a network that delays them (001 "late messages").
func (c *Cluster) Hold(a, b string) { c.held[[2]string{a, b}] = true }

// Deliver puts the datagrams held from a to b in flight again, in the
// order they were sent, and stops holding that link. It returns how many.
func (c *Cluster) Deliver(a, b string) int {
	link := [2]string{a, b}
	delete(c.held, link)
	n := 0
	var keep []packet
	for _, p := range c.heldPkts {
		if p.from.Name == a && c.names[p.to] == b {
			c.tracef("deliver %s->%s %s", a, b, p.m)
			c.flight = append(c.flight, p)
			n++
			continue
		}
		keep = append(keep, p)
	}
	c.heldPkts = keep
	return n
}

type dropKey struct {
	link [2]string
	kind msg.Kind
}

// Drop loses the next n datagrams of kind k from a to b (each printed
// as "lost" in the trace).
func (c *Cluster) Drop(a, b string, k msg.Kind, n int) { c.drops[dropKey{[2]string{a, b}, k}] += n }

// Inject puts m in flight from process from to process to, as if from
// sent it: a datagram signed by a member (the codec checks nothing
// else), such as a server with another configuration file.
func (c *Cluster) Inject(from, to string, m msg.Msg) error {
	var fp msg.Peer
	var ta netip.AddrPort
	for a, n := range c.names {
		if n == from {
			fp = msg.Peer{Name: n, Addr: a}
		}
		if n == to {
			ta = a
		}
	}
	if fp.Name == "" || !ta.IsValid() {
		return fmt.Errorf("inject: no process %q or %q", from, to)
	}
	c.tracef("inject %s->%s %s", from, to, m)
	c.flight = append(c.flight, packet{from: fp, to: ta, m: copyMsg(m)})
	return nil
}

// Close has client j tell the leader it closes down (001 "The Client
// List"), as the host does when it stops.
func (c *Cluster) Close(j int) {
	n := c.clients[j]
	if n.c == nil {
		return
	}
	n.c.Close()
	c.collectClient(j)
}

// Heal restores every link.
func (c *Cluster) Heal() {
	c.cut = map[[2]string]bool{}
	c.harness(eventlog.OutageEnd, "")
}

func hidden(k msg.Kind) bool {
	return k == msg.StateMsg || k == msg.Heartbeat || k == msg.ClientHeartbeat || k == msg.HeartbeatAck
}

// copyMsg gives the receiver its own copy, as a datagram would.
func copyMsg(m msg.Msg) msg.Msg {
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	var o msg.Msg
	if err := json.Unmarshal(b, &o); err != nil {
		panic(err)
	}
	return o
}

func (c *Cluster) sendAll(from msg.Peer, outs []msg.Out) {
	for _, o := range outs {
		to := c.names[o.To]
		if c.ShowAll || (c.ShowMsgs && !hidden(o.Msg.Kind)) {
			c.tracef("%s->%s %s", from.Name, to, o.Msg)
		}
		p := packet{from: from, to: o.To, m: copyMsg(o.Msg)}
		c.flight = append(c.flight, p)
		c.sent = append(c.sent, p)
		if c.opt.Dup > 0 && !o.Msg.Kind.FromServer() && c.rnd.Float64() < c.opt.Dup {
			at := c.tick + 1 + int64(c.rnd.IntN(max(c.opt.DupDelay, 1)))
			c.late[at] = append(c.late[at], packet{from: from, to: o.To, m: copyMsg(o.Msg)})
		}
	}
}

// Replay puts in flight again the first (with newest, the last) datagram
// sent from process from to process to of kind k and request number req
// (name too, if not ""): a late duplicate, or an attacker's replay of a captured
// datagram (it carries its sender's valid signature). It reports
// whether one was found.
func (c *Cluster) Replay(from, to string, k msg.Kind, req uint64, name string, newest bool) bool {
	for i := range c.sent {
		p := c.sent[i]
		if newest {
			p = c.sent[len(c.sent)-1-i]
		}
		if p.from.Name == from && c.names[p.to] == to && p.m.Kind == k && p.m.Req == req && (name == "" || p.m.Name == name) {
			c.tracef("replay %s->%s %s", from, to, p.m)
			c.flight = append(c.flight, packet{from: p.from, to: p.to, m: copyMsg(p.m)})
			return true
		}
	}
	return false
}

// Reregister gives client j a new registration in the same process (the
// host does this when its ID becomes invalid: agent/ftn/host's
// ftn_reregister): a new machine, same name and address, request
// numbers from 1 again.
func (c *Cluster) Reregister(j int) error {
	c.record(c.clients[j].peer.Name, eventlog.Event{Kind: "ftn_reregister"})
	return c.StartClient(j)
}

func (c *Cluster) collectServer(i int) {
	n := c.servers[i]
	outs, evs := n.s.Ready()
	for _, e := range evs {
		c.tracef("%s %s", n.peer.Name, e)
		c.record(n.peer.Name, ftnlog.Machine(e))
	}
	c.sendAll(n.peer, outs)
}

func (c *Cluster) collectClient(j int) {
	n := c.clients[j]
	rd := n.c.Ready()
	for _, e := range rd.Events {
		if e.Kind != "global" {
			c.tracef("%s %s", n.peer.Name, e)
		}
		c.record(n.peer.Name, ftnlog.Machine(e))
	}
	for _, r := range rd.Done {
		res := ftnlog.Fail
		if r.OK() {
			res = ftnlog.OK
		}
		st := r.Status.String()
		if r.Err != "" {
			st = r.Err
		}
		line := fmt.Sprintf("%s done req=%d %s: %s", n.peer.Name, r.Req, r.Op, st)
		if !r.Fence.IsZero() && r.Op.Kind == msg.Acquire {
			line += " fence=" + r.Fence.String()
		}
		if r.Op.Kind == msg.GetData && r.OK() {
			line += fmt.Sprintf(" data=%q", r.Data)
		}
		c.tracef("%s", line)
		c.record(n.peer.Name, ftnlog.Completion(n.c.ID(), r.Req, r.Op.Kind, r.Op.Name, r.Op.Mode, res, st, r.Fence, r.Data).Event(ftnlog.Complete))
		delete(n.ops, r.Req)
	}
	c.sendAll(n.peer, rd.Out)
}

// Step runs one round.
func (c *Cluster) Step() {
	c.tick++
	flight := append(c.flight, c.late[c.tick]...)
	delete(c.late, c.tick)
	c.flight = nil
	for _, p := range flight {
		to := c.names[p.to]
		link := [2]string{p.from.Name, to}
		if c.held[link] {
			c.heldPkts = append(c.heldPkts, p)
			continue
		}
		if k := (dropKey{link, p.m.Kind}); c.drops[k] > 0 {
			c.drops[k]--
			c.tracef("lost %s->%s %s", p.from.Name, to, p.m)
			continue
		}
		if c.cut[link] || (c.Loss > 0 && c.rnd.Float64() < c.Loss) {
			continue
		}
		for i, n := range c.servers {
			if n.peer.Addr == p.to && n.s != nil {
				n.s.Step(p.from, p.m)
				c.collectServer(i)
			}
		}
		for j, n := range c.clients {
			if n.peer.Addr == p.to && n.c != nil {
				n.c.Step(p.from, p.m)
				c.collectClient(j)
			}
		}
	}
	for i, n := range c.servers {
		if n.s != nil {
			n.s.Tick()
			c.collectServer(i)
		}
	}
	for j, n := range c.clients {
		if n.c != nil {
			n.c.Tick()
			c.collectClient(j)
		}
	}
}

// Run runs n rounds.
func (c *Cluster) Run(n int) {
	for range n {
		c.Step()
	}
}

// Status describes every process's view.
func (c *Cluster) Status() string {
	var b strings.Builder
	for i, n := range c.servers {
		if n.s == nil {
			fmt.Fprintf(&b, "%s: crashed\n", n.peer.Name)
			continue
		}
		s := n.s
		role := "follower"
		if s.IsLeader() {
			role = "leader"
		}
		fmt.Fprintf(&b, "%s: %s term=%d %s serving=%v inc=%d %s\n", n.peer.Name, role, s.Term(), s.State(), s.Serving(), s.Inc(), s.Global())
		for _, name := range s.Tokens() {
			var hs []string
			for _, h := range s.Holders(name) {
				hs = append(hs, fmt.Sprintf("%s:%s:%s", msg.IDString(h.Client), h.Mode, h.Fence))
			}
			fmt.Fprintf(&b, "  %s [%s]\n", name, strings.Join(hs, " "))
		}
		_ = i
	}
	for _, n := range c.clients {
		if n.c == nil {
			fmt.Fprintf(&b, "%s: crashed\n", n.peer.Name)
			continue
		}
		cl := n.c
		st := "registered"
		switch {
		case cl.Invalid():
			st = "invalid"
		case !cl.Registered():
			st = "unregistered"
		}
		hs := cl.Holds()
		var names []string
		for name := range hs {
			names = append(names, name)
		}
		slices.Sort(names)
		var parts []string
		for _, name := range names {
			parts = append(parts, fmt.Sprintf("%s:%s:%s", name, hs[name].Mode, hs[name].Fence))
		}
		fmt.Fprintf(&b, "%s: %s %s holds=[%s] pending=%d\n", n.peer.Name, msg.IDString(cl.ID()), st, strings.Join(parts, " "), cl.Pending())
	}
	return strings.TrimRight(b.String(), "\n")
}

// Owner is the server of name under the states the cluster's leader
// (or, without one, the first live server) holds.
func (c *Cluster) Owner(name string) int {
	for _, n := range c.servers {
		if n.s != nil && n.s.IsLeader() {
			g := n.s.Global()
			return g.Owner(name)
		}
	}
	return -1
}

// ServerIndex returns the index of the server named name.
func (c *Cluster) ServerIndex(name string) int {
	for i, n := range c.servers {
		if n.peer.Name == name {
			return i
		}
	}
	return -1
}

// ClientIndex returns the index of the client named name.
func (c *Cluster) ClientIndex(name string) int {
	for j, n := range c.clients {
		if n.peer.Name == name {
			return j
		}
	}
	return -1
}

// Phantoms lists the holds that a server lists and their client does not
// believe it has: a grant the client never awaited (an old request
// applied late), which it will never release. Holders whose ID no live
// client has (a crashed life, until the leader drops it) are not
// phantoms.
func (c *Cluster) Phantoms() []string {
	believes := map[uint64]map[string]bool{}
	for _, n := range c.clients {
		if n.c != nil && n.c.Registered() {
			hs := map[string]bool{}
			for name := range n.c.Holds() {
				hs[name] = true
			}
			believes[n.c.ID()] = hs
		}
	}
	var ps []string
	for _, n := range c.servers {
		if n.s == nil || !n.s.Serving() {
			continue
		}
		for _, name := range n.s.Tokens() {
			for _, h := range n.s.Holders(name) {
				if hs, live := believes[h.Client]; live && !hs[name] {
					ps = append(ps, fmt.Sprintf("%s: %s %s %s", n.peer.Name, name, msg.IDString(h.Client), h.Fence))
				}
			}
		}
	}
	return ps
}
