package ftn

import (
	"bytes"
	"crypto/x509"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"tokenbed/agent/ca"
	"tokenbed/agent/ftn/codec"
	"tokenbed/agent/ftn/msg"
	"tokenbed/harness/capture"
)

// A literal capture is one datagram a line, in time order:
//
//	TIME FROM>TO KIND [key=value ...] [lost] [forged]
//
// TIME in seconds on the wall clock (the literal histories' clock: 0.010
// is wall_ns 10000000); KIND a msg.Kind name (Acquire, Release, Reply,
// State, ClientHeartbeat); keys id=TERM.N (client ID), req, name,
// mode=x|s, fence=TERM.SEQ#N, status=ok|id-invalid, v=TERM.SEQ (a State's
// version), clients=TERM.N,... (a State's client list), servers=STATE/INC,...
// (a global state's servers, by index), server=I and inc=N (a Reply's
// sender index and incarnation). Each datagram is
// captured leaving FROM's interface at TIME and arriving at TO's 0.2 ms
// later, as the harness captures both ends; "lost" keeps only the first,
// "forged" sends it under a certificate of another CA, "fragmented" sends
// it in IPv4 fragments.
//
// literalCapture encodes and signs each datagram (agent/ftn/codec, a CA
// seeded for the test) and writes the pcapng the simulator's capture
// writer would (harness/capture.Writer: raw IPv4, one interface per
// member, interface statistics at the end). It returns the file and the
// CA certificate.
func literalCapture(t *testing.T, text string, pos string) ([]byte, *x509.Certificate) {
	t.Helper()
	dir, forger := t.TempDir(), t.TempDir()
	// Valid from the epoch (literal times are small wall clocks) on, as
	// the simulator's credentials are.
	forever := time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)
	src := ca.Seeded(14, time.Unix(0, 0), forever)
	if err := ca.InitWith(dir, src); err != nil {
		t.Fatal(err)
	}
	fsrc := ca.Seeded(15, time.Unix(0, 0), forever)
	if err := ca.InitWith(forger, fsrc); err != nil {
		t.Fatal(err)
	}
	type rec struct {
		iface int
		at    time.Time
		data  []byte
	}
	var (
		names  []string
		codecs = map[string]*codec.Codec{}
		forged = map[string]*codec.Codec{}
		recs   []rec
	)
	member := func(n string) int {
		if i := slices.Index(names, n); i >= 0 {
			return i
		}
		for _, d := range []struct {
			dir string
			src *ca.Source
			m   map[string]*codec.Codec
		}{{dir, src, codecs}, {forger, fsrc, forged}} {
			if err := ca.IssueWith(d.dir, n, d.src); err != nil {
				t.Fatal(err)
			}
			c, err := ca.LoadMember(d.dir, n, filepath.Join(d.dir, ca.CACertFile))
			if err != nil {
				t.Fatal(err)
			}
			d.m[n] = codec.New(c)
		}
		names = append(names, n)
		return len(names) - 1
	}
	addr := func(i int) netip.AddrPort {
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)}), 7400)
	}
	for ln, line := range strings.Split(strings.TrimSpace(text), "\n") {
		bad := func(format string, a ...any) {
			t.Fatalf("%s: line %d: %q: %s", pos, ln+1, line, fmt.Sprintf(format, a...))
		}
		f := strings.Fields(line)
		if len(f) < 3 {
			bad("want TIME FROM>TO KIND")
		}
		sec, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			bad("%v", err)
		}
		from, to, ok := strings.Cut(f[1], ">")
		if !ok {
			bad("want FROM>TO")
		}
		fi, ti := member(from), member(to)
		m := msg.Msg{}
		for k := msg.Kind(1); k < 64; k++ {
			if k.Valid() && k.String() == f[2] {
				m.Kind = k
			}
		}
		if m.Kind == 0 {
			bad("unknown kind %q", f[2])
		}
		lost, forge, frag := false, false, false
		for _, kv := range f[3:] {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "lost":
				lost = true
			case "fragmented":
				frag = true
			case "forged":
				forge = true
			case "id":
				m.Client = literalID(v)
			case "req":
				m.Req, _ = strconv.ParseUint(v, 10, 64)
			case "name":
				m.Name = v
			case "mode":
				m.Mode = map[string]msg.Mode{"x": msg.Exclusive, "s": msg.Shared}[v]
			case "fence":
				e, n, _ := strings.Cut(v, "#")
				m.Fence.Epoch = literalID(e)
				m.Fence.Counter, _ = strconv.ParseUint(n, 10, 64)
			case "status":
				m.Status = map[string]msg.Status{"ok": msg.OK, "id-invalid": msg.IDInvalid, "not-holder": msg.NotHolder}[v]
			case "v":
				if m.Global == nil {
					m.Global = &msg.Global{}
				}
				m.Global.Version = literalID(v)
			case "server":
				m.Server, _ = strconv.Atoi(v)
			case "inc":
				m.Inc, _ = strconv.ParseUint(v, 10, 64)
			case "servers":
				if m.Global == nil {
					m.Global = &msg.Global{}
				}
				for _, e := range strings.Split(v, ",") {
					st, inc, _ := strings.Cut(e, "/")
					n, _ := strconv.ParseUint(inc, 10, 64)
					m.Global.Servers = append(m.Global.Servers, msg.ServerState{
						State: map[string]msg.State{"DOWN": msg.Down, "BOOTING": msg.Booting, "READY": msg.Ready}[st], Inc: n})
				}
			case "clients":
				if m.Global == nil {
					m.Global = &msg.Global{}
				}
				for _, c := range strings.Split(v, ",") {
					m.Global.Clients = append(m.Global.Clients, msg.ClientEntry{ID: literalID(c)})
				}
			default:
				bad("unknown key %q", k)
			}
		}
		at := time.Unix(0, int64(sec*1e9))
		c := codecs[from]
		if forge {
			c = forged[from]
		}
		d, err := c.Encode(m, addr(fi), addr(ti), at)
		if err != nil {
			bad("%v", err)
		}
		ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP, SrcIP: net.IP(addr(fi).Addr().AsSlice()), DstIP: net.IP(addr(ti).Addr().AsSlice())}
		udp := &layers.UDP{SrcPort: 7400, DstPort: 7400}
		_ = udp.SetNetworkLayerForChecksum(ip)
		buf := gopacket.NewSerializeBuffer()
		if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ip, udp, gopacket.Payload(d)); err != nil {
			bad("%v", err)
		}
		pkts := [][]byte{buf.Bytes()}
		if frag {
			pkts = fragments(t, ip, buf.Bytes()[20:])
		}
		for _, p := range pkts {
			recs = append(recs, rec{fi, at, p})
			if !lost {
				recs = append(recs, rec{ti, at.Add(200 * time.Microsecond), p})
			}
		}
	}
	slices.SortStableFunc(recs, func(a, b rec) int { return a.at.Compare(b.at) })
	var out bytes.Buffer
	ifnames := make([]string, len(names))
	for i, n := range names {
		ifnames[i] = n + "/eth0"
	}
	w, err := capture.NewWriter(&out, ifnames, nil, "literal capture "+pos)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if err := w.Packet(r.iface, r.at, r.data); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.Stop(); err != nil {
		t.Fatal(err)
	}
	cert, err := ca.LoadCert(filepath.Join(dir, ca.CACertFile))
	if err != nil {
		t.Fatal(err)
	}
	return out.Bytes(), cert
}

