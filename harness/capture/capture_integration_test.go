package capture_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/vishvananda/netns"

	"tokenbed/agent/eventlog"
	"tokenbed/agent/wire"
	"tokenbed/agent/wire/wirelayer"
	"tokenbed/analysis/pcaptimeline"
	"tokenbed/analysis/wireshark"
	"tokenbed/harness/capture"
)

const port = 7400

func init() { wirelayer.Register(port) }

// peer is one side of the scratch link: its socket, address and key.
type peer struct {
	name string
	conn *net.UDPConn
	addr netip.AddrPort
	key  ed25519.PrivateKey
	pub  ed25519.PublicKey
}

// sent is a datagram the test sent and saw delivered.
type sent struct {
	d        wire.Datagram
	enc      []byte
	from, to *peer
}

func realtime() int64 { _, wall := eventlog.Now(); return wall }

// exchange sends b from one peer to the other over the veth and waits for
// it, so that the test knows the packet crossed the link.
func exchange(t testing.TB, from, to *peer, b []byte) {
	t.Helper()
	if _, err := from.conn.WriteToUDPAddrPort(b, to.addr); err != nil {
		t.Fatalf("send %s→%s: %v", from.name, to.name, err)
	}
	buf := make([]byte, 2048)
	to.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, src, err := to.conn.ReadFromUDPAddrPort(buf)
	if err != nil {
		t.Fatalf("receive %s→%s: %v", from.name, to.name, err)
	}
	if !bytes.Equal(buf[:n], b) || src != from.addr {
		t.Fatalf("received %d bytes from %v, want %d bytes from %v", n, src, len(b), from.addr)
	}
}

func newPeers(t testing.TB, p *pair, seed uint64) (a, b *peer) {
	rng := rand.New(rand.NewPCG(seed, 1))
	mk := func(name string, h *pairSide) *peer {
		var s [32]byte
		for i := range s {
			s[i] = byte(rng.UintN(256))
		}
		k := ed25519.NewKeyFromSeed(s[:])
		return &peer{name: name, conn: listen(t, h.ns, h.ip, port), addr: netip.AddrPortFrom(h.ip, port),
			key: k, pub: k.Public().(ed25519.PublicKey)}
	}
	return mk("A", &pairSide{p.hA, p.ipA}), mk("B", &pairSide{p.hB, p.ipB})
}

