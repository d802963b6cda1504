package msg

import (
	"encoding/json"
	"net/netip"
	"reflect"
	"strings"
	"testing"
)

func global3() Global {
	return Global{Term: 2, Version: 2<<32 | 5, Leader: 1,
		Servers: []ServerState{{Ready, 1}, {Ready, 7}, {Down, 3}},
		Clients: []ClientEntry{
			{ID: 1<<32 | 1, Name: "c0", Addr: netip.MustParseAddrPort("10.0.1.1:7000"), RegVersion: 1<<32 | 2},
			{ID: 2<<32 | 1, Name: "c1", Addr: netip.MustParseAddrPort("[fd00::5]:7001"), RegVersion: 2<<32 | 3},
		}}
}

// Every kind survives the datagram's JSON body with every field it uses
// (the codec sends msg.Msg as JSON; a field lost here is lost on the
// wire).
func TestMsgRoundTrip(t *testing.T) {
	g := global3()
	f := Fence{Epoch: 2<<32 | 4, Counter: 9}
	msgs := []Msg{
		{Kind: VoteReq, Term: 3, Version: g.Version, Pre: true},
		{Kind: VoteResp, Term: 3, Granted: true},
		{Kind: StateMsg, Term: 2, Global: &g, Commit: g.Version - 1},
		{Kind: Heartbeat, Term: 2, State: Booting, Inc: 12, Version: g.Version},
		{Kind: Transfer, Version: g.Version, Inc: 12, Tokens: []TokenState{{Name: "a", Fence: f, Data: []byte("d"),
			Holders: []Hold{{Client: 1<<32 | 1, Name: "a", Mode: Shared, Fence: f, Req: 4}},
			Queue:   []Waiter{{Client: 2<<32 | 1, Mode: Exclusive, Req: 2}},
			Marks:   []ReqMark{{Client: 1<<32 | 1, Name: "a", Req: 4, Done: true}}}}},
		{Kind: TransferAck, Version: g.Version, Inc: 12},
		{Kind: Register, Nonce: 77},
		{Kind: ClientHeartbeat, Client: 1<<32 | 1, RegVersion: 1<<32 | 2, Version: g.Version, Term: 2, Beat: 40},
		{Kind: Close, Client: 1<<32 | 1, RegVersion: 1<<32 | 2},
		{Kind: Acquire, Client: 1<<32 | 1, RegVersion: 1<<32 | 2, Version: g.Version, Req: 5, Name: "a", Mode: Exclusive},
		{Kind: Release, Client: 1<<32 | 1, Req: 6, Name: "a", Fence: f},
		{Kind: SetData, Client: 1<<32 | 1, Req: 7, Name: "a", Data: []byte{0, 1, 255}},
		{Kind: GetData, Client: 1<<32 | 1, Req: 8, Name: "a"},
		{Kind: QueryReply, Client: 1<<32 | 1, Version: g.Version, Req: 8,
			Holds: []Hold{{Client: 1<<32 | 1, Name: "a", Mode: Exclusive, Fence: f, Req: 5, Data: []byte("x")}},
			Marks: []ReqMark{{Client: 1<<32 | 1, Name: "b", Req: 8}}},
		{Kind: Registered, Client: 1<<32 | 1, RegVersion: 1<<32 | 2, Version: g.Version, Global: &g},
		{Kind: Redirect, Server: -1, Version: g.Version},
		{Kind: HeartbeatAck, Term: 2, Beat: 41, Version: g.Version, Global: &g},
		{Kind: Query, Version: g.Version, Server: 2, Inc: 12, Global: &g},
		{Kind: Reply, Client: 1<<32 | 1, RegVersion: 1<<32 | 2, Req: 5, Name: "a", Status: NotHolder, Fence: f, Data: []byte(""), Inc: 12, Server: 1, Version: g.Version},
	}
	seen := map[Kind]bool{}
	for _, m := range msgs {
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatalf("%s: %v", m.Kind, err)
		}
		var got Msg
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("%s: %v", m.Kind, err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Errorf("%s: round trip\n got %+v\nwant %+v", m.Kind, got, m)
		}
		if s := m.String(); !strings.HasPrefix(s, m.Kind.String()) {
			t.Errorf("%s: String %q", m.Kind, s)
		}
		seen[m.Kind] = true
	}
	for k := Kind(0); k < 64; k++ {
		if k.Valid() && !seen[k] {
			t.Errorf("kind %s has no round trip case", k)
		}
	}
}