// fragments splits an IPv4 packet's payload (its UDP header and data) in
// 64-byte fragments, as a kernel does a datagram larger than the MTU.
func fragments(t *testing.T, ip *layers.IPv4, payload []byte) [][]byte {
	t.Helper()
	var out [][]byte
	for off := 0; off < len(payload); off += 64 {
		f := *ip
		f.Id, f.FragOffset = 77, uint16(off/8)
		if off+64 < len(payload) {
			f.Flags = layers.IPv4MoreFragments
		}
		buf := gopacket.NewSerializeBuffer()
		if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, &f, gopacket.Payload(payload[off:min(off+64, len(payload))])); err != nil {
			t.Fatal(err)
		}
		out = append(out, buf.Bytes())
	}
	return out
}

// literalID parses TERM.N (a client ID or a version).
func literalID(s string) uint64 {
	a, b, _ := strings.Cut(s, ".")
	x, _ := strconv.ParseUint(a, 10, 64)
	y, _ := strconv.ParseUint(b, 10, 64)
	return x<<32 | y
}

// renderCapture prints the capture's verdicts, its holds and its facts.
func renderCapture(r *CaptureReport) string {
	var b strings.Builder
	for _, n := range CaptureNames {
		q := r.Requirement(n)
		fmt.Fprintf(&b, "%s: %s (%s)\n  %s\n", n, q.Verdict, q.Value, q.Detail)
	}
	for _, h := range r.Holds {
		fmt.Fprintf(&b, "hold %s %s(%s) %s fence %s [%s] %s\n", h.Op.Name, h.Op.Client, h.Op.ID, h.Op.Mode, h.Op.Fence, span(h), h.EndWhy)
	}
	for _, h := range r.NotArrived {
		fmt.Fprintf(&b, "not arrived: %s %s(%s) fence %s\n", h.Op.Name, h.Op.Client, h.Op.ID, h.Op.Fence)
	}
	fmt.Fprintf(&b, "facts: %s", r.facts())
	return b.String()
}

// checkLiteralCapture judges a literal capture; times read as written.
func checkLiteralCapture(t *testing.T, text, pos string, base int64) *CaptureReport {
	t.Helper()
	file, cert := literalCapture(t, text, pos)
	// BaseWall 1 ns: the literal file's own origin, 0 s.
	r, err := CheckCapture(bytes.NewReader(file), CaptureOptions{CA: cert, BaseWall: max(base, 1)})
	if err != nil {
		t.Fatal(err)
	}
	return r
}
