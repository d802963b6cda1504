package wirelayer_test

import (
	"errors"
	"net/netip"
	"reflect"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"tokenbed/agent/wire"
	"tokenbed/agent/wire/wirelayer"
)

// FuzzLayer feeds arbitrary UDP payloads on the registered port through
// gopacket.NewPacket and a DecodingLayerParser: neither may panic, both must
// agree with wire.Decode, and a rejection must carry the *wire.Error.
func FuzzLayer(f *testing.F) {
	for _, d := range samples(f) {
		b, err := d.Encode(key, addrA, addrB)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("TB"))
	f.Add([]byte{})
	var (
		eth layers.Ethernet
		ip4 layers.IPv4
		udp layers.UDP
		tb  wirelayer.Datagram
		dec []gopacket.LayerType
	)
	parser := gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet, &eth, &ip4, &udp, &tb)
	src, dst := netip.MustParseAddrPort("10.7.0.1:7400"), netip.MustParseAddrPort("10.7.0.2:7400")
	f.Fuzz(func(t *testing.T, payload []byte) {
		if len(payload) > 1400 {
			return // one Ethernet frame
		}
		want, wantErr := wire.Decode(payload)
		fr := frame(t, src, dst, payload)

		p := gopacket.NewPacket(fr, layers.LayerTypeEthernet, gopacket.Default)
		l, _ := p.Layer(wirelayer.LayerType).(*wirelayer.Datagram)
		err := parser.DecodeLayers(fr, &dec)
		if len(payload) == 0 {
			// gopacket stops at an empty UDP payload: no layer, no error.
			if l != nil || p.ErrorLayer() != nil || err != nil {
				t.Fatalf("empty payload: layer %v, error layer %v, parser error %v", l, p.ErrorLayer(), err)
			}
			return
		}
		if wantErr != nil {
			if l != nil {
				t.Fatalf("NewPacket decoded a datagram wire.Decode rejects (%v)", wantErr)
			}
			el := p.ErrorLayer()
			var we *wire.Error
			if el == nil || !errors.As(el.Error(), &we) || we.Error() != wantErr.Error() {
				t.Fatalf("NewPacket error layer %v, want %v", el, wantErr)
			}
			if !errors.As(err, &we) || we.Error() != wantErr.Error() {
				t.Fatalf("DecodingLayerParser error %v, want %v", err, wantErr)
			}
			return
		}
		if l == nil || !reflect.DeepEqual(l.Datagram, want) {
			t.Fatalf("NewPacket: %+v, want %+v", l, want)
		}
		if err != nil || !reflect.DeepEqual(tb.Datagram, want) {
			t.Fatalf("DecodingLayerParser: %v %+v, want %+v", err, tb.Datagram, want)
		}
	})
}
