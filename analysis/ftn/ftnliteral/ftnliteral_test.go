package ftnliteral

import (
	"bytes"
	"errors"
	"io"
	"net/netip"
	"strings"
	"testing"
	"time"

	"tokenbed/agent/ftn/codec"
	"tokenbed/agent/ftn/msg"
	"tokenbed/internal/pcapread"
)

// datagram is one FTN datagram read back from a literal capture.
type datagram struct {
	iface     int
	at        time.Time
	src, dst  netip.AddrPort
	m         msg.Msg
	verified  error // the signature checked against the run's CA
	fragments int   // the IPv4 fragments it was reassembled from; 0: whole
}

// readBack reads c's datagrams (reassembled from their fragments) and its
// annotations through the capture reader the analyses use, and counts
// its records.
func readBack(t *testing.T, c *Capture) (ds []datagram, anns []string, records int) {
	t.Helper()
	r, err := pcapread.NewReader(bytes.NewReader(c.Pcapng))
	if err != nil {
		t.Fatal(err)
	}
	opener := codec.NewOpener(c.CA)
	for {
		p, err := r.Next()
		if errors.Is(err, io.EOF) {
			return ds, anns, r.Stats().Records
		}
		if err != nil {
			t.Fatal(err)
		}
		if p.Annotation != nil {
			anns = append(anns, string(p.Annotation))
			continue
		}
		if p.DecodeErr != nil {
			t.Fatalf("record %d: %v", p.Record, p.DecodeErr)
		}
		if p.UDP == nil {
			continue // a fragment of a datagram not yet whole
		}
		src := netip.AddrPortFrom(p.Src, uint16(p.UDP.SrcPort))
		dst := netip.AddrPortFrom(p.Dst, uint16(p.UDP.DstPort))
		d, err := codec.Split(p.UDP.Payload)
		if err != nil {
			t.Fatal(err)
		}
		m, err := d.Message()
		if err != nil {
			t.Fatal(err)
		}
		_, verr := opener.Verify(d, src, dst, p.Time)
		ds = append(ds, datagram{p.Iface, p.Time, src, dst, m, verr, p.Fragments})
	}
}

// TestFields: the keys set the fields the package documents, v= by kind,
// and each datagram is seen at both ends unless lost; a forged one fails
// the check against the run's CA.
func TestFields(t *testing.T) {
	c, err := Build(`
0.010 s0>s1 VoteReq term=3 v=2.7
0.020 s0>c0 HeartbeatAck v=2.3 servers=READY/4,DOWN/5 clients=1.1-1.3,1.9 lost
0.030 c0>s0 Acquire id=1.2 req=4 name=a mode=s forged
0.040 harness partition peer=s1
0.050 s0>c0 Reply id=1.2 req=4 name=a status=not-holder fence=2.3#5 server=0 inc=4
`, "test", Options{})
	if err != nil {
		t.Fatal(err)
	}
	ds, anns, records := readBack(t, c)
	// 2 + 1 + 2 + 2 datagram sightings and the annotation.
	if len(ds) != 7 || records != 8 {
		t.Fatalf("%d datagrams in %d records, want 7 in 8", len(ds), records)
	}
	if len(anns) != 1 || !strings.Contains(anns[0], `"kind":"partition"`) || !strings.Contains(anns[0], `"peer":"s1"`) {
		t.Errorf("annotations %q, want the partition of s1", anns)
	}
	vote, ack, acq, reply := ds[0].m, ds[2].m, ds[3].m, ds[5].m
	if vote.Kind != msg.VoteReq || vote.Term != 3 || vote.Version != 2<<32|7 || vote.Global != nil {
		t.Errorf("VoteReq: %+v, want term 3 and Version 2.7", vote)
	}
	if g := ack.Global; ack.Version != 0 || g == nil || g.Version != 2<<32|3 || len(g.Servers) != 2 ||
		g.Servers[1] != (msg.ServerState{State: msg.Down, Inc: 5}) || len(g.Clients) != 4 || g.Clients[3].ID != 1<<32|9 {
		t.Errorf("HeartbeatAck: %+v, want the global state's version 2.3, 2 servers, 4 clients", ack)
	}
	if acq.Client != 1<<32|2 || acq.Req != 4 || acq.Name != "a" || acq.Mode != msg.Shared {
		t.Errorf("Acquire: %+v", acq)
	}
	if reply.Status != msg.NotHolder || reply.Fence != (msg.Fence{Epoch: 2<<32 | 3, Counter: 5}) || reply.Inc != 4 {
		t.Errorf("Reply: %+v", reply)
	}
	for i, d := range ds {
		if forged := d.m.Kind == msg.Acquire; (d.verified != nil) != forged {
			t.Errorf("datagram %d (%s): verified %v, want forged=%v", i, d.m.Kind, d.verified, forged)
		}
	}
	// s0 is member 0 (10.0.0.1), s1 member 1, c0 member 2.
	if ds[0].iface != 0 || ds[1].iface != 1 || ds[1].at.Sub(ds[0].at) != 200*time.Microsecond || ds[2].dst.Addr() != netip.MustParseAddr("10.0.0.3") {
		t.Errorf("interfaces or addresses: %+v", ds[:3])
	}
}

