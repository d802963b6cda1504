package pcaptimeline_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"tokenbed/agent/eventlog"
	"tokenbed/agent/wire"
	"tokenbed/analysis/pcaptimeline"
)

var (
	seedA, seedB = [32]byte{1}, [32]byte{2}
	keyA, keyB   = ed25519.NewKeyFromSeed(seedA[:]), ed25519.NewKeyFromSeed(seedB[:])
	addrA        = netip.MustParseAddrPort("10.1.0.1:7400")
	addrB        = netip.MustParseAddrPort("10.1.0.2:7400")
	addrC        = netip.MustParseAddrPort("10.1.0.3:7400") // only in A's directory
	addrD        = netip.MustParseAddrPort("10.1.0.4:7400") // never named
	tok1         = wire.TokenID{Gen: 1_000, Origin: "A"}
	tok2         = wire.TokenID{Gen: 2_000, Origin: "B"}
	t0           = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
)

// builder writes a synthetic capture: interfaces "A/eth0", "B/eth0" and
// the annotation interface "harness", like harness/capture does.
type builder struct {
	t   *testing.T
	buf bytes.Buffer
	w   *pcapgo.NgWriter
}

func newBuilder(t *testing.T) *builder {
	b := &builder{t: t}
	var err error
	b.w, err = pcapgo.NewNgWriterInterface(&b.buf, pcapgo.NgInterface{Name: "A/eth0", LinkType: layers.LinkTypeEthernet}, pcapgo.DefaultNgWriterOptions)
	if err != nil {
		t.Fatal(err)
	}
	b.w.AddInterface(pcapgo.NgInterface{Name: "B/eth0", LinkType: layers.LinkTypeEthernet})
	b.w.AddInterface(pcapgo.NgInterface{Name: "harness", LinkType: 252})
	return b
}

func frame(t *testing.T, src, dst netip.AddrPort, payload []byte) []byte {
	eth := &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}, EthernetType: layers.EthernetTypeIPv4}
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP, SrcIP: src.Addr().AsSlice(), DstIP: dst.Addr().AsSlice()}
	udp := &layers.UDP{SrcPort: layers.UDPPort(src.Port()), DstPort: layers.UDPPort(dst.Port())}
	udp.SetNetworkLayerForChecksum(ip)
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, eth, ip, udp, gopacket.Payload(payload)); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func (b *builder) packet(iface int, at time.Duration, data []byte) {
	ci := gopacket.CaptureInfo{Timestamp: t0.Add(at), CaptureLength: len(data), Length: len(data), InterfaceIndex: iface}
	if err := b.w.WritePacket(ci, data); err != nil {
		b.t.Fatal(err)
	}
}

// send records one datagram seen on the given interfaces at the given times.
func (b *builder) send(d wire.Datagram, key ed25519.PrivateKey, src, dst netip.AddrPort, seen map[int]time.Duration) []byte {
	enc, err := d.Encode(key, src, dst)
	if err != nil {
		b.t.Fatal(err)
	}
	// In time order, as the capture writes them.
	order := []int{0, 1}
	if at1, ok := seen[1]; ok {
		if at0, ok := seen[0]; !ok || at1 < at0 {
			order = []int{1, 0}
		}
	}
	for _, iface := range order {
		if at, ok := seen[iface]; ok {
			b.packet(iface, at, frame(b.t, src, dst, enc))
		}
	}
	return enc
}

func (b *builder) annotate(at time.Duration, ev eventlog.Event) {
	ev.WallNS = t0.Add(at).UnixNano()
	js, _ := json.Marshal(ev)
	rec := append([]byte{0, 12, 0, 4, 'j', 's', 'o', 'n', 0, 0, 0, 0}, js...)
	ci := gopacket.CaptureInfo{Timestamp: t0.Add(at), CaptureLength: len(rec), Length: len(rec), InterfaceIndex: 2}
	if err := b.w.WritePacketWithOptions(ci, rec, pcapgo.NgPacketOptions{Comments: []string{string(js)}}); err != nil {
		b.t.Fatal(err)
	}
}

func (b *builder) file() string {
	b.w.Flush()
	path := filepath.Join(b.t.TempDir(), "tl.pcapng")
	if err := os.WriteFile(path, b.buf.Bytes(), 0o644); err != nil {
		b.t.Fatal(err)
	}
	return path
}

const ms = time.Millisecond

