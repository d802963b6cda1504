package wireshark_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"tokenbed/agent/wire"
	"tokenbed/agent/wire/wirelayer"
	"tokenbed/analysis/wireshark"
)

func init() { wirelayer.Register(wirelayer.DefaultPort) }

var (
	keySeed = [32]byte{9, 9, 9}
	key     = ed25519.NewKeyFromSeed(keySeed[:])
	addrA   = netip.MustParseAddrPort("10.7.0.1:7400")
	addrB   = netip.MustParseAddrPort("10.7.0.2:7400")
	addr6A  = netip.MustParseAddrPort("[fd00::1]:7400")
	addr6B  = netip.MustParseAddrPort("[fd00::2]:41000")
)

// tshark returns a runner with the dissector loaded. Without tshark the
// test fails when root (make deps installs it) and skips otherwise.
func tshark(t *testing.T) *wireshark.Tshark {
	t.Helper()
	ts, err := wireshark.New(t.TempDir())
	if errors.Is(err, wireshark.ErrNoTshark) {
		if os.Geteuid() == 0 {
			t.Fatalf("%v: as root, `make deps` installs it; refusing to skip", err)
		}
		t.Skipf("%v (not root, cannot install it)", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := ts.Check(ctx); err != nil {
		t.Fatal(err)
	}
	return ts
}

func cert(t testing.TB) []byte {
	pub := key.Public().(ed25519.PublicKey)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "A"},
		NotBefore: time.Unix(1_700_000_000, 0), NotAfter: time.Unix(1_800_000_000, 0)}
	der, err := x509.CreateCertificate(nil, tmpl, tmpl, pub, key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func valid(t testing.TB) []wire.Datagram {
	tok := wire.TokenID{Gen: 1_700_000_000_123_456_789, Origin: "origin-C"}
	return []wire.Datagram{
		{Type: wire.Move, Sender: "A", Token: tok, Session: 41, Nonce: 1_750_000_000_000_000_001, ReplyPort: 7400,
			Cert: cert(t), Dir: []wire.Entry{
				{Name: "A", Addr: addrA, Seen: 11, Sig: [wire.SigLen]byte{0xfe, 1, 2, 3, 63: 0x7f}},
				{Name: "peer-c.example", Addr: netip.MustParseAddrPort("[fd00::3]:7401"), Seen: -1},
			}},
		{Type: wire.Move, Sender: "A", Token: tok, Session: 1<<63 + 5, Nonce: 1, ReplyPort: 7400},
		{Type: wire.Ack, Sender: "node_B.x", Token: tok, Session: 41, Nonce: 2, ReplyPort: 7402,
			Dir: []wire.Entry{{Name: "B", Addr: addrB, Seen: 1_700_000_000_000_000_001}}},
		{Type: wire.Ack, Sender: "B", Token: wire.TokenID{Gen: -5, Origin: "B"}, Session: 0, Nonce: 0, ReplyPort: 1, Cert: []byte{0x30}},
		{Type: wire.Commit, Sender: "A", Token: tok, Session: 41, Nonce: 3},
		{Type: wire.EarlyStop, Sender: "B", Token: tok, Session: 41, Nonce: 1<<64 - 1},
		// The 3-way exchange's pass id (004 §4).
		{Type: wire.Move, Sender: "A", Token: tok, Session: 42, PassID: 0x9e3779b97f4a7c15, Nonce: 4, ReplyPort: 7400, Cert: []byte{0x30}},
		{Type: wire.Ack, Sender: "B", Token: tok, Session: 42, PassID: 1, Nonce: 5, ReplyPort: 7400},
		{Type: wire.Commit, Sender: "A", Token: tok, Session: 42, PassID: 1<<64 - 1, Nonce: 6},
	}
}

// raw builds a datagram byte by byte (with a zero signature), to reach
// every check of wire.Decode.
type raw struct{ b []byte }

func header(typ, flags byte, sender string) *raw {
	r := &raw{b: []byte{'T', 'B', wire.Version, typ, flags, byte(len(sender))}}
	r.b = append(r.b, sender...)
	return r
}
func (r *raw) u8(v byte) *raw      { r.b = append(r.b, v); return r }
func (r *raw) u16(v uint16) *raw   { r.b = binary.BigEndian.AppendUint16(r.b, v); return r }
func (r *raw) u64(v uint64) *raw   { r.b = binary.BigEndian.AppendUint64(r.b, v); return r }
func (r *raw) bytes(p []byte) *raw { r.b = append(r.b, p...); return r }
func (r *raw) name(s string) *raw  { return r.u8(byte(len(s))).bytes([]byte(s)) }
func (r *raw) fixed(port uint16) *raw {
	return r.u64(1_700_000_000_000_000_000).name("C").u64(7).u64(8).u16(port)
}
func (r *raw) sig() []byte { return append(r.b, make([]byte, wire.SigLen)...) }

// handmade are malformed datagrams that hit every check of wire.Decode.
func handmade() map[string][]byte {
	esig := make([]byte, wire.SigLen)
	v4 := func(r *raw, name string) *raw {
		return r.name(name).u8(4).bytes([]byte{10, 0, 0, 1}).u16(7400).u64(5).bytes(esig)
	}
	m := map[string][]byte{
		"bad-magic":          append([]byte("XB"), header(1, 0, "A").fixed(7400).sig()[2:]...),
		"bad-version":        func() []byte { b := header(1, 0, "A").fixed(7400).sig(); b[2] = 1; return b }(),
		"bad-type":           header(5, 0, "A").fixed(7400).sig(),
		"flags-high-bit":     header(1, 0x08, "A").fixed(7400).sig(),
		"pass-id-zero":       header(3, 0x04, "A").fixed(0).u64(0).sig(),
		"pass-id-truncated":  header(3, 0x04, "A").fixed(0).u16(1).sig(),
		"flags-in-commit":    header(3, 0x01, "A").fixed(0).sig(),
		"sender-len-zero":    header(1, 0, "").fixed(7400).sig(),
		"sender-len-64":      header(1, 0, strings.Repeat("a", 64)).fixed(7400).sig(),
		"sender-bad-name":    header(1, 0, "a b").fixed(7400).sig(),
		"sender-truncated":   append(header(1, 0, "A").b[:5], append([]byte{60}, make([]byte, wire.SigLen+3)...)...),
		"origin-bad":         header(1, 0, "A").u64(1).name("C/D").u64(7).u64(8).u16(7400).sig(),
		"origin-len-zero":    header(1, 0, "A").u64(1).u8(0).u64(7).u64(8).u16(7400).sig(),
		"reply-port-zero":    header(1, 0, "A").fixed(0).sig(),
		"reply-port-commit":  header(3, 0, "A").fixed(9).sig(),
		"nonce-truncated":    header(4, 0, "A").u64(1).name("C").u64(7).u16(1).sig(),
		"cert-len-zero":      header(1, 1, "A").fixed(7400).u16(0).sig(),
		"cert-len-1025":      header(1, 1, "A").fixed(7400).u16(1025).bytes(make([]byte, 1025)).sig(),
		"cert-truncated":     header(2, 1, "A").fixed(7400).u16(100).bytes(make([]byte, 10)).sig(),
		"dir-count-zero":     header(1, 2, "A").fixed(7400).u8(0).sig(),
		"dir-count-33":       header(1, 2, "A").fixed(7400).u8(33).sig(),
		"dir-name-bad":       v4(header(1, 2, "A").fixed(7400).u8(1), "x y").sig(),
		"dir-addr-len-5":     header(1, 2, "A").fixed(7400).u8(1).name("B").u8(5).bytes(make([]byte, 5)).u16(1).u64(1).sig(),
		"dir-addr-4in6":      header(1, 2, "A").fixed(7400).u8(1).name("B").u8(16).bytes(netip.MustParseAddr("::ffff:10.0.0.1").AsSlice()).u16(1).u64(1).bytes(esig).sig(),
		"dir-second-4in6":    v4(header(1, 2, "A").fixed(7400).u8(2), "B").name("C").u8(16).bytes(netip.MustParseAddr("::ffff:10.0.0.2").AsSlice()).u16(1).u64(1).bytes(esig).sig(),
		"dir-sig-truncated":  header(1, 2, "A").fixed(7400).u8(1).name("B").u8(4).bytes([]byte{1, 2, 3, 4}).u16(1).u64(1).bytes(esig[:20]).sig(),
		"dir-seen-truncated": header(1, 2, "A").fixed(7400).u8(1).name("B").u8(4).bytes([]byte{1, 2, 3, 4}).u16(1).u16(0).sig(),
		"dir-missing-entry":  v4(header(1, 2, "A").fixed(7400).u8(2), "B").sig(),
		"trailing-bytes":     header(4, 0, "A").fixed(0).u8(0).sig(),
		"too-short":          []byte("TB\x01\x01"),
		"too-large":          header(1, 1, "A").fixed(7400).u16(1024).bytes(make([]byte, 1024)).bytes(make([]byte, 200)).sig(),
	}
	return m
}

// frame wraps payload in Ethernet/IP/UDP from src to dst.
func frame(t testing.TB, src, dst netip.AddrPort, payload []byte) []byte {
	t.Helper()
	eth := &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}}
	udp := &layers.UDP{SrcPort: layers.UDPPort(src.Port()), DstPort: layers.UDPPort(dst.Port())}
	var ip gopacket.SerializableLayer
	if src.Addr().Is4() {
		eth.EthernetType = layers.EthernetTypeIPv4
		ip4 := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP, SrcIP: src.Addr().AsSlice(), DstIP: dst.Addr().AsSlice()}
		_ = udp.SetNetworkLayerForChecksum(ip4)
		ip = ip4
	} else {
		eth.EthernetType = layers.EthernetTypeIPv6
		ip6 := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolUDP, SrcIP: src.Addr().AsSlice(), DstIP: dst.Addr().AsSlice()}
		_ = udp.SetNetworkLayerForChecksum(ip6)
		ip = ip6
	}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
		eth, ip, udp, gopacket.Payload(payload)); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

