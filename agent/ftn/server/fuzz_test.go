package server

import (
	"encoding/json"
	"net/netip"
	"testing"

	"tokenbed/agent/ftn/msg"
)

// FuzzStep: any authenticated message, from a server or a client, is
// handled or ignored, never a panic (a server with another server list,
// a client with garbage).
func FuzzStep(f *testing.F) {
	peers := []msg.Peer{{Name: "s0", Addr: netip.MustParseAddrPort("10.0.0.1:7000")}, {Name: "s1", Addr: netip.MustParseAddrPort("10.0.0.2:7000")}}
	for _, m := range []msg.Msg{
		{Kind: msg.StateMsg, Term: 1, Global: &msg.Global{Leader: 1, Servers: make([]msg.ServerState, 2)}},
		{Kind: msg.Acquire, Client: 1 << 32, Name: "a", Mode: msg.Exclusive},
		{Kind: msg.Transfer, Tokens: []msg.TokenState{{Name: "a", Holders: []msg.Hold{{Client: 1}}}}},
		{Kind: msg.VoteReq, Term: 3, Pre: true},
		{Kind: msg.Transfer, Tokens: []msg.TokenState{{Name: "a", Marks: []msg.ReqMark{{Client: 1, Name: "a", Req: 9, Done: true}}}}},
		{Kind: msg.QueryReply, Client: 1 << 32, Req: 7, Marks: []msg.ReqMark{{Client: 1 << 32, Name: "a", Req: 7}}},
	} {
		b, _ := json.Marshal(m)
		f.Add(b, true)
	}
	f.Fuzz(func(t *testing.T, b []byte, fromServer bool) {
		var m msg.Msg
		if json.Unmarshal(b, &m) != nil {
			return
		}
		s, err := New(Config{Self: 0, Servers: peers, Inc: 1, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		from := msg.Peer{Name: "c9", Addr: netip.MustParseAddrPort("10.0.1.1:7000")}
		if fromServer {
			from = peers[1]
		}
		for range 3 {
			s.Step(from, m)
			s.Tick()
			s.Ready()
		}
	})
}