// TestCaptureEndToEnd is the capture's acceptance test: real signed
// datagrams of every type over real UDP between two namespaces, both ends
// captured into one pcapng with harness annotations; then the file is
// checked (a) with gopacket and wirelayer, field by field and signature by
// signature, (b) for nanosecond CLOCK_REALTIME timestamps inside the send
// window, (c) with tshark and the Lua dissector, field by field against
// gopacket, annotations included, and (d) through pcaptimeline.
func TestCaptureEndToEnd(t *testing.T) {
	p := newPair(t)
	seed := uint64(time.Now().UnixNano())
	t.Logf("key seed %d", seed)
	a, b := newPeers(t, p, seed)
	// Noise the filter must drop: UDP on another port.
	noiseA, noiseB := listen(t, p.hA, p.ipA, 9999), listen(t, p.hB, p.ipB, 9999)

	file := filepath.Join(t.TempDir(), "run.pcapng")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := capture.Create(ctx, file, capture.Config{
		Interfaces: []capture.Interface{
			{Name: "A/" + p.devA, Device: p.devA, NetNSPath: p.pathA, Description: "agent A, link to B"},
			{Name: "B/" + p.devB, Device: p.devB, NetNSPath: p.pathB, Description: "agent B, link to A"},
		},
		Filter:  capture.UDP(port),
		Comment: "TestCaptureEndToEnd seed " + strconv.FormatUint(seed, 10),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()

	// The datagrams of two passing operations (002 §3): the first Move is
	// retransmitted (new nonce), and both sides piggyback directories.
	tok := wire.TokenID{Gen: 1_750_000_000_000_000_123, Origin: "A"}
	cert := make([]byte, 264)
	for i := range cert {
		cert[i] = byte(i)
	}
	nonce := uint64(realtime())
	plan := []struct {
		from, to *peer
		d        wire.Datagram
	}{
		{a, b, wire.Datagram{Type: wire.Move, Sender: "A", Token: tok, Session: 41, Nonce: nonce + 1, ReplyPort: port,
			Cert: cert, Dir: []wire.Entry{{Name: "A", Addr: a.addr, Seen: 5}, {Name: "C", Addr: netip.MustParseAddrPort("[fd00::c]:7400"), Seen: 6}}}},
		{a, b, wire.Datagram{Type: wire.Move, Sender: "A", Token: tok, Session: 41, Nonce: nonce + 2, ReplyPort: port, Cert: cert}},
		{b, a, wire.Datagram{Type: wire.Ack, Sender: "B", Token: tok, Session: 41, Nonce: nonce + 3, ReplyPort: port,
			Dir: []wire.Entry{{Name: "B", Addr: b.addr, Seen: int64(nonce)}}}},
		{a, b, wire.Datagram{Type: wire.Commit, Sender: "A", Token: tok, Session: 41, Nonce: nonce + 4}},
		{b, a, wire.Datagram{Type: wire.EarlyStop, Sender: "B", Token: tok, Session: 41, Nonce: nonce + 5}},
		{b, a, wire.Datagram{Type: wire.Move, Sender: "B", Token: tok, Session: 42, Nonce: nonce + 6, ReplyPort: port}},
		{a, b, wire.Datagram{Type: wire.Ack, Sender: "A", Token: tok, Session: 42, Nonce: nonce + 7, ReplyPort: port}},
		{b, a, wire.Datagram{Type: wire.Commit, Sender: "B", Token: tok, Session: 42, Nonce: nonce + 8}},
		{a, b, wire.Datagram{Type: wire.EarlyStop, Sender: "A", Token: tok, Session: 42, Nonce: nonce + 9}},
	}
	annotations := []eventlog.Event{
		{Agent: "harness", Seq: 1, Kind: eventlog.LinkProfile, Link: "A>B", Profile: "delay 10ms"},
		{Agent: "harness", Seq: 2, Kind: eventlog.OutageStart, Link: "A>B", Reason: "loss"},
		{Agent: "harness", Seq: 3, Kind: eventlog.OutageEnd, Link: "A>B"},
		{Agent: "harness", Seq: 4, Kind: eventlog.AgentCrash, Detail: "SIGKILL", Peer: "B"},
	}
	annotate := func(i int) {
		annotations[i].MonoNS, annotations[i].WallNS = eventlog.Now()
		if err := c.Annotate(annotations[i]); err != nil {
			t.Fatal(err)
		}
	}

	t0 := realtime()
	annotate(0)
	var sends []sent
	for i, s := range plan {
		enc, err := s.d.Encode(s.from.key, s.from.addr, s.to.addr)
		if err != nil {
			t.Fatal(err)
		}
		exchange(t, s.from, s.to, enc)
		sends = append(sends, sent{s.d, enc, s.from, s.to})
		switch i {
		case 0:
			annotate(1)
		case 1:
			annotate(2)
		}
	}
	// A malformed datagram on the port (bad flags), and noise off it.
	bad, _ := plan[3].d.Encode(a.key, a.addr, b.addr)
	bad = bytes.Clone(bad)
	bad[4] = 0x80
	exchange(t, a, b, bad)
	if _, err := noiseA.WriteToUDPAddrPort([]byte("noise"), netip.AddrPortFrom(p.ipB, 9999)); err != nil {
		t.Fatal(err)
	}
	noiseB.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, _, err := noiseB.ReadFromUDPAddrPort(make([]byte, 64)); err != nil {
		t.Fatal(err)
	}
	annotate(3)
	t1 := realtime()

	stats, err := c.Stop()
	if err != nil {
		t.Fatalf("Stop: %v", err)
	}
	t.Logf("stats: %+v", stats)
	nOnPort := uint64(len(sends) + 1)
	for _, is := range stats.Interfaces {
		if is.Written != nOnPort {
			t.Errorf("%s: %d packets written, want %d (every datagram crosses both ends)", is.Name, is.Written, nOnPort)
		}
		if is.Filtered == 0 {
			t.Errorf("%s: the filter dropped nothing; the port 9999 datagram should have been dropped", is.Name)
		}
		if is.KernelDrops != 0 || is.Err != nil {
			t.Errorf("%s: %d kernel drops, error %v", is.Name, is.KernelDrops, is.Err)
		}
		if is.KernelPackets < is.Received {
			t.Errorf("%s: kernel counted %d packets, fewer than the %d read", is.Name, is.KernelPackets, is.Received)
		}
	}
	if stats.Annotations != uint64(len(annotations)) {
		t.Errorf("%d annotations written, want %d", stats.Annotations, len(annotations))
	}
	if fi, err := os.Stat(file); err != nil || fi.Size() != stats.BytesWritten {
		t.Errorf("file size %v (%v), stats say %d bytes written", fi.Size(), err, stats.BytesWritten)
	}

	if dir := os.Getenv("TOKENBED_KEEP_CAPTURE"); dir != "" {
		// For a look with Wireshark: TOKENBED_KEEP_CAPTURE=/some/dir.
		if b, err := os.ReadFile(file); err == nil {
			os.WriteFile(filepath.Join(dir, "TestCaptureEndToEnd.pcapng"), b, 0o644)
		}
	}
	cf := readFile(t, file)
	ifA, ifB, ifH := cf.ifaceIndex("A/"+p.devA), cf.ifaceIndex("B/"+p.devB), cf.ifaceIndex("harness")
	if ifA != 0 || ifB != 1 || ifH != 2 || len(cf.ifaces) != 3 {
		t.Fatalf("interfaces %+v: want A, B, harness", cf.ifaces)
	}
	if cf.section.Comment != "TestCaptureEndToEnd seed "+strconv.FormatUint(seed, 10) {
		t.Errorf("section comment %q", cf.section.Comment)
	}
	for i, want := range []struct {
		lt   layers.LinkType
		desc string
	}{{layers.LinkTypeEthernet, "agent A, link to B; device " + p.devA}, {layers.LinkTypeEthernet, "agent B, link to A; device " + p.devB}, {capture.LinkTypeUpperPDU, "tokenbed harness"}} {
		ifc := cf.ifaces[i]
		if ifc.LinkType != want.lt || !strings.HasPrefix(ifc.Description, want.desc) {
			t.Errorf("interface %d: link type %v, description %q; want %v, %q...", i, ifc.LinkType, ifc.Description, want.lt, want.desc)
		}
		// (b) nanosecond resolution: if_tsresol 9.
		if ifc.TimestampResolution != 9 {
			t.Errorf("interface %s: if_tsresol %d, want 9", ifc.Name, ifc.TimestampResolution)
		}
	}
	for i, idx := range []int{ifA, ifB} {
		st := cf.ifaces[idx].Statistics
		if st.PacketsReceived != stats.Interfaces[i].KernelPackets || st.PacketsDropped != 0 {
			t.Errorf("%s: statistics block received %d dropped %d; stats say %d, 0", cf.ifaces[idx].Name, st.PacketsReceived, st.PacketsDropped, stats.Interfaces[i].KernelPackets)
		}
	}

	// (a) gopacket: NewPacket and DecodingLayerParser, every field.
	var (
		eth  layers.Ethernet
		ip4  layers.IPv4
		udp  layers.UDP
		tb   wirelayer.Datagram
		dec  []gopacket.LayerType
		seen = map[string][2][]record{} // by encoding: copies on A, on B
	)
	parser := gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet, &eth, &ip4, &udp, &tb)
	var annRecs, malformed []record
	for _, r := range cf.records {
		// (b) every timestamp inside the CLOCK_REALTIME send window.
		if ns := r.ci.Timestamp.UnixNano(); ns < t0 || ns > t1 {
			t.Errorf("frame %d (%s): timestamp %d outside the send window [%d, %d]", r.frame, r.ifName, ns, t0, t1)
		}
		if r.iface == ifH {
			annRecs = append(annRecs, r)
			continue
		}
		pk := gopacket.NewPacket(r.data, r.lt, gopacket.Default)
		perr := parser.DecodeLayers(r.data, &dec)
		l, _ := pk.Layer(wirelayer.LayerType).(*wirelayer.Datagram)
		if l == nil {
			var we *wire.Error
			if el := pk.ErrorLayer(); el == nil || !errors.As(el.Error(), &we) || we.Field != "flags" || !errors.As(perr, &we) || we.Field != "flags" {
				t.Errorf("frame %d: no tokenbed layer and no flags error (error layer %v, parser %v)", r.frame, pk.ErrorLayer(), perr)
			}
			malformed = append(malformed, r)
			continue
		}
		if perr != nil || !reflect.DeepEqual(tb.Datagram, l.Datagram) {
			t.Errorf("frame %d: DecodingLayerParser %v %+v differs from NewPacket %+v", r.frame, perr, tb.Datagram, l.Datagram)
		}
		k := string(l.Contents)
		cp := seen[k]
		switch r.iface {
		case ifA:
			cp[0] = append(cp[0], r)
		case ifB:
			cp[1] = append(cp[1], r)
		}
		seen[k] = cp
		var s *sent
		for i := range sends {
			if bytes.Equal(sends[i].enc, l.Contents) {
				s = &sends[i]
			}
		}
		if s == nil {
			t.Errorf("frame %d: captured a datagram that was never sent: %+v", r.frame, l.Datagram)
			continue
		}
		if !reflect.DeepEqual(l.Datagram, s.d) {
			t.Errorf("frame %d: fields\n got %+v\nwant %+v", r.frame, l.Datagram, s.d)
		}
		ip, _ := pk.NetworkLayer().(*layers.IPv4)
		src := netip.AddrPortFrom(netip.AddrFrom4([4]byte(ip.SrcIP.To4())), uint16(udp.SrcPort))
		dst := netip.AddrPortFrom(netip.AddrFrom4([4]byte(ip.DstIP.To4())), uint16(udp.DstPort))
		if src != s.from.addr || dst != s.to.addr || !l.Verify(s.from.pub, src, dst) {
			t.Errorf("frame %d: %v→%v, signature valid %v; want %v→%v", r.frame, src, dst, l.Verify(s.from.pub, src, dst), s.from.addr, s.to.addr)
		}
		if l.Version != wire.Version || !bytes.Equal(l.Signature, s.enc[len(s.enc)-wire.SigLen:]) {
			t.Errorf("frame %d: version %d, signature %x", r.frame, l.Version, l.Signature)
		}
	}
	nsResolution := false
	for _, s := range sends {
		cp := seen[string(s.enc)]
		if len(cp[0]) != 1 || len(cp[1]) != 1 {
			t.Errorf("%v session %d: %d copies on A, %d on B; want one on each end", s.d.Type, s.d.Session, len(cp[0]), len(cp[1]))
			continue
		}
		// (b) the sender's copy is timestamped before the receiver's.
		tx, rx := cp[0][0], cp[1][0]
		if s.from == b {
			tx, rx = rx, tx
		}
		if !tx.ci.Timestamp.Before(rx.ci.Timestamp) && !tx.ci.Timestamp.Equal(rx.ci.Timestamp) {
			t.Errorf("%v session %d: sent at %v on %s, received at %v on %s", s.d.Type, s.d.Session, tx.ci.Timestamp, tx.ifName, rx.ci.Timestamp, rx.ifName)
		}
		for _, r := range []record{tx, rx} {
			if r.ci.Timestamp.UnixNano()%1000 != 0 {
				nsResolution = true
			}
		}
	}
	if !nsResolution {
		t.Errorf("every timestamp is a whole microsecond: not nanosecond timestamps")
	}
	if len(malformed) != 2 {
		t.Errorf("%d malformed records, want 2 (the bad-flags datagram on each end)", len(malformed))
	}

	// Annotations: one record each, the JSON in the data and the comment.
	if len(annRecs) != len(annotations) {
		t.Fatalf("%d annotation records, want %d", len(annRecs), len(annotations))
	}
	for i, r := range annRecs {
		js, _ := json.Marshal(annotations[i])
		if len(r.comments) != 1 || r.comments[0] != string(js) {
			t.Errorf("annotation %d: comments %q, want %s", i, r.comments, js)
		}
		if !bytes.HasSuffix(r.data, js) || !bytes.HasPrefix(r.data, []byte("\x00\x0c\x00\x04json\x00\x00\x00\x00")) {
			t.Errorf("annotation %d: data %q", i, r.data)
		}
		if r.ci.Timestamp.UnixNano() != annotations[i].WallNS {
			t.Errorf("annotation %d: timestamp %d, want its WallNS %d", i, r.ci.Timestamp.UnixNano(), annotations[i].WallNS)
		}
	}

	checkTshark(t, file, cf, ifH, annotations)
	checkTimeline(t, file, p)
}

// checkTshark reads the capture with tshark and the Lua dissector and
// compares every tokenbed field with gopacket's decoding of the same frame.
func checkTshark(t *testing.T, file string, cf capFile, ifH int, annotations []eventlog.Event) {
	t.Helper()
	ts, err := wireshark.New(t.TempDir())
	if errors.Is(err, wireshark.ErrNoTshark) {
		if os.Geteuid() == 0 {
			t.Fatalf("%v: as root, `make deps` installs it", err)
		}
		t.Skipf("%v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := ts.Check(ctx); err != nil {
		t.Fatal(err)
	}
	fields := []string{"frame.number", "frame.interface_name", "frame.time_epoch", "tokenbed.error", "tokenbed.version",
		"tokenbed.type", "tokenbed.flags", "tokenbed.sender", "tokenbed.token_gen", "tokenbed.token_origin",
		"tokenbed.session", "tokenbed.nonce", "tokenbed.reply_port", "tokenbed.cert_len", "tokenbed.dir_count",
		"tokenbed.dir.name", "tokenbed.dir.addr", "tokenbed.dir.port", "tokenbed.dir.seen", "tokenbed.signature"}
	rows, err := ts.Fields(ctx, file, "tokenbed", fields...)
	if err != nil {
		t.Fatal(err)
	}
	byFrame := map[int]record{}
	nTB := 0
	for _, r := range cf.records {
		byFrame[r.frame] = r
		if r.iface != ifH {
			nTB++
		}
	}
	if len(rows) != nTB {
		t.Fatalf("tshark shows %d tokenbed frames, gopacket %d", len(rows), nTB)
	}
	for _, row := range rows {
		n, _ := strconv.Atoi(row[0])
		r, ok := byFrame[n]
		if !ok {
			t.Fatalf("tshark frame %s not in the file", row[0])
		}
		want := []string{row[0], r.ifName, fmt.Sprintf("%d.%09d", r.ci.Timestamp.Unix(), r.ci.Timestamp.Nanosecond())}
		pk := gopacket.NewPacket(r.data, r.lt, gopacket.Default)
		l, _ := pk.Layer(wirelayer.LayerType).(*wirelayer.Datagram)
		if l == nil {
			var we *wire.Error
			errors.As(pk.ErrorLayer().Error(), &we)
			want = append(want, strings.TrimPrefix(we.Error(), "wire: "))
			if row[3] != want[3] || row[1] != want[1] {
				t.Errorf("frame %d: tshark %q, gopacket %q", n, row[:4], want)
			}
			continue
		}
		d := l.Datagram
		var names, addrs, ports, seens []string
		for _, e := range d.Dir {
			names = append(names, e.Name)
			addrs = append(addrs, e.Addr.Addr().String())
			ports = append(ports, strconv.Itoa(int(e.Addr.Port())))
			seens = append(seens, strconv.FormatInt(e.Seen, 10))
		}
		certLen, dirCount := "", ""
		if len(d.Cert) > 0 {
			certLen = strconv.Itoa(len(d.Cert))
		}
		if len(d.Dir) > 0 {
			dirCount = strconv.Itoa(len(d.Dir))
		}
		want = append(want, "", strconv.Itoa(int(l.Version)), strconv.Itoa(int(d.Type)), fmt.Sprintf("0x%02x", l.Flags),
			d.Sender, strconv.FormatInt(d.Token.Gen, 10), d.Token.Origin, strconv.FormatUint(d.Session, 10),
			strconv.FormatUint(d.Nonce, 10), strconv.Itoa(int(d.ReplyPort)), certLen, dirCount,
			strings.Join(names, ","), strings.Join(addrs, ","), strings.Join(ports, ","), strings.Join(seens, ","),
			hex.EncodeToString(l.Signature))
		row[len(row)-1] = strings.ReplaceAll(row[len(row)-1], ":", "")
		for j := range fields {
			if row[j] != want[j] {
				t.Errorf("frame %d: %s: tshark %q, gopacket %q", n, fields[j], row[j], want[j])
			}
		}
	}

	// Annotations: tshark shows the comment, and decodes the JSON.
	rows, err = ts.Fields(ctx, file, `frame.interface_name == "harness"`, "frame.number", "frame.comment", "frame.protocols", "json.value.string")
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(annotations) {
		t.Fatalf("tshark shows %d annotations, want %d", len(rows), len(annotations))
	}
	for i, row := range rows {
		js, _ := json.Marshal(annotations[i])
		if row[1] != string(js) {
			t.Errorf("annotation %d: frame.comment %q, want %s", i, row[1], js)
		}
		if !strings.HasSuffix(row[2], "exported_pdu:json") || !strings.Contains(row[3], string(annotations[i].Kind)) {
			t.Errorf("annotation %d: protocols %q, JSON strings %q; want exported_pdu:json with kind %s", i, row[2], row[3], annotations[i].Kind)
		}
	}
}

type pairSide struct {
	ns netns.NsHandle
	ip netip.Addr
}

// checkTimeline runs `harness pcap` (pcaptimeline.Main) on the capture:
// two sessions, every datagram once per end with the second sighting
// marked as a copy, the resent Move marked as retransmission #1, the
// outage annotations inside session 41, the malformed datagram with its
// wire error.
func checkTimeline(t *testing.T, file string, p *pair) {
	t.Helper()
	var out, errOut bytes.Buffer
	if code := pcaptimeline.Main([]string{file}, &out, &errOut); code != 0 {
		t.Fatalf("harness pcap: exit %d: %s", code, errOut.String())
	}
	text := out.String()
	t.Logf("harness pcap %s:\n%s", file, text)
	ifA, ifB := "A/"+p.devA, "B/"+p.devB
	tok := "1750000000000000123@A"
	var s41, s42 []string
	var cur *[]string
	for _, line := range strings.Split(text, "\n") {
		switch {
		case strings.HasPrefix(line, "token "+tok+" session 41: 5 transmissions, 1 retransmission"):
			cur = &s41
		case strings.HasPrefix(line, "token "+tok+" session 42: 4 transmissions, 0 retransmissions"):
			cur = &s42
		case !strings.HasPrefix(line, "  "):
			cur = nil
		case cur != nil && !strings.Contains(line, "FRAME"):
			*cur = append(*cur, line)
		}
	}
	// Session 41: Move, (outage_start), Move again, (outage_end), Ack,
	// Commit, EarlyStop; each datagram on the sender's end, then a copy.
	type want struct{ iface, path, typ, tx string }
	w41 := []want{
		{ifA, "A → B", "Move", "tx1"}, {ifB, "A → B", "Move", "tx1 copy, same transmission as"},
		{"harness", "", "outage_start", ""},
		{ifA, "A → B", "Move", "tx2 retransmission #1"}, {ifB, "A → B", "Move", "tx2 retransmission #1 copy"},
		{"harness", "", "outage_end", ""},
		{ifB, "B → A", "Ack", "tx3"}, {ifA, "B → A", "Ack", "tx3 copy"},
		{ifA, "A → B", "Commit", "tx4"}, {ifB, "A → B", "Commit", "tx4 copy"},
		{ifB, "B → A", "EarlyStop", "tx5"}, {ifA, "B → A", "EarlyStop", "tx5 copy"},
	}
	w42 := []want{
		{ifB, "B → A", "Move", "tx1"}, {ifA, "B → A", "Move", "tx1 copy"},
		{ifA, "A → B", "Ack", "tx2"}, {ifB, "A → B", "Ack", "tx2 copy"},
		{ifB, "B → A", "Commit", "tx3"}, {ifA, "B → A", "Commit", "tx3 copy"},
		{ifA, "A → B", "EarlyStop", "tx4"}, {ifB, "A → B", "EarlyStop", "tx4 copy"},
	}
	for _, sec := range []struct {
		name string
		got  []string
		want []want
	}{{"session 41", s41, w41}, {"session 42", s42, w42}} {
		if len(sec.got) != len(sec.want) {
			t.Errorf("%s: %d lines, want %d", sec.name, len(sec.got), len(sec.want))
			continue
		}
		for i, w := range sec.want {
			f := strings.Fields(sec.got[i])
			line := sec.got[i]
			ok := len(f) > 4 && f[3] == w.iface
			if w.iface == "harness" {
				ok = ok && f[4] == "**" && f[5] == w.typ
			} else {
				ok = ok && strings.Contains(line, " "+w.path+" ") && strings.Contains(line, " "+w.typ+" ") && strings.Contains(line, w.tx)
				// A copy names the sighting it copies; a first sighting does not.
				ok = ok && strings.Contains(line, "copy") == strings.Contains(w.tx, "copy")
			}
			if !ok {
				t.Errorf("%s line %d: %q; want %+v", sec.name, i, line, w)
			}
		}
	}
	if !strings.Contains(text, "malformed datagrams on port 7400: 2") || strings.Count(text, "tokenbed: wire: flags at offset 4: bad-flags") != 2 {
		t.Errorf("malformed section missing or wrong")
	}
	if !strings.Contains(text, "harness annotations: 4") || !strings.Contains(text, "** agent_crash peer=B detail=SIGKILL seq=4") {
		t.Errorf("annotation section missing or wrong")
	}
	// A filter: B's view of session 42 only.
	out.Reset()
	if code := pcaptimeline.Main([]string{file, "-session", "42", "-agent", "B"}, &out, &errOut); code != 0 {
		t.Fatalf("harness pcap -session 42: exit %d: %s", code, errOut.String())
	}
	if strings.Contains(out.String(), "session 41") || strings.Count(out.String(), " B → A ")+strings.Count(out.String(), " A → B ") != 8 {
		t.Errorf("harness pcap -session 42 -agent B:\n%s", out.String())
	}
}
