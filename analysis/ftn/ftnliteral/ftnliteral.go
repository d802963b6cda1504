// Package ftnliteral builds literal FTN captures: signed FTN datagrams,
// written one a line as text, turned into the pcapng file the simulator's
// capture writer writes (internal/capturefile.Writer: raw IPv4, one
// interface per member, interface statistics at the end). It exists for
// tests, as harness/runner/runnertest does: analysis/ftn judges literal
// captures and analysis/pcaptimeline prints their timelines, and both
// read the same format.
//
// # Format
//
// One datagram or harness annotation a line, in time order:
//
//	TIME FROM>TO KIND [key=value ...] [lost] [forged] [fragmented] [broken=json|version]
//	TIME harness EVENT_KIND [peer=NAME] [link=FROM>TO]
//
// TIME is in seconds on the wall clock (the literal histories' clock:
// 0.010 is wall_ns 10000000). FROM and TO are member names; the i-th
// member named has interface "NAME/eth0" and address 10.0.0.i+1, port
// 7400. KIND is a msg.Kind name (Acquire, Release, Reply, State,
// Heartbeat, HeartbeatAck, ClientHeartbeat, ...). The keys set the
// message's fields:
//
//	id=TERM.N                  Client (a client ID)
//	req=N                      Req
//	name=NAME                  Name
//	mode=x|s                   Mode (exclusive, shared)
//	fence=TERM.SEQ#N           Fence
//	status=ok|id-invalid|not-holder
//	                           Status
//	v=TERM.SEQ                 the global state's version for State,
//	                           HeartbeatAck, Registered and Query; the
//	                           message's Version for every other kind
//	term=N                     Term
//	state=DOWN|BOOTING|READY   State (a Heartbeat's)
//	server=I, inc=N            Server and Inc (a Reply's sender index and
//	                           incarnation)
//	servers=STATE/INC,...      the global state's servers, by index
//	clients=TERM.N,...         the global state's client list; an element
//	                           TERM.A-TERM.B stands for every ID from A to B
//
// Each datagram is captured leaving FROM's interface at TIME and arriving
// at TO's 0.2 ms later, as the harness captures both ends. The flags:
// "lost" keeps only the first; "forged" signs it with a certificate of
// another CA, which a check against the run's CA rejects; "fragmented"
// sends it in IPv4 fragments (Options.FragmentSize; the IP ID of every
// datagram is its line number); "broken" spoils it after signing: json
// the body's JSON, version the format version byte.
//
// A harness line is an annotation of the capture (capturefile.Writer's
// Annotate): an event of agent "harness" with the kind EVENT_KIND.
//
// Datagrams are encoded and signed by agent/ftn/codec with certificates
// of a CA seeded for the purpose (ca.Seeded, valid from the epoch on, as
// the simulator's credentials are), so that the same text always gives
// the same file.
package ftnliteral

import (
	"bytes"
	"crypto/x509"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"tokenbed/agent/ca"
	"tokenbed/agent/eventlog"
	"tokenbed/agent/ftn/codec"
	"tokenbed/agent/ftn/msg"
	"tokenbed/internal/capturefile"
)

// Seeds of the run's CA and of the forger's.
const (
	caSeed     = 14
	forgerSeed = 15
)

// Options tune how a literal capture is written.
type Options struct {
	// FragmentSize is the bytes of IPv4 payload (the UDP header and
	// data) each fragment of a "fragmented" datagram carries, a
	// multiple of 8; 0 means 1480, what an MTU of 1500 bytes leaves.
	// A small size fragments a small datagram.
	FragmentSize int
}

// Capture is a literal capture written.
type Capture struct {
	Pcapng []byte            // the file
	CA     *x509.Certificate // the run's CA, which signed every datagram not forged
}

// Build writes the literal capture text. pos names the text in errors
// and in the file's section comment (a datadriven position, say).
func Build(text, pos string, o Options) (*Capture, error) {
	if o.FragmentSize == 0 {
		o.FragmentSize = 1480
	}
	if o.FragmentSize < 8 || o.FragmentSize%8 != 0 {
		return nil, fmt.Errorf("ftnliteral: fragment size %d: want a positive multiple of 8", o.FragmentSize)
	}
	tmp, err := os.MkdirTemp("", "ftnliteral")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	b := &builder{o: o, codecs: map[string]*codec.Codec{}, forged: map[string]*codec.Codec{}}
	// Valid from the epoch (literal times are small wall clocks) on.
	forever := time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)
	b.ca = authority{dir: filepath.Join(tmp, "ca"), src: ca.Seeded(caSeed, time.Unix(0, 0), forever)}
	b.forger = authority{dir: filepath.Join(tmp, "forger"), src: ca.Seeded(forgerSeed, time.Unix(0, 0), forever)}
	for _, a := range []authority{b.ca, b.forger} {
		if err := ca.InitWith(a.dir, a.src); err != nil {
			return nil, err
		}
	}
	for ln, line := range strings.Split(strings.TrimSpace(text), "\n") {
		if err := b.line(ln+1, line); err != nil {
			return nil, fmt.Errorf("%s: line %d: %q: %w", pos, ln+1, line, err)
		}
	}
	file, err := b.write("literal capture " + pos)
	if err != nil {
		return nil, err
	}
	cert, err := ca.LoadCert(filepath.Join(b.ca.dir, ca.CACertFile))
	if err != nil {
		return nil, err
	}
	return &Capture{Pcapng: file, CA: cert}, nil
}

