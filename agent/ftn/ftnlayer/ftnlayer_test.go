package ftnlayer

import (
	"errors"
	"net"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"tokenbed/agent/ca"
	"tokenbed/agent/ftn/codec"
	"tokenbed/agent/ftn/msg"
)

func frame(t *testing.T, payload []byte, port uint16) []byte {
	t.Helper()
	eth := &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}, EthernetType: layers.EthernetTypeIPv4}
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP, SrcIP: net.IP{10, 0, 0, 2}, DstIP: net.IP{10, 0, 0, 1}}
	udp := &layers.UDP{SrcPort: layers.UDPPort(port), DstPort: layers.UDPPort(port)}
	_ = udp.SetNetworkLayerForChecksum(ip)
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, eth, ip, udp, gopacket.Payload(payload)); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// A captured frame decodes to the FTN layer with its message; a
// malformed one to an error layer naming the field.
func TestDecodeFrame(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	dir := t.TempDir()
	src := ca.Seeded(1, now, now.Add(time.Hour))
	if err := ca.InitWith(dir, src); err != nil {
		t.Fatal(err)
	}
	if err := ca.IssueWith(dir, "c0", src); err != nil {
		t.Fatal(err)
	}
	creds, err := ca.LoadMember(dir, "c0", filepath.Join(dir, ca.CACertFile))
	if err != nil {
		t.Fatal(err)
	}
	const port = 7411
	m := msg.Msg{Kind: msg.Acquire, Client: 1<<32 | 2, Req: 7, Name: "t3", Mode: msg.Exclusive}
	d, err := codec.New(creds).Encode(m, netip.MustParseAddrPort("10.0.0.2:7411"), netip.MustParseAddrPort("10.0.0.1:7411"), now)
	if err != nil {
		t.Fatal(err)
	}
	layers.RegisterUDPPortLayerType(port, LayerType)
	p := gopacket.NewPacket(frame(t, d, port), layers.LayerTypeEthernet, gopacket.Default)
	got, ok := p.Layer(LayerType).(*Datagram)
	if !ok {
		t.Fatalf("no FTN layer in %v", p)
	}
	if got.Sender != "c0" || got.Msg.Kind != msg.Acquire || got.Msg.Name != "t3" || got.Msg.Req != 7 || got.Msg.Mode != msg.Exclusive {
		t.Errorf("decoded %s %v", got.Sender, got.Msg)
	}
	if _, _, err := codec.NewOpener(creds.CA).Decode(got.Payload(), netip.MustParseAddrPort("10.0.0.2:7411"), netip.MustParseAddrPort("10.0.0.1:7411"), now); err != nil {
		t.Errorf("the layer's payload does not verify: %v", err)
	}
	bad := append([]byte(nil), d...)
	bad[2] = 9 // version
	p = gopacket.NewPacket(frame(t, bad, port), layers.LayerTypeEthernet, gopacket.Default)
	var ce *codec.Error
	if e := p.ErrorLayer(); e == nil || !errors.As(e.Error(), &ce) || ce.Reason != "malformed:version" {
		t.Errorf("malformed datagram: error layer %v", e)
	}
}
