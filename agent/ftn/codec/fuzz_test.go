package codec

import (
	"net/netip"
	"testing"

	"tokenbed/agent/ftn/msg"
)

// FuzzDecode: any bytes from the network are refused or opened, never a
// panic.
func FuzzDecode(f *testing.F) {
	dir := f.TempDir()
	s0 := member(f, dir, "s0", 1)
	c := New(s0)
	a := netip.MustParseAddrPort("10.0.0.1:7000")
	for _, m := range []msg.Msg{{Kind: msg.Acquire, Name: "a"}, {Kind: msg.StateMsg, Global: &msg.Global{Servers: make([]msg.ServerState, 3)}}} {
		d, err := c.Encode(m, a, a, t0)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(d)
	}
	f.Add([]byte("FT\x01"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c.Decode(b, a, a, t0)
	})
}
