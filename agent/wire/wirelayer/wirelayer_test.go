package wirelayer_test

import (
	"crypto/ed25519"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"net"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"tokenbed/agent/wire"
	"tokenbed/agent/wire/wirelayer"
)

const port = 7400

func init() { wirelayer.Register(port) }

var (
	keySeed = [32]byte{7, 4, 0, 0}
	key     = ed25519.NewKeyFromSeed(keySeed[:])
	pub     = key.Public().(ed25519.PublicKey)
	addrA   = netip.MustParseAddrPort("10.7.0.1:7400")
	addrB   = netip.MustParseAddrPort("10.7.0.2:7400")
	addr6A  = netip.MustParseAddrPort("[fd00::1]:7400")
	addr6B  = netip.MustParseAddrPort("[fd00::2]:40000")
)

// selfSigned returns a real Ed25519 X.509 certificate, the kind a Move
// piggybacks (002 §3).
func selfSigned(t testing.TB) []byte {
	t.Helper()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "A"},
		NotBefore:    time.Unix(1_700_000_000, 0),
		NotAfter:     time.Unix(1_800_000_000, 0),
	}
	der, err := x509.CreateCertificate(nil, tmpl, tmpl, pub, key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func samples(t testing.TB) []wire.Datagram {
	cert := selfSigned(t)
	tok := wire.TokenID{Gen: 1_700_000_000_123_456_789, Origin: "origin-C"}
	return []wire.Datagram{
		{Type: wire.Move, Sender: "A", Token: tok, Session: 41, Nonce: 0xdeadbeefcafe, ReplyPort: 7400,
			Cert: cert, Dir: []wire.Entry{
				{Name: "A", Addr: addrA, Seen: 11},
				{Name: "peer-c.example", Addr: netip.MustParseAddrPort("[fd00::3]:7401"), Seen: -1},
			}},
		{Type: wire.Move, Sender: "A", Token: tok, Session: 42, Nonce: 1, ReplyPort: 7400},
		{Type: wire.Ack, Sender: "B", Token: tok, Session: 41, Nonce: 2, ReplyPort: 7402,
			Dir: []wire.Entry{{Name: "B", Addr: addrB, Seen: 1_700_000_000_000_000_001}}},
		{Type: wire.Commit, Sender: "A", Token: tok, Session: 41, Nonce: 3},
		{Type: wire.EarlyStop, Sender: "B", Token: tok, Session: 41, Nonce: 1<<64 - 1},
	}
}

// frame wraps payload in Ethernet/IP/UDP from src to dst.
func frame(t testing.TB, src, dst netip.AddrPort, payload []byte) []byte {
	t.Helper()
	eth := &layers.Ethernet{
		SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1},
		DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2},
	}
	udp := &layers.UDP{SrcPort: layers.UDPPort(src.Port()), DstPort: layers.UDPPort(dst.Port())}
	var ip gopacket.NetworkLayer
	if src.Addr().Is4() {
		eth.EthernetType = layers.EthernetTypeIPv4
		ip4 := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP,
			SrcIP: src.Addr().AsSlice(), DstIP: dst.Addr().AsSlice()}
		ip = ip4
	} else {
		eth.EthernetType = layers.EthernetTypeIPv6
		ip6 := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolUDP,
			SrcIP: src.Addr().AsSlice(), DstIP: dst.Addr().AsSlice()}
		ip = ip6
	}
	if err := udp.SetNetworkLayerForChecksum(ip); err != nil {
		t.Fatal(err)
	}
	buf := gopacket.NewSerializeBuffer()
	opts := gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}
	if err := gopacket.SerializeLayers(buf, opts, eth, ip.(gopacket.SerializableLayer), udp, gopacket.Payload(payload)); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func checkLayer(t *testing.T, got *wirelayer.Datagram, want wire.Datagram, enc []byte, src, dst netip.AddrPort) {
	t.Helper()
	if !reflect.DeepEqual(got.Datagram, want) {
		t.Errorf("%v: fields:\n got %+v\nwant %+v", want.Type, got.Datagram, want)
	}
	if got.Version != wire.Version {
		t.Errorf("%v: version %d, want %d", want.Type, got.Version, wire.Version)
	}
	var flags uint8
	if len(want.Cert) > 0 {
		flags |= 1
	}
	if len(want.Dir) > 0 {
		flags |= 2
	}
	if got.Flags != flags {
		t.Errorf("%v: flags %#x, want %#x", want.Type, got.Flags, flags)
	}
	if string(got.Signature) != string(enc[len(enc)-wire.SigLen:]) {
		t.Errorf("%v: signature %x, want the last %d bytes of the datagram", want.Type, got.Signature, wire.SigLen)
	}
	if string(got.Payload()) != string(enc) || string(got.LayerContents()) != string(enc) {
		t.Errorf("%v: payload/contents differ from the datagram", want.Type)
	}
	if len(got.LayerPayload()) != 0 {
		t.Errorf("%v: layer payload %d bytes, want none", want.Type, len(got.LayerPayload()))
	}
	if !got.Verify(pub, src, dst) {
		t.Errorf("%v: signature does not verify for %v→%v", want.Type, src, dst)
	}
	if got.Verify(pub, dst, src) {
		t.Errorf("%v: signature verifies for the reversed path", want.Type)
	}
}