// authority is a CA's directory and the source of its keys.
type authority struct {
	dir string
	src *ca.Source
}

// record is one packet seen on one interface, or an annotation.
type record struct {
	iface int
	at    time.Time
	data  []byte
	ann   *eventlog.Event
}

type builder struct {
	o          Options
	ca, forger authority
	names      []string
	codecs     map[string]*codec.Codec // signed by the run's CA
	forged     map[string]*codec.Codec // signed by the forger's
	recs       []record
}

// member returns the index of member n, issuing its certificates (of
// both CAs, in order of first appearance) when it is new.
func (b *builder) member(n string) (int, error) {
	if i := slices.Index(b.names, n); i >= 0 {
		return i, nil
	}
	for _, d := range []struct {
		a authority
		m map[string]*codec.Codec
	}{{b.ca, b.codecs}, {b.forger, b.forged}} {
		if err := ca.IssueWith(d.a.dir, n, d.a.src); err != nil {
			return 0, err
		}
		c, err := ca.LoadMember(d.a.dir, n, filepath.Join(d.a.dir, ca.CACertFile))
		if err != nil {
			return 0, err
		}
		d.m[n] = codec.New(c)
	}
	b.names = append(b.names, n)
	return len(b.names) - 1, nil
}

func addr(i int) netip.AddrPort {
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)}), 7400)
}

// line adds the packets or the annotation of line ln.
func (b *builder) line(ln int, line string) error {
	f := strings.Fields(line)
	if len(f) < 3 {
		return fmt.Errorf("want TIME FROM>TO KIND or TIME harness EVENT_KIND")
	}
	sec, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return err
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
				return fmt.Errorf("unknown key %q", k)
			}
		}
		b.recs = append(b.recs, record{at: at, ann: &ev})
		return nil
	}
	from, to, ok := strings.Cut(f[1], ">")
	if !ok {
		return fmt.Errorf("want FROM>TO")
	}
	fi, err := b.member(from)
	if err != nil {
		return err
	}
	ti, err := b.member(to)
	if err != nil {
		return err
	}
	m := msg.Msg{}
	for k := msg.Kind(1); k < 64; k++ {
		if k.Valid() && k.String() == f[2] {
			m.Kind = k
		}
	}
	if m.Kind == 0 {
		return fmt.Errorf("unknown kind %q", f[2])
	}
	var fl flags
	if err := parseFields(&m, &fl, f[3:]); err != nil {
		return err
	}
	c := b.codecs[from]
	if fl.forged {
		c = b.forged[from]
	}
	d, err := c.Encode(m, addr(fi), addr(ti), at)
	if err != nil {
		return err
	}
	switch fl.broken {
	case "":
	case "json":
		d[bytes.Index(d, []byte(`{"Kind"`))] = '['
	case "version":
		d[2] = 9
	default:
		return fmt.Errorf("broken=%s: want json or version", fl.broken)
	}
	// Each datagram its own IP ID, so that fragments of two datagrams
	// never reassemble together.
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP, Id: uint16(ln),
		SrcIP: net.IP(addr(fi).Addr().AsSlice()), DstIP: net.IP(addr(ti).Addr().AsSlice())}
	udp := &layers.UDP{SrcPort: 7400, DstPort: 7400}
	_ = udp.SetNetworkLayerForChecksum(ip)
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ip, udp, gopacket.Payload(d)); err != nil {
		return err
	}
	pkts := [][]byte{buf.Bytes()}
	if fl.fragmented {
		if pkts, err = fragments(ip, buf.Bytes()[20:], b.o.FragmentSize); err != nil {
			return err
		}
	}
	for _, p := range pkts {
		b.recs = append(b.recs, record{iface: fi, at: at, data: p})
		if !fl.lost {
			b.recs = append(b.recs, record{iface: ti, at: at.Add(200 * time.Microsecond), data: p})
		}
	}
	return nil
}

// flags are a datagram line's words that say how it is captured.
type flags struct {
	lost, forged, fragmented bool
	broken                   string
}

var (
	modes    = map[string]msg.Mode{"x": msg.Exclusive, "s": msg.Shared}
	statuses = map[string]msg.Status{"ok": msg.OK, "id-invalid": msg.IDInvalid, "not-holder": msg.NotHolder}
	states   = map[string]msg.State{"DOWN": msg.Down, "BOOTING": msg.Booting, "READY": msg.Ready}
)