// scenario: session 1 of tok1 with a Move sent three times (the second
// time with the same bytes, the third lost before B), its Ack, Commit and
// EarlyStop; session 7 of tok2, from B to C (named by A's directory) and to
// D (never named); a malformed datagram; noise; annotations.
func scenario(t *testing.T) string {
	b := newBuilder(t)
	move := wire.Datagram{Type: wire.Move, Sender: "A", Token: tok1, Session: 1, Nonce: 10, ReplyPort: 7400,
		Cert: []byte{0x30, 1, 2}, Dir: []wire.Entry{{Name: "C", Addr: addrC, Seen: 1}}}
	b.annotate(0, eventlog.Event{Agent: "harness", Seq: 1, Kind: eventlog.RunStarted, Detail: "synthetic"})
	b.send(move, keyA, addrA, addrB, map[int]time.Duration{0: 1 * ms, 1: 1*ms + 2000})
	b.annotate(2*ms, eventlog.Event{Agent: "harness", Seq: 2, Kind: eventlog.OutageStart, Link: "A>B", Reason: "loss"})
	b.send(move, keyA, addrA, addrB, map[int]time.Duration{0: 5 * ms, 1: 5*ms + 2000}) // same bytes again
	move.Nonce = 11
	b.send(move, keyA, addrA, addrB, map[int]time.Duration{0: 9 * ms}) // lost on the link
	b.annotate(10*ms, eventlog.Event{Agent: "harness", Seq: 3, Kind: eventlog.OutageEnd, Link: "A>B"})
	b.send(wire.Datagram{Type: wire.Ack, Sender: "B", Token: tok1, Session: 1, Nonce: 12, ReplyPort: 7400}, keyB, addrB, addrA,
		map[int]time.Duration{1: 11 * ms, 0: 11*ms + 3000})
	b.send(wire.Datagram{Type: wire.Commit, Sender: "A", Token: tok1, Session: 1, Nonce: 13}, keyA, addrA, addrB,
		map[int]time.Duration{0: 12 * ms, 1: 12*ms + 2000})
	b.send(wire.Datagram{Type: wire.EarlyStop, Sender: "B", Token: tok1, Session: 1, Nonce: 14}, keyB, addrB, addrA,
		map[int]time.Duration{1: 13 * ms, 0: 13*ms + 2000})

	b.send(wire.Datagram{Type: wire.Move, Sender: "B", Token: tok2, Session: 7, Nonce: 20, ReplyPort: 7400}, keyB, addrB, addrC,
		map[int]time.Duration{1: 20 * ms})
	b.send(wire.Datagram{Type: wire.Move, Sender: "B", Token: tok2, Session: 7, Nonce: 21, ReplyPort: 7400}, keyB, addrB, addrD,
		map[int]time.Duration{1: 21 * ms})
	b.annotate(22*ms, eventlog.Event{Agent: "harness", Seq: 4, Kind: eventlog.AgentCrash, Peer: "B"})

	commit := wire.Datagram{Type: wire.Commit, Sender: "A", Token: tok1, Session: 1, Nonce: 15}
	bad, _ := commit.Encode(keyA, addrA, addrB)
	bad[3] = 9
	b.packet(0, 30*ms, frame(t, addrA, addrB, bad))
	b.packet(0, 31*ms, frame(t, netip.MustParseAddrPort("10.1.0.1:40000"), netip.MustParseAddrPort("10.1.0.2:53"), []byte("not tokenbed")))
	return b.file()
}

func run(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := pcaptimeline.Main(args, &out, &errb)
	return out.String(), errb.String(), code
}

// sections splits the text output into its sections, by header line.
func sections(out string) map[string][]string {
	s := map[string][]string{}
	cur := "summary"
	for _, line := range strings.Split(out, "\n") {
		if line == "" {
			continue
		}
		if !strings.HasPrefix(line, "  ") {
			cur = line
		}
		s[cur] = append(s[cur], line)
	}
	return s
}