func TestNewPacketDecodesEveryType(t *testing.T) {
	for _, path := range [][2]netip.AddrPort{{addrA, addrB}, {addr6A, addr6B}, {addr6B, addr6A}} {
		for _, d := range samples(t) {
			enc, err := d.Encode(key, path[0], path[1])
			if err != nil {
				t.Fatal(err)
			}
			p := gopacket.NewPacket(frame(t, path[0], path[1], enc), layers.LayerTypeEthernet, gopacket.Default)
			if e := p.ErrorLayer(); e != nil {
				t.Fatalf("%v %v→%v: decode failure: %v", d.Type, path[0], path[1], e.Error())
			}
			l, ok := p.Layer(wirelayer.LayerType).(*wirelayer.Datagram)
			if !ok {
				t.Fatalf("%v %v→%v: no tokenbed layer in %v", d.Type, path[0], path[1], p)
			}
			if p.ApplicationLayer() != gopacket.ApplicationLayer(l) {
				t.Errorf("%v: application layer is %T, want the tokenbed layer", d.Type, p.ApplicationLayer())
			}
			checkLayer(t, l, d, enc, path[0], path[1])
		}
	}
}

func TestDecodingLayerParserDecodesEveryType(t *testing.T) {
	var (
		eth  layers.Ethernet
		ip4  layers.IPv4
		ip6  layers.IPv6
		udp  layers.UDP
		tb   wirelayer.Datagram
		dec  []gopacket.LayerType
		want = []gopacket.LayerType{layers.LayerTypeEthernet, 0, layers.LayerTypeUDP, wirelayer.LayerType}
	)
	parser := gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet, &eth, &ip4, &ip6, &udp, &tb)
	for _, path := range [][2]netip.AddrPort{{addrA, addrB}, {addr6B, addr6A}} {
		want[1] = layers.LayerTypeIPv4
		if path[0].Addr().Is6() {
			want[1] = layers.LayerTypeIPv6
		}
		for _, d := range samples(t) {
			enc, err := d.Encode(key, path[0], path[1])
			if err != nil {
				t.Fatal(err)
			}
			if err := parser.DecodeLayers(frame(t, path[0], path[1], enc), &dec); err != nil {
				t.Fatalf("%v: DecodeLayers: %v (decoded %v)", d.Type, err, dec)
			}
			if !reflect.DeepEqual(dec, want) {
				t.Fatalf("%v: decoded layers %v, want %v", d.Type, dec, want)
			}
			checkLayer(t, &tb, d, enc, path[0], path[1])
		}
	}
}

// Packets on other ports are not tokenbed datagrams, even if their payload
// happens to be one.
func TestOtherPortIsPayload(t *testing.T) {
	d := samples(t)[3]
	src, dst := netip.MustParseAddrPort("10.7.0.1:5000"), netip.MustParseAddrPort("10.7.0.2:5001")
	enc, err := d.Encode(key, src, dst)
	if err != nil {
		t.Fatal(err)
	}
	p := gopacket.NewPacket(frame(t, src, dst, enc), layers.LayerTypeEthernet, gopacket.Default)
	if p.Layer(wirelayer.LayerType) != nil {
		t.Fatal("datagram on ports 5000→5001 decoded as tokenbed; only registered ports should")
	}
	if p.Layer(gopacket.LayerTypePayload) == nil {
		t.Fatalf("no payload layer: %v", p)
	}
}