// Only servers send server kinds: Step trusts FromServer to route a
// message to the server roles (a client's datagram never reaches them).
func TestKinds(t *testing.T) {
	server := []Kind{VoteReq, VoteResp, StateMsg, Heartbeat, Transfer, TransferAck, Registered, Redirect, HeartbeatAck, Query, Reply}
	client := []Kind{Register, ClientHeartbeat, Close, Acquire, Release, SetData, GetData, QueryReply}
	for _, k := range server {
		if !k.Valid() || !k.FromServer() {
			t.Errorf("%s: valid %v, from a server %v", k, k.Valid(), k.FromServer())
		}
	}
	for _, k := range client {
		if !k.Valid() || k.FromServer() {
			t.Errorf("%s: valid %v, from a server %v", k, k.Valid(), k.FromServer())
		}
	}
	if n := len(kindNames); n != len(server)+len(client) {
		t.Errorf("%d kinds named, %d classified here", n, len(server)+len(client))
	}
	if Kind(0).Valid() || Kind(99).Valid() || Kind(99).String() != "Kind(99)" {
		t.Error("kinds 0 and 99: want invalid, printed by number")
	}
}

// A global state that does not fit the shared server list is refused
// with the field at fault named (001 "Configuration").
func TestGlobalCheck(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(*Global)
		n    int
		want string // "" : valid
	}{
		{"valid", func(*Global) {}, 3, ""},
		{"no leader", func(g *Global) { g.Leader = -1 }, 3, ""},
		{"no clients", func(g *Global) { g.Clients = nil }, 3, ""},
		{"a longer list", func(g *Global) {}, 4, "servers: 3 entries, the server list has 4"},
		{"a shorter list", func(g *Global) {}, 2, "servers: 3 entries, the server list has 2"},
		{"leader beyond the list", func(g *Global) { g.Leader = 3 }, 3, "leader: 3 not in -1..2"},
		{"leader below -1", func(g *Global) { g.Leader = -2 }, 3, "leader: -2 not in -1..2"},
		{"unknown state", func(g *Global) { g.Servers[2].State = 7 }, 3, "servers[2].state: State(7)"},
		{"clients out of order", func(g *Global) { g.Clients[0], g.Clients[1] = g.Clients[1], g.Clients[0] }, 3,
			"clients[1].id: c1.1 not above clients[0]'s c2.1"},
		{"a client twice", func(g *Global) { g.Clients[1].ID = g.Clients[0].ID }, 3, "clients[1].id: c1.1 not above clients[0]'s c1.1"},
	} {
		g := global3()
		c.edit(&g)
		err := g.Check(c.n)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

func TestGlobalClientAndOwner(t *testing.T) {
	g := global3()
	if c, ok := g.Client(2<<32 | 1); !ok || c.Name != "c1" {
		t.Errorf("client c2.1: %+v %v", c, ok)
	}
	if _, ok := g.Client(3); ok {
		t.Error("client 3: found, not listed")
	}
	// "f" runs 1 2 0: s1 is READY.
	if o := g.Owner("f"); o != 1 {
		t.Errorf("owner of f: %d, want 1", o)
	}
	c := g.Clone()
	c.Servers[0].State = Down
	c.Clients[0].Name = "x"
	if g.Servers[0].State != Ready || g.Clients[0].Name != "c0" {
		t.Error("Clone shares its slices with the original")
	}
	if s := g.String(); s != "v=2.5 leader=1 servers=[READY/1 READY/7 DOWN/3] clients=[c1.1 c2.1]" {
		t.Errorf("String: %q", s)
	}
}

func TestFenceOrder(t *testing.T) {
	a := Fence{Epoch: 1<<32 | 9, Counter: 5}
	b := Fence{Epoch: 1<<32 | 10, Counter: 1}
	c := Fence{Epoch: 1<<32 | 10, Counter: 2}
	if a.Compare(b) >= 0 || b.Compare(c) >= 0 || c.Compare(a) <= 0 || b.Compare(b) != 0 {
		t.Error("fences order by epoch, then counter")
	}
	if !(Fence{}).IsZero() || a.IsZero() || a.String() != "1.9#5" {
		t.Errorf("zero, String: %v %q", a.IsZero(), a)
	}
}
