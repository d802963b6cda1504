package ipv4frag_test

import (
	"bytes"
	"net"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"tokenbed/internal/pcapread/ipv4frag"
)

// fragment decodes one fragment of a 24-byte payload, as a capture reader
// does with a reused layer.
func fragment(t *testing.T, into *layers.IPv4, off int, data []byte, more bool) {
	t.Helper()
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP, Id: 7, FragOffset: uint16(off / 8),
		SrcIP: net.IP{10, 0, 0, 1}, DstIP: net.IP{10, 0, 0, 2}}
	if more {
		ip.Flags = layers.IPv4MoreFragments
	}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true}, ip, gopacket.Payload(data)); err != nil {
		t.Fatal(err)
	}
	if err := into.DecodeFromBytes(buf.Bytes(), gopacket.NilDecodeFeedback); err != nil {
		t.Fatal(err)
	}
}

// One datagram's fragments seen on two interfaces, interleaved and out of
// order, make it once on each; a contradictory fragment makes none.
func TestReassemble(t *testing.T) {
	payload := []byte("0123456789abcdefghijklmn")
	var r ipv4frag.Reassembler
	var ip layers.IPv4 // reused, as a DecodingLayerParser's
	t0 := time.Unix(1, 0)
	steps := []struct {
		iface, off int
		more       bool
		whole      bool
	}{
		{0, 16, false, false},
		{1, 0, true, false},
		{0, 0, true, false},
		{0, 0, true, false}, // a repeat: ignored, but counted
		{1, 16, false, false},
		{0, 8, true, true},
		{1, 8, true, true},
	}
	for i, s := range steps {
		fragment(t, &ip, s.off, payload[s.off:min(s.off+8, len(payload))], s.more)
		if !ipv4frag.IsFragment(&ip) {
			t.Fatalf("step %d: not a fragment", i)
		}
		whole, n, err := r.Add(s.iface, &ip, t0)
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if (whole != nil) != s.whole {
			t.Fatalf("step %d: whole %v, want %v", i, whole != nil, s.whole)
		}
		if whole != nil {
			wantN := map[int]int{0: 4, 1: 3}[s.iface]
			if !bytes.Equal(whole.Payload, payload) || n != wantN || whole.Protocol != layers.IPProtocolUDP {
				t.Errorf("step %d: payload %q from %d fragments, want %q from %d", i, whole.Payload, n, payload, wantN)
			}
		}
	}

	fragment(t, &ip, 0, payload[:16], true)
	if whole, _, err := r.Add(0, &ip, t0); whole != nil || err != nil {
		t.Fatalf("first fragment: %v, %v", whole, err)
	}
	fragment(t, &ip, 8, payload[:16], true) // overlaps with other bytes
	if whole, _, err := r.Add(0, &ip, t0); whole != nil || err == nil {
		t.Errorf("overlapping fragment: %v, %v; want an error", whole, err)
	}

	whole := layers.IPv4{}
	fragment(t, &whole, 0, payload, false)
	if ipv4frag.IsFragment(&whole) {
		t.Error("a whole datagram is a fragment")
	}
}

// A datagram whose fragments stop coming is forgotten after Timeout, as a
// receiver forgets it: its late last fragment makes nothing, and nothing
// of it stays in memory. One completed within Timeout is reassembled.
func TestIncompleteDatagramExpires(t *testing.T) {
	payload := []byte("0123456789abcdefghijklmn")
	var r ipv4frag.Reassembler
	var ip layers.IPv4
	t0 := time.Unix(1, 0)
	fragment(t, &ip, 0, payload[:8], true)
	if whole, _, err := r.Add(0, &ip, t0); whole != nil || err != nil {
		t.Fatalf("first fragment: %v, %v", whole, err)
	}
	fragment(t, &ip, 8, payload[8:16], true)
	if whole, _, err := r.Add(0, &ip, t0.Add(ipv4frag.Timeout-time.Second)); whole != nil || err != nil {
		t.Fatalf("second fragment: %v, %v", whole, err)
	}
	// The last fragment, more than Timeout after the second: the first
	// two are gone, so it starts a datagram of its own.
	fragment(t, &ip, 16, payload[16:], false)
	late := t0.Add(2*ipv4frag.Timeout + time.Second)
	if whole, _, err := r.Add(0, &ip, late); whole != nil || err != nil {
		t.Fatalf("late fragment: %v, %v; want nothing", whole, err)
	}
	if r.Expired != 1 || r.Pending() != 1 {
		t.Errorf("expired %d, pending %d; want 1 and 1 (the late fragment)", r.Expired, r.Pending())
	}
	// Later, the late fragment's own datagram expires too.
	fragment(t, &ip, 0, payload[:8], true)
	ip.Id = 8 // another datagram, to drive the sweep
	if _, _, err := r.Add(0, &ip, late.Add(ipv4frag.Timeout+time.Second)); err != nil {
		t.Fatal(err)
	}
	if r.Expired != 2 || r.Pending() != 1 {
		t.Errorf("expired %d, pending %d; want 2 and 1", r.Expired, r.Pending())
	}
}