// TestFragmented: a fragmented datagram is FragmentSize bytes a fragment,
// and its fragments reassemble into it at both ends.
func TestFragmented(t *testing.T) {
	for _, size := range []int{0, 64} {
		c, err := Build("0.010 c0>s0 Release id=1.1 req=2 name=a fence=1.5#1 fragmented", "test", Options{FragmentSize: size})
		if err != nil {
			t.Fatal(err)
		}
		ds, _, records := readBack(t, c)
		if len(ds) != 2 || ds[0].m.Kind != msg.Release || ds[1].m.Kind != msg.Release || ds[0].m.Name != "a" {
			t.Fatalf("fragment size %d: datagrams %+v, want the Release at both ends", size, ds)
		}
		if size == 0 && (records != 2 || ds[0].fragments != 0 || ds[1].fragments != 0) {
			t.Errorf("MTU 1500: %d records, fragments %d and %d; want a small datagram whole at both ends", records, ds[0].fragments, ds[1].fragments)
		}
		if size == 64 && (records < 4 || ds[0].fragments < 2 || records != ds[0].fragments+ds[1].fragments) {
			t.Errorf("64-byte fragments: %d records, datagrams of %d and %d fragments; want every record a fragment", records, ds[0].fragments, ds[1].fragments)
		}
	}
}

// TestErrors: a bad line is an error naming its position and line.
func TestErrors(t *testing.T) {
	for _, tc := range []struct{ line, want string }{
		{"0.010 s0>s1", "want TIME FROM>TO KIND"},
		{"x s0>s1 State", "invalid syntax"},
		{"0.010 s0 State", "want FROM>TO"},
		{"0.010 s0>s1 Nope", `unknown kind "Nope"`},
		{"0.010 s0>s1 State colour=red", `unknown key "colour"`},
		{"0.010 s0>s1 State servers=UP/1", "servers=UP/1: servers=UP: unknown value"},
		{"0.010 s0>c0 Reply status=maybe", "status=maybe: unknown value"},
		{"0.010 c0>s0 Acquire id=12", `id=12: "12": want TERM.N`},
		{"0.010 s0>c0 Reply broken=badly", "broken=badly: want json or version"},
		{"0.010 harness partition who=s1", `unknown key "who"`},
	} {
		_, err := Build("0.001 s0>s1 State\n"+tc.line, "f.txt:3", Options{})
		if err == nil || !strings.HasPrefix(err.Error(), "f.txt:3: line 2: ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want f.txt:3: line 2: ...%s", tc.line, err, tc.want)
		}
	}
	if _, err := Build("0.001 s0>s1 State", "f", Options{FragmentSize: 100}); err == nil {
		t.Error("fragment size 100: no error, want one (not a multiple of 8)")
	}
}