func TestTimelineScenario(t *testing.T) {
	path := scenario(t)
	out, errOut, code := run(t, path)
	if code != 0 || errOut != "" {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	t.Log("\n" + out)
	sec := sections(out)
	s1 := sec["token 1000@A session 1: 6 transmissions, 2 retransmissions"]
	s7 := sec["token 2000@B session 7: 2 transmissions, 0 retransmissions"]
	if s1 == nil || s7 == nil {
		t.Fatalf("missing session sections; have %q", keys(sec))
	}
	if !strings.Contains(out, "whole file: 13 sightings of token passing datagrams on port 7400 (8 transmissions, 2 retransmissions), 1 malformed sighting, 4 annotations, 1 other packet") {
		t.Errorf("summary:\n%s", strings.Join(sec["summary"], "\n"))
	}
	// Session 1, line by line: frame, interface, path, type, transmission.
	want := []string{
		`FRAME`,
		`#2 .* A/eth0 +A → B +Move +10 +cert +tx1$`,
		`#3 .* B/eth0 +A → B +Move +10 +cert +tx1 copy, same transmission as #2 on A/eth0 \(2µs later\)$`,
		`#4 .* harness +\*\* outage_start link=A>B reason=loss seq=2$`,
		`#5 .* A/eth0 +A → B +Move +10 +cert +tx2 retransmission #1$`,
		`#6 .* B/eth0 +A → B +Move +10 +cert +tx2 retransmission #1 copy, same transmission as #5 on A/eth0 \(2µs later\)$`,
		`#7 .* A/eth0 +A → B +Move +11 +cert +tx3 retransmission #2$`,
		`#8 .* harness +\*\* outage_end link=A>B seq=3$`,
		`#9 .* B/eth0 +B → A +Ack +12 +tx4$`,
		`#10 .* A/eth0 +B → A +Ack +12 +tx4 copy, same transmission as #9 on B/eth0 \(3µs later\)$`,
		`#11 .* A/eth0 +A → B +Commit +13 +tx5$`,
		`#12 .* B/eth0 +A → B +Commit +13 +tx5 copy`,
		`#13 .* B/eth0 +B → A +EarlyStop +14 +tx6$`,
		`#14 .* A/eth0 +B → A +EarlyStop +14 +tx6 copy`,
	}
	matchLines(t, "session 1", s1[1:], want)
	matchLines(t, "session 7", s7[1:], []string{
		`FRAME`,
		`#15 .* B/eth0 +B → C +Move +20 +tx1$`, // C named by A's directory
		`#16 .* B/eth0 +B → 10\.1\.0\.4:7400 +Move +21 +tx2$`, // D never named
	})
	matchLines(t, "malformed", sec["malformed datagrams on port 7400: 1"][1:], []string{
		`#18 .* A/eth0 +A → B +10\.1\.0\.1:7400 → 10\.1\.0\.2:7400 +tokenbed: wire: type at offset 3: bad-type$`,
	})
	matchLines(t, "annotations", sec["harness annotations: 4"][1:], []string{
		`#1 +\+0\.000000000 +2026-01-02T03:04:05\.000000000Z +harness +\*\* run_started detail=synthetic seq=1$`,
		`#4 +\+0\.002000000 .* outage_start`,
		`#8 .* outage_end`,
		`#17 +\+0\.022000000 +2026-01-02T03:04:05\.022000000Z +harness +\*\* agent_crash peer=B seq=4$`,
	})
}

func keys(m map[string][]string) []string {
	var k []string
	for s := range m {
		k = append(k, s)
	}
	return k
}

func matchLines(t *testing.T, what string, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d lines, want %d:\n%s", what, len(got), len(want), strings.Join(got, "\n"))
		return
	}
	for i := range want {
		if !regexp.MustCompile(want[i]).MatchString(strings.TrimSpace(got[i])) {
			t.Errorf("%s line %d:\n got %s\nwant /%s/", what, i, got[i], want[i])
		}
	}
}

func TestTimelineFilters(t *testing.T) {
	path := scenario(t)
	frames := func(out string) string {
		var f []string
		for _, m := range regexp.MustCompile(`(?m)^  (#\d+) `).FindAllStringSubmatch(out, -1) {
			f = append(f, m[1])
		}
		return strings.Join(f, " ")
	}
	cases := []struct {
		args []string
		want string // frames shown, in output order
	}{
		{[]string{"-session", "7"}, "#15 #16 #1 #4 #8 #17"},
		{[]string{"-token", "2000@B"}, "#15 #16 #1 #4 #8 #17"},
		{[]string{"-token", "1000@A", "-session", "7"}, "#1 #4 #8 #17"},
		// A's datagrams and what names A or no agent at all.
		{[]string{"-agent", "A", "-session", "1"}, "#2 #3 #4 #5 #6 #7 #8 #9 #10 #11 #12 #13 #14 #1 #4 #8"},
		// C received one Move; the crash of B does not concern C.
		{[]string{"-agent", "C"}, "#15 #1"},
		// Relative window, flags after the file.
		{[]string{"-from", "+4ms", "-to", "+10ms"}, "#5 #6 #7 #8"}, // #8 is after the last datagram
		{[]string{"-from", "2026-01-02T03:04:05.011Z", "-to", "2026-01-02T03:04:05.0115Z"}, "#9 #10"},
		{[]string{"-from", "+29ms"}, "#18"},
	}
	for _, c := range cases {
		args := append([]string{path}, c.args...)
		out, errOut, code := run(t, args...)
		if code != 0 {
			t.Errorf("%v: exit %d: %s", c.args, code, errOut)
			continue
		}
		if got := frames(out); got != c.want {
			t.Errorf("%v: frames %q, want %q\n%s", c.args, got, c.want, out)
		}
	}
	// The numbering is the whole file's: a filter does not renumber.
	out, _, _ := run(t, path, "-from", "+4ms", "-to", "+6ms")
	if !strings.Contains(out, "tx2 retransmission #1") {
		t.Errorf("filtered output lost the retransmission number:\n%s", out)
	}
}