type sample struct {
	name    string
	payload []byte
}

// corpus is every valid datagram, the handmade malformed ones, and nMut
// seeded random mutations of the valid ones.
func corpus(t *testing.T, seed uint64, nMut int) []sample {
	var out []sample
	var encs [][]byte
	for i, d := range valid(t) {
		b, err := d.Encode(key, addrA, addrB)
		if err != nil {
			t.Fatal(err)
		}
		encs = append(encs, b)
		out = append(out, sample{fmt.Sprintf("valid-%d-%v", i, d.Type), b})
	}
	hm := handmade()
	names := make([]string, 0, len(hm))
	for n := range hm {
		names = append(names, n)
	}
	// Map order is random; the corpus order must not be.
	sortStrings(names)
	for _, n := range names {
		out = append(out, sample{n, hm[n]})
	}
	rng := rand.New(rand.NewPCG(seed, 0))
	for i := 0; i < nMut; i++ {
		b := bytes.Clone(encs[rng.IntN(len(encs))])
		switch rng.IntN(4) {
		case 0: // flip bytes in the body
			for k := 1 + rng.IntN(3); k > 0; k-- {
				b[rng.IntN(len(b)-wire.SigLen)] ^= byte(1 + rng.IntN(255))
			}
		case 1: // set one header byte to a small value
			b[rng.IntN(min(len(b)-wire.SigLen, 40))] = byte(rng.IntN(70))
		case 2: // cut the body
			cut := rng.IntN(len(b) - wire.SigLen)
			b = append(b[:cut:cut], b[len(b)-wire.SigLen:]...)
		case 3: // insert a byte
			at := rng.IntN(len(b) - wire.SigLen)
			b = append(b[:at:at], append([]byte{byte(rng.IntN(256))}, b[at:]...)...)
		}
		out = append(out, sample{fmt.Sprintf("mutation-%d", i), b})
	}
	return out
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// Fields compared between tshark and gopacket, in tshark -e order.
var fieldNames = []string{
	"frame.number", "tokenbed.error", "tokenbed.version", "tokenbed.type", "tokenbed.flags",
	"tokenbed.sender", "tokenbed.token", "tokenbed.token_gen", "tokenbed.token_origin",
	"tokenbed.session", "tokenbed.nonce", "tokenbed.reply_port", "tokenbed.cert_len", "tokenbed.cert",
	"tokenbed.dir_count", "tokenbed.dir.name", "tokenbed.dir.addr", "tokenbed.dir.port",
	"tokenbed.dir.seen", "tokenbed.dir.signature", "tokenbed.signature", "tokenbed.pass_id",
}

// Expected renders what gopacket decoded in tshark's -T fields format.
func Expected(frameNo int, d *wirelayer.Datagram, decodeErr error) []string {
	row := make([]string, len(fieldNames))
	row[0] = strconv.Itoa(frameNo)
	if decodeErr != nil {
		var we *wire.Error
		if errors.As(decodeErr, &we) {
			row[1] = strings.TrimPrefix(we.Error(), "wire: ")
		} else {
			row[1] = "not a wire.Error: " + decodeErr.Error()
		}
		return row
	}
	row[2] = strconv.Itoa(int(d.Version))
	row[3] = strconv.Itoa(int(d.Type))
	row[4] = fmt.Sprintf("0x%02x", d.Flags)
	row[5] = d.Sender
	row[6] = d.Token.String()
	row[7] = strconv.FormatInt(d.Token.Gen, 10)
	row[8] = d.Token.Origin
	row[9] = strconv.FormatUint(d.Session, 10)
	row[10] = strconv.FormatUint(d.Nonce, 10)
	row[11] = strconv.Itoa(int(d.ReplyPort))
	if len(d.Cert) > 0 {
		row[12] = strconv.Itoa(len(d.Cert))
		row[13] = hex.EncodeToString(d.Cert)
	}
	if len(d.Dir) > 0 {
		row[14] = strconv.Itoa(len(d.Dir))
		var names, addrs, ports, seens, sigs []string
		for _, e := range d.Dir {
			names = append(names, e.Name)
			addrs = append(addrs, e.Addr.Addr().String())
			ports = append(ports, strconv.Itoa(int(e.Addr.Port())))
			seens = append(seens, strconv.FormatInt(e.Seen, 10))
			sigs = append(sigs, hex.EncodeToString(e.Sig[:]))
		}
		row[15], row[16], row[17], row[18] = strings.Join(names, ","), strings.Join(addrs, ","), strings.Join(ports, ","), strings.Join(seens, ",")
		row[19] = strings.Join(sigs, ",")
	}
	row[20] = hex.EncodeToString(d.Signature)
	if d.PassID != 0 {
		row[21] = fmt.Sprintf("0x%016x", d.PassID)
	}
	return row
}

// TestDissectorMatchesGopacket writes valid, handmade-malformed and
// randomly mutated datagrams to a pcapng file, decodes it with gopacket
// and wirelayer, and with tshark and tokenbed.lua: every field, and every
// error (field, offset, reason), must be the same.
func TestDissectorMatchesGopacket(t *testing.T) {
	ts := tshark(t)
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("TOKENBED_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("mutation seed %d (rerun with TOKENBED_SEED=%d)", seed, seed)
	samples := corpus(t, seed, 400)

	file := filepath.Join(t.TempDir(), "corpus.pcapng")
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	w, err := pcapgo.NewNgWriter(f, layers.LinkTypeEthernet)
	if err != nil {
		t.Fatal(err)
	}
	var want [][]string
	base := time.Unix(1_750_000_000, 0)
	var (
		eth layers.Ethernet
		ip4 layers.IPv4
		ip6 layers.IPv6
		udp layers.UDP
		tb  wirelayer.Datagram
		dec []gopacket.LayerType
	)
	parser := gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet, &eth, &ip4, &ip6, &udp, &tb)
	errFields := map[string]bool{}
	for i, s := range samples {
		src, dst := addrA, addrB
		if i%3 == 1 {
			src, dst = addr6B, addr6A
		}
		fr := frame(t, src, dst, s.payload)
		ci := gopacket.CaptureInfo{Timestamp: base.Add(time.Duration(i) * time.Millisecond), CaptureLength: len(fr), Length: len(fr)}
		if err := w.WritePacket(ci, fr); err != nil {
			t.Fatal(err)
		}
		err := parser.DecodeLayers(fr, &dec)
		var we *wire.Error
		if errors.As(err, &we) {
			errFields[we.Field+"/"+we.Reason] = true
		}
		want = append(want, Expected(i+1, &tb, err))
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	// The handmade corpus must reach every check of wire.Decode.
	for _, fr := range []string{"magic/bad-magic", "version/bad-version", "type/bad-type", "flags/bad-flags",
		"sender.length/bad-length", "sender/bad-name", "sender/truncated", "token.origin/bad-name",
		"token.origin.length/bad-length", "reply_port/bad-port", "nonce/truncated", "certificate.length/bad-length",
		"certificate/truncated", "directory.count/bad-length", "directory.name/bad-name",
		"directory.addr.length/bad-length", "directory.addr/bad-addr", "directory.seen/truncated",
		"directory.name.length/truncated", "datagram/trailing-bytes", "datagram/truncated", "datagram/too-large",
		"pass_id/bad-value", "pass_id/truncated"} {
		if !errFields[fr] {
			t.Errorf("corpus does not exercise %s", fr)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	got, err := ts.Fields(ctx, file, "", fieldNames...)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("tshark printed %d rows, want %d", len(got), len(want))
	}
	bad := 0
	for i := range want {
		for j := range fieldNames {
			if want[i][1] != "" && j > 1 {
				// Malformed: the dissector shows what it read before the
				// error; the error itself is the comparison.
				break
			}
			g := got[i][j]
			if fieldNames[j] == "tokenbed.cert" || fieldNames[j] == "tokenbed.signature" || fieldNames[j] == "tokenbed.dir.signature" {
				g = strings.ReplaceAll(g, ":", "")
			}
			if g != want[i][j] {
				bad++
				if bad <= 20 {
					t.Errorf("%s (frame %d): %s: tshark %q, gopacket %q", samples[i].name, i+1, fieldNames[j], got[i][j], want[i][j])
				}
			}
		}
	}
	if bad > 20 {
		t.Errorf("... %d mismatches in all", bad)
	}

	// Malformed datagrams raise the expert item, valid ones do not.
	rows, err := ts.Fields(ctx, file, "tokenbed", "frame.number", "_ws.expert.group", "_ws.expert.message")
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rows {
		isErr := want[i][1] != ""
		// PI_MALFORMED is 0x07000000.
		hasExpert := strings.Contains(r[2], "Malformed tokenbed datagram: "+want[i][1]) && strings.Contains(r[1], "117440512")
		if isErr != hasExpert || (!isErr && r[1] != "") {
			t.Errorf("%s: expert group %q message %q; malformed=%v", samples[i].name, r[1], r[2], isErr)
		}
	}
}
