package wirelayer_test

import (
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"tokenbed/agent/wire"
	"tokenbed/agent/wire/wirelayer"
)

// frames returns one Ethernet frame per sample datagram (every type; the
// Move carries a certificate and a directory).
func benchFrames(b *testing.B) (frames, payloads [][]byte) {
	for _, d := range samples(b) {
		enc, err := d.Encode(key, addrA, addrB)
		if err != nil {
			b.Fatal(err)
		}
		frames = append(frames, frame(b, addrA, addrB, enc))
		payloads = append(payloads, enc)
	}
	return frames, payloads
}

func reportRate(b *testing.B) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pkts/s")
}

// BenchmarkDecode measures packets per second through the decoders. The
// baseline is the same DecodingLayerParser without the tokenbed layer
// (Ethernet, IPv4, UDP only): the difference is the cost of wirelayer.
func BenchmarkDecode(b *testing.B) {
	frames, payloads := benchFrames(b)
	var (
		eth layers.Ethernet
		ip4 layers.IPv4
		udp layers.UDP
		tb  wirelayer.Datagram
		dec []gopacket.LayerType
	)
	b.Run("baseline-parser-eth-ip-udp", func(b *testing.B) {
		p := gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet, &eth, &ip4, &udp)
		p.IgnoreUnsupported = true
		for i := 0; b.Loop(); i++ {
			if err := p.DecodeLayers(frames[i%len(frames)], &dec); err != nil || len(dec) != 3 {
				b.Fatal(err, dec)
			}
		}
		reportRate(b)
	})
	b.Run("parser-with-wirelayer", func(b *testing.B) {
		p := gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet, &eth, &ip4, &udp, &tb)
		for i := 0; b.Loop(); i++ {
			if err := p.DecodeLayers(frames[i%len(frames)], &dec); err != nil || len(dec) != 4 {
				b.Fatal(err, dec)
			}
		}
		reportRate(b)
	})
	b.Run("newpacket-with-wirelayer", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			p := gopacket.NewPacket(frames[i%len(frames)], layers.LayerTypeEthernet, gopacket.NoCopy)
			if p.Layer(wirelayer.LayerType) == nil {
				b.Fatal(p)
			}
		}
		reportRate(b)
	})
	b.Run("wire.Decode-payload-only", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if _, err := wire.Decode(payloads[i%len(payloads)]); err != nil {
				b.Fatal(err)
			}
		}
		reportRate(b)
	})
}
