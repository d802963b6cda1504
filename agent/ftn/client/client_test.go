package client

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"

	"tokenbed/agent/ftn/msg"
)

// The perf experiments' client timing: 20 ticks between repeats.
const retry = 20

func servers(n int) []msg.Peer {
	var ps []msg.Peer
	for i := range n {
		ps = append(ps, msg.Peer{Name: fmt.Sprintf("s%d", i), Addr: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)}), 7000)})
	}
	return ps
}

func global(version uint64, states ...msg.State) *msg.Global {
	g := &msg.Global{Term: 1, Version: 1<<32 | version, Leader: 0}
	for _, st := range states {
		g.Servers = append(g.Servers, msg.ServerState{State: st, Inc: 1})
	}
	return g
}

// registered returns a client registered with s0, every server READY,
// after ticks ticks.
func registered(t *testing.T, ticks int) *Client {
	t.Helper()
	c, err := New(Config{Servers: servers(3), HeartbeatTicks: 30, RetryTicks: retry, LeaderSilentTicks: 60})
	if err != nil {
		t.Fatal(err)
	}
	c.Step(c.cfg.Servers[0], msg.Msg{Kind: msg.Registered, Client: 1<<32 | 1, RegVersion: 1<<32 | 2, Global: global(2, msg.Ready, msg.Ready, msg.Ready)})
	if !c.Registered() {
		t.Fatal("not registered")
	}
	for range ticks {
		c.Tick()
	}
	c.Ready()
	return c
}

// sends returns the ticks at which the client sent op kind k to a
// server during the next n ticks, the current one included (what is
// pending in Ready now).
func sends(c *Client, k msg.Kind, n int, step func(tick int64)) []int64 {
	var at []int64
	collect := func() {
		for _, o := range c.Ready().Out {
			if o.Msg.Kind == k {
				at = append(at, c.tick)
			}
		}
	}
	collect()
	for range n {
		c.Tick()
		if step != nil {
			step(c.tick)
		}
		collect()
	}
	return at
}

// TestRepeatAfterRetryTicks: an operation sent at tick k is repeated at
// k+RetryTicks, k+2·RetryTicks, ... and never earlier, whatever k is
// modulo RetryTicks (001 "Communication": unanswered requests are
// repeated). On the tick grid it was repeated at the next multiple of
// RetryTicks: one tick after it was sent, for k = 19.
func TestRepeatAfterRetryTicks(t *testing.T) {
	for k := int64(0); k < retry; k++ {
		c := registered(t, int(k))
		c.Invoke(Op{Kind: msg.Acquire, Name: "a", Mode: msg.Exclusive})
		got := sends(c, msg.Acquire, 3*retry, nil)
		want := []int64{k, k + retry, k + 2*retry, k + 3*retry}
		if !slices.Equal(got, want) {
			t.Errorf("invoked at %d: sent at %v, want %v", k, got, want)
		}
	}
}

// TestAnsweredNotRepeated: an answer stops the repeats.
func TestAnsweredNotRepeated(t *testing.T) {
	c := registered(t, 7)
	req := c.Invoke(Op{Kind: msg.Acquire, Name: "a", Mode: msg.Exclusive})
	owner := c.g.Owner("a")
	got := sends(c, msg.Acquire, 3*retry, func(tick int64) {
		if tick == 7+retry+5 {
			c.Step(c.cfg.Servers[owner], msg.Msg{Kind: msg.Reply, Client: c.id, RegVersion: c.regVersion, Req: req, Name: "a", Status: msg.OK,
				Fence: msg.Fence{Epoch: c.g.Version, Counter: 1}, Inc: 1, Server: owner, Version: c.g.Version})
		}
	})
	if want := []int64{7, 7 + retry}; !slices.Equal(got, want) {
		t.Errorf("sent at %v, want %v", got, want)
	}
	if c.Pending() != 0 || c.Holds()["a"].Fence.Counter != 1 {
		t.Errorf("pending %d, holds %v: want the grant", c.Pending(), c.Holds())
	}
}

// TestRedirectRestartsRetry: a redirect to the name's new server (a
// newer global state says its server is DOWN) is a send: the next
// repeat is RetryTicks after it, not after the first send.
func TestRedirectRestartsRetry(t *testing.T) {
	c := registered(t, 3)
	c.Invoke(Op{Kind: msg.Acquire, Name: "a", Mode: msg.Exclusive})
	owner := c.g.Owner("a")
	states := []msg.State{msg.Ready, msg.Ready, msg.Ready}
	states[owner] = msg.Down
	const moved = 3 + 12
	var to []netip.AddrPort
	got := sends(c, msg.Acquire, 2*retry, func(tick int64) {
		if tick == moved {
			c.Step(c.cfg.Servers[0], msg.Msg{Kind: msg.HeartbeatAck, Version: 1<<32 | 3, Global: global(3, states...)})
		}
		for _, o := range c.rd.Out {
			if o.Msg.Kind == msg.Acquire {
				to = append(to, o.To)
			}
		}
	})
	if want := []int64{3, moved, moved + retry}; !slices.Equal(got, want) {
		t.Errorf("sent at %v, want %v", got, want)
	}
	if n := c.g.Owner("a"); len(to) != 2 || to[0] != c.cfg.Servers[n].Addr || to[1] != c.cfg.Servers[n].Addr {
		t.Errorf("after the move sent to %v, want twice s%d", to, n)
	}
}

// Every invalid field is reported, named as the configuration file
// spells it; zeros take the defaults.
func TestConfigValidate(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"defaults", Config{Servers: servers(1)}, ""},
		{"no servers", Config{}, "servers: empty"},
		{"negative heartbeat", Config{Servers: servers(1), HeartbeatTicks: -1}, "heartbeat_ticks: -1 < 0"},
		{"negative retry", Config{Servers: servers(1), RetryTicks: -2}, "retry_ticks: -2 < 0"},
		{"negative leader silence", Config{Servers: servers(1), LeaderSilentTicks: -3}, "leader_silent_ticks: -3 < 0"},
		{"all at once", Config{HeartbeatTicks: -1, RetryTicks: -2},
			"servers: empty\nheartbeat_ticks: -1 < 0\nretry_ticks: -2 < 0"},
	} {
		got := ""
		if err := c.cfg.Validate(); err != nil {
			got = err.Error()
		}
		if got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
	c, err := New(Config{Servers: servers(2)})
	if err != nil || c.cfg.HeartbeatTicks != 3 || c.cfg.RetryTicks != 2 || c.cfg.LeaderSilentTicks != 6 {
		t.Errorf("defaults: %v %+v", err, c.cfg)
	}
}
