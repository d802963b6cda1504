package pcaptimeline_test

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"tokenbed/agent/ca"
	"tokenbed/agent/eventlog"
	"tokenbed/agent/ftn/codec"
	"tokenbed/agent/ftn/msg"
	"tokenbed/harness/capture"
)

// TestFTNTimeline prints the timelines of the literal FTN captures of
// testdata/ftn.txt against their golden output (-rewrite regenerates
// it). The command is "pcap" with the flags of `harness pcap`
// (-name=a); the input is a literal capture (literalFTN).
func TestFTNTimeline(t *testing.T) {
	datadriven.RunTest(t, "testdata/ftn.txt", func(t *testing.T, d *datadriven.TestData) string {
		if d.Cmd != "pcap" {
			d.Fatalf(t, "unknown command %q", d.Cmd)
		}
		path := literalFTN(t, d.Input, d.Pos)
		args := []string{path}
		for _, a := range d.CmdArgs {
			args = append(args, a.String())
		}
		out, errOut, code := run(t, args...)
		if code != 0 {
			return fmt.Sprintf("exit %d: %s", code, errOut)
		}
		return strings.ReplaceAll(out, path, "capture.pcapng")
	})
}

// A literal FTN capture is one datagram or harness annotation a line, in
// time order:
//
//	TIME FROM>TO KIND [key=value ...] [lost] [fragmented] [broken=json|version]
//	TIME harness EVENT_KIND [peer=NAME] [link=FROM>TO]
//
// as analysis/ftn's literal captures (capture_test.go there): TIME in
// seconds on the wall clock; KIND a msg.Kind name; keys id=TERM.N (client
// ID), req, name, mode=x|s, fence=TERM.SEQ#N, status=ok|id-invalid|
// not-holder, v=TERM.SEQ (the global state's version for State,
// HeartbeatAck, Registered and Query, else the message's), term, state
// (a Heartbeat's), clients=TERM.N,... or TERM.A-TERM.B (a global state's
// client list), servers=STATE/INC,... (its servers), server=I and inc=N.
// Each datagram is captured leaving FROM's interface ("FROM/eth0", member
// i has address 10.0.0.i+1) at TIME and arriving at TO's 0.2 ms later;
// "lost" keeps only the first; "fragmented" sends it in IPv4 fragments
// of an MTU of 1500 bytes; "broken" spoils it after signing (the body's
// JSON, or the format version). The datagrams are signed by certificates
// of a seeded CA, as the simulator's capture writer would write them
// (harness/capture.Writer: raw IPv4, one interface per member). It
// returns the file's path.
func literalFTN(t *testing.T, text, pos string) string {
	t.Helper()
	dir := t.TempDir()
	src := ca.Seeded(14, time.Unix(0, 0), time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC))
	if err := ca.InitWith(dir, src); err != nil {
		t.Fatal(err)
	}
	type rec struct {
		iface int
		at    time.Time
		data  []byte
		ann   *eventlog.Event
	}
	var (
		names  []string
		codecs = map[string]*codec.Codec{}
		recs   []rec
	)
	member := func(n string) int {
		if i := slices.Index(names, n); i >= 0 {
			return i
		}
		if err := ca.IssueWith(dir, n, src); err != nil {
			t.Fatal(err)
		}
		c, err := ca.LoadMember(dir, n, filepath.Join(dir, ca.CACertFile))
		if err != nil {
			t.Fatal(err)
		}
		codecs[n] = codec.New(c)
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
		at := time.Unix(0, int64(sec*1e9))
		if f[1] == "harness" {
			ev := eventlog.Event{Agent: "harness", Kind: eventlog.Kind(f[2]), WallNS: at.UnixNano()}
			for _, kv := range f[3:] {
				k, v, _ := strings.Cut(kv, "=")
				switch k {
				case "peer":
					ev.Peer = v
				case "link":
					ev.Link = v
				default:
					bad("unknown key %q", k)
				}
			}
			recs = append(recs, rec{at: at, ann: &ev})
			continue
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
		global := func() *msg.Global {
			if m.Global == nil {
				m.Global = &msg.Global{}
			}
			return m.Global
		}
		lost, frag, broken := false, false, ""
		for _, kv := range f[3:] {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "lost":
				lost = true
			case "fragmented":
				frag = true
			case "broken":
				broken = v
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
				switch m.Kind {
				case msg.StateMsg, msg.HeartbeatAck, msg.Registered, msg.Query:
					global().Version = literalID(v)
				default:
					m.Version = literalID(v)
				}
			case "term":
				m.Term, _ = strconv.ParseUint(v, 10, 64)
			case "state":
				m.State = map[string]msg.State{"DOWN": msg.Down, "BOOTING": msg.Booting, "READY": msg.Ready}[v]
			case "server":
				m.Server, _ = strconv.Atoi(v)
			case "inc":
				m.Inc, _ = strconv.ParseUint(v, 10, 64)
			case "servers":
				for _, e := range strings.Split(v, ",") {
					st, inc, _ := strings.Cut(e, "/")
					n, _ := strconv.ParseUint(inc, 10, 64)
					global().Servers = append(global().Servers, msg.ServerState{
						State: map[string]msg.State{"DOWN": msg.Down, "BOOTING": msg.Booting, "READY": msg.Ready}[st], Inc: n})
				}
			case "clients":
				for _, c := range strings.Split(v, ",") {
					lo, hi, isRange := strings.Cut(c, "-")
					first, last := literalID(lo), literalID(lo)
					if isRange {
						last = literalID(hi)
					}
					for id := first; id <= last; id++ {
						global().Clients = append(global().Clients, msg.ClientEntry{ID: id})
					}
				}
			default:
				bad("unknown key %q", k)
			}
		}
		d, err := codecs[from].Encode(m, addr(fi), addr(ti), at)
		if err != nil {
			bad("%v", err)
		}
		switch broken {
		case "":
		case "json":
			d[bytes.Index(d, []byte(`{"Kind"`))] = '['
		case "version":
			d[2] = 9
		default:
			bad("broken=%s: want json or version", broken)
		}
		ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP, Id: uint16(ln + 1),
			SrcIP: net.IP(addr(fi).Addr().AsSlice()), DstIP: net.IP(addr(ti).Addr().AsSlice())}
		udp := &layers.UDP{SrcPort: 7400, DstPort: 7400}
		_ = udp.SetNetworkLayerForChecksum(ip)
		buf := gopacket.NewSerializeBuffer()
		if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ip, udp, gopacket.Payload(d)); err != nil {
			bad("%v", err)
		}
		pkts := [][]byte{buf.Bytes()}
		if frag {
			pkts = mtuFragments(t, ip, buf.Bytes()[20:])
		}
		for _, p := range pkts {
			recs = append(recs, rec{iface: fi, at: at, data: p})
			if !lost {
				recs = append(recs, rec{iface: ti, at: at.Add(200 * time.Microsecond), data: p})
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
		if r.ann != nil {
			err = w.Annotate(*r.ann)
		} else {
			err = w.Packet(r.iface, r.at, r.data)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.Stop(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "ftn.pcapng")
	if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// mtuFragments splits an IPv4 packet's payload (its UDP header and data)
// as a kernel does for an MTU of 1500 bytes: 1480 bytes a fragment.
func mtuFragments(t *testing.T, ip *layers.IPv4, payload []byte) [][]byte {
	t.Helper()
	const size = 1480
	var out [][]byte
	for off := 0; off < len(payload); off += size {
		f := *ip
		f.FragOffset = uint16(off / 8)
		if off+size < len(payload) {
			f.Flags = layers.IPv4MoreFragments
		}
		buf := gopacket.NewSerializeBuffer()
		if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, &f, gopacket.Payload(payload[off:min(off+size, len(payload))])); err != nil {
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