// mutations of a valid Move, each with the field wire.Decode blames.
var malformed = []struct {
	name   string
	mutate func(b []byte) []byte
	field  string
	reason string
}{
	{"bad magic", func(b []byte) []byte { b[0] = 'X'; return b }, "magic", "bad-magic"},
	{"bad version", func(b []byte) []byte { b[2] = 9; return b }, "version", "bad-version"},
	{"bad type", func(b []byte) []byte { b[3] = 0; return b }, "type", "bad-type"},
	{"bad flags", func(b []byte) []byte { b[4] |= 0x80; return b }, "flags", "bad-flags"},
	{"zero sender length", func(b []byte) []byte { b[5] = 0; return b }, "sender.length", "bad-length"},
	{"bad sender name", func(b []byte) []byte { b[6] = ' '; return b }, "sender", "bad-name"},
	{"truncated", func(b []byte) []byte { return b[:40] }, "datagram", "truncated"},
	{"trailing byte", func(b []byte) []byte {
		return append(b[:len(b)-wire.SigLen:len(b)-wire.SigLen], append([]byte{0}, b[len(b)-wire.SigLen:]...)...)
	}, "datagram", "trailing-bytes"},
	{"too large", func(b []byte) []byte { return append(b, make([]byte, wire.MaxSize)...) }, "datagram", "too-large"},
}

func TestMalformedNamesTheField(t *testing.T) {
	var (
		eth layers.Ethernet
		ip4 layers.IPv4
		udp layers.UDP
		tb  wirelayer.Datagram
		dec []gopacket.LayerType
	)
	parser := gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet, &eth, &ip4, &udp, &tb)
	d := samples(t)[0]
	for _, m := range malformed {
		enc, err := d.Encode(key, addrA, addrB)
		if err != nil {
			t.Fatal(err)
		}
		bad := m.mutate(enc)
		if m.reason == "too-large" {
			// Too large for one Ethernet frame too: decode the payload alone.
			var l wirelayer.Datagram
			checkWireError(t, m.name+" (DecodeFromBytes)", l.DecodeFromBytes(bad, gopacket.NilDecodeFeedback), m.field, m.reason)
			continue
		}
		fr := frame(t, addrA, addrB, bad)

		p := gopacket.NewPacket(fr, layers.LayerTypeEthernet, gopacket.Default)
		if p.Layer(wirelayer.LayerType) != nil {
			t.Errorf("%s: NewPacket produced a tokenbed layer", m.name)
		}
		el := p.ErrorLayer()
		if el == nil {
			t.Errorf("%s: NewPacket: no error layer", m.name)
		} else {
			checkWireError(t, m.name+" (NewPacket)", el.Error(), m.field, m.reason)
			if string(el.LayerContents()) != string(bad) {
				t.Errorf("%s: failure layer holds %d bytes, want the %d-byte datagram", m.name, len(el.LayerContents()), len(bad))
			}
		}

		err = parser.DecodeLayers(fr, &dec)
		checkWireError(t, m.name+" (DecodingLayerParser)", err, m.field, m.reason)
		if tb.Datagram.Type.Valid() || tb.Signature != nil {
			t.Errorf("%s: layer not reset after failure: %+v", m.name, tb.Datagram)
		}
	}
}

func checkWireError(t *testing.T, what string, err error, field, reason string) {
	t.Helper()
	var we *wire.Error
	if !errors.As(err, &we) {
		t.Errorf("%s: error %v (%T), want a *wire.Error", what, err, err)
		return
	}
	if we.Field != field || we.Reason != reason {
		t.Errorf("%s: error names %s/%s, want %s/%s", what, we.Field, we.Reason, field, reason)
	}
	if !strings.HasPrefix(err.Error(), "tokenbed: wire: "+field+" at offset") {
		t.Errorf("%s: message %q does not name the layer and the field", what, err)
	}
}