func lookup[T any](m map[string]T, key, v string) (T, error) {
	x, ok := m[v]
	if !ok {
		return x, fmt.Errorf("%s=%s: unknown value", key, v)
	}
	return x, nil
}

// parseFields sets m's fields and fl from a datagram line's words after
// its kind.
func parseFields(m *msg.Msg, fl *flags, words []string) error {
	global := func() *msg.Global {
		if m.Global == nil {
			m.Global = &msg.Global{}
		}
		return m.Global
	}
	for _, kv := range words {
		k, v, _ := strings.Cut(kv, "=")
		var err error
		switch k {
		case "lost":
			fl.lost = true
		case "forged":
			fl.forged = true
		case "fragmented":
			fl.fragmented = true
		case "broken":
			fl.broken = v
		case "id":
			m.Client, err = id(v)
		case "req":
			m.Req, err = strconv.ParseUint(v, 10, 64)
		case "name":
			m.Name = v
		case "mode":
			m.Mode, err = lookup(modes, k, v)
		case "fence":
			e, n, _ := strings.Cut(v, "#")
			if m.Fence.Epoch, err = id(e); err == nil {
				m.Fence.Counter, err = strconv.ParseUint(n, 10, 64)
			}
		case "status":
			m.Status, err = lookup(statuses, k, v)
		case "v":
			switch m.Kind {
			case msg.StateMsg, msg.HeartbeatAck, msg.Registered, msg.Query:
				global().Version, err = id(v)
			default:
				m.Version, err = id(v)
			}
		case "term":
			m.Term, err = strconv.ParseUint(v, 10, 64)
		case "state":
			m.State, err = lookup(states, k, v)
		case "server":
			m.Server, err = strconv.Atoi(v)
		case "inc":
			m.Inc, err = strconv.ParseUint(v, 10, 64)
		case "servers":
			for _, e := range strings.Split(v, ",") {
				st, inc, _ := strings.Cut(e, "/")
				s := msg.ServerState{}
				if s.State, err = lookup(states, k, st); err != nil {
					break
				}
				if s.Inc, err = strconv.ParseUint(inc, 10, 64); err != nil {
					break
				}
				global().Servers = append(global().Servers, s)
			}
		case "clients":
			for _, c := range strings.Split(v, ",") {
				lo, hi, isRange := strings.Cut(c, "-")
				var first, last uint64
				if first, err = id(lo); err != nil {
					break
				}
				last = first
				if isRange {
					if last, err = id(hi); err != nil {
						break
					}
				}
				for x := first; x <= last; x++ {
					global().Clients = append(global().Clients, msg.ClientEntry{ID: x})
				}
			}
		default:
			return fmt.Errorf("unknown key %q", k)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", kv, err)
		}
	}
	return nil
}

// id parses TERM.N (a client ID or a version).
func id(s string) (uint64, error) {
	a, b, ok := strings.Cut(s, ".")
	if !ok {
		return 0, fmt.Errorf("%q: want TERM.N", s)
	}
	x, err := strconv.ParseUint(a, 10, 32)
	if err != nil {
		return 0, err
	}
	y, err := strconv.ParseUint(b, 10, 32)
	if err != nil {
		return 0, err
	}
	return x<<32 | y, nil
}

// fragments splits an IPv4 packet's payload (its UDP header and data) in
// fragments of size bytes, as a kernel does a datagram larger than the
// MTU.
func fragments(ip *layers.IPv4, payload []byte, size int) ([][]byte, error) {
	var out [][]byte
	for off := 0; off < len(payload); off += size {
		f := *ip
		f.FragOffset = uint16(off / 8)
		if off+size < len(payload) {
			f.Flags = layers.IPv4MoreFragments
		}
		buf := gopacket.NewSerializeBuffer()
		if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, &f, gopacket.Payload(payload[off:min(off+size, len(payload))])); err != nil {
			return nil, err
		}
		out = append(out, buf.Bytes())
	}
	return out, nil
}

// write sorts the records by time (stably: a datagram's fragments stay in
// order) and writes the pcapng.
func (b *builder) write(comment string) ([]byte, error) {
	slices.SortStableFunc(b.recs, func(x, y record) int { return x.at.Compare(y.at) })
	var out bytes.Buffer
	ifnames := make([]string, len(b.names))
	for i, n := range b.names {
		ifnames[i] = n + "/eth0"
	}
	w, err := capturefile.NewWriter(&out, ifnames, nil, comment)
	if err != nil {
		return nil, err
	}
	for _, r := range b.recs {
		if r.ann != nil {
			err = w.Annotate(*r.ann)
		} else {
			err = w.Packet(r.iface, r.at, r.data)
		}
		if err != nil {
			return nil, err
		}
	}
	if _, err := w.Stop(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}