func TestMainErrors(t *testing.T) {
	path := scenario(t)
	cases := []struct {
		args []string
		code int
		msg  string
	}{
		{nil, 2, "want one capture file, got 0"},
		{[]string{path, path}, 2, "want one capture file, got 2"},
		{[]string{path, "-session", "x"}, 2, `-session "x": want a decimal session id`},
		{[]string{path, "-token", "x"}, 2, `-token: token id "x": want GEN@ORIGIN`},
		{[]string{path, "-from", "yesterday"}, 2, `-from "yesterday": want an RFC 3339 time`},
		{[]string{path, "-to", "-5s"}, 2, `-to "-5s": negative offset`},
		{[]string{path, "-port", "70000"}, 2, "-port 70000: want 1 to 65535"},
		{[]string{path, "-client", "7"}, 2, `-client "7": want a client ID TERM.N (c1.7)`},
		{[]string{path, "-client", "c0.0"}, 2, `-client "c0.0": want a client ID TERM.N (c1.7)`},
		{[]string{path, "-bogus"}, 2, "flag provided but not defined: -bogus"},
		{[]string{"/nonexistent.pcapng"}, 1, "open /nonexistent.pcapng: no such file or directory"},
		{[]string{os.Args[0]}, 1, "not a pcap or pcapng file"},
	}
	for _, c := range cases {
		out, errOut, code := run(t, c.args...)
		if code != c.code || !strings.Contains(errOut, c.msg) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", c.args, code, errOut, c.code, c.msg)
		}
		if code != 0 && out != "" {
			t.Errorf("%v: wrote to stdout on error: %q", c.args, out)
		}
	}
	// Help is not an error: the usage goes to stdout, exit 0.
	out, errOut, code := run(t, "-h")
	if code != 0 || !strings.Contains(out, "usage: harness pcap [flags] FILE") || errOut != "" {
		t.Errorf("-h: exit %d, stdout %q, stderr %q; want 0, the usage on stdout, nothing on stderr", code, out, errOut)
	}
}

// A capture cut inside its last record (the capturing process killed
// mid-write) shows everything before it, and says so.
func TestTimelineTruncated(t *testing.T) {
	path := scenario(t)
	b, _ := os.ReadFile(path)
	os.WriteFile(path, b[:len(b)-30], 0o644)
	tl, err := pcaptimeline.ReadFile(path, pcaptimeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if tl.Truncated == nil || tl.Records != 18 {
		t.Errorf("truncated %v, %d records; want the cut reported and 18 whole records", tl.Truncated, tl.Records)
	}
	out, _, code := run(t, path)
	if code != 0 || !strings.Contains(out, "note: the file ends inside a record") || !strings.Contains(out, "#18 ") {
		t.Errorf("exit %d:\n%s", code, out)
	}
}

// A plain pcap file (one interface, microsecond or nanosecond) works too.
func TestTimelinePcap(t *testing.T) {
	var buf bytes.Buffer
	w := pcapgo.NewWriterNanos(&buf)
	if err := w.WriteFileHeader(65535, layers.LinkTypeEthernet); err != nil {
		t.Fatal(err)
	}
	d := wire.Datagram{Type: wire.Commit, Sender: "A", Token: tok1, Session: 3, Nonce: 1}
	enc, _ := d.Encode(keyA, addrA, addrB)
	for i, at := range []time.Duration{0, 5 * ms} {
		fr := frame(t, addrA, addrB, enc)
		if err := w.WritePacket(gopacket.CaptureInfo{Timestamp: t0.Add(at + time.Duration(i)), CaptureLength: len(fr), Length: len(fr)}, fr); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "plain.pcap")
	os.WriteFile(path, buf.Bytes(), 0o644)
	tl, err := pcaptimeline.ReadFile(path, pcaptimeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if tl.Format != "pcap" || len(tl.Groups) != 1 || len(tl.Groups[0].Lines) != 2 {
		t.Fatalf("format %s, groups %+v", tl.Format, tl.Groups)
	}
	// One interface: the same bytes again are a retransmission, not a copy.
	second := tl.Groups[0].Lines[1].Obs
	if second.CopyOf != nil || second.Tx != 2 || second.Retransmission != 1 {
		t.Errorf("second sighting: copy of %v, tx %d, retransmission %d; want tx 2, retransmission 1", second.CopyOf, second.Tx, second.Retransmission)
	}
	if got := second.Time.Sub(t0); got != 5*ms+1 {
		t.Errorf("nanosecond pcap timestamp: %v after t0, want 5.000001ms", got)
	}
}
