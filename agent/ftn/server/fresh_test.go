package server

import (
	"net/netip"
	"testing"

	"tokenbed/agent/ftn/msg"
)

// oneServer returns a one-server service from cfg's template, READY and
// leading.
func oneServer(tb testing.TB, cfg Config) *Server {
	tb.Helper()
	self := msg.Peer{Name: "s0", Addr: netip.MustParseAddrPort("10.0.0.1:7000")}
	cfg.Servers, cfg.Inc, cfg.Seed = []msg.Peer{self}, 1, 1
	s, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	for i := 0; i < 100 && !s.Serving(); i++ {
		s.Tick()
		s.Ready()
	}
	if !s.Serving() {
		tb.Fatal("not serving")
	}
	return s
}

// registerClient registers c and returns the Registered message.
func registerClient(tb testing.TB, s *Server, c msg.Peer) msg.Msg {
	tb.Helper()
	s.Step(c, msg.Msg{Kind: msg.Register, Nonce: 1})
	out, _ := s.Ready()
	for _, o := range out {
		if o.Msg.Kind == msg.Registered {
			return o.Msg
		}
	}
	tb.Fatalf("%s not registered: %v", c.Name, out)
	return msg.Msg{}
}

// TestNewAcquireOfListedHolder: a client that the server lists as a
// shared holder of f asks for f with a new request (it does not know of
// that hold: a phantom, however it came about). The server must not
// answer with the hold's fence, lower than the one granted since to
// another client: the hold ends and the request gets a new fence.
func TestNewAcquireOfListedHolder(t *testing.T) {
	s := oneServer(t, Config{})
	c0 := msg.Peer{Name: "c0", Addr: netip.MustParseAddrPort("10.0.1.1:7000")}
	c1 := msg.Peer{Name: "c1", Addr: netip.MustParseAddrPort("10.0.1.2:7000")}
	r0, r1 := registerClient(t, s, c0), registerClient(t, s, c1)
	acquire := func(c msg.Peer, reg msg.Msg, req uint64) msg.Fence {
		t.Helper()
		s.Step(c, msg.Msg{Kind: msg.Acquire, Client: reg.Client, RegVersion: reg.RegVersion, Version: s.Global().Version, Req: req, Name: "f", Mode: msg.Shared})
		out, _ := s.Ready()
		for _, o := range out {
			if o.Msg.Kind == msg.Reply && o.Msg.Client == reg.Client && o.Msg.Req == req {
				return o.Msg.Fence
			}
		}
		t.Fatalf("%s req=%d: no reply in %v", c.Name, req, out)
		return msg.Fence{}
	}
	f0 := acquire(c0, r0, 1)
	f1 := acquire(c1, r1, 1)
	again := acquire(c0, r0, 2)
	if again.Compare(f1) <= 0 {
		t.Errorf("c0's new acquire got %s, not above %s granted to c1 after c0's %s", again, f1, f0)
	}
	if hs := s.Holders("f"); len(hs) != 2 || hs[0].Client != r1.Client || hs[1].Fence != again {
		t.Errorf("holders %v, want c1's and c0's new hold only", hs)
	}
}
