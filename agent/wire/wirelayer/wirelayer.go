// Package wirelayer decodes tokenbed datagrams (package agent/wire) as a
// gopacket layer, so that captures can be read with gopacket.NewPacket or a
// DecodingLayerParser like any other protocol.
//
// The layer does not define the format: it calls wire.Decode, so a datagram
// the agents accept is exactly a datagram this layer decodes, and a
// malformed one fails with the *wire.Error that names the offending field.
//
// Typical use:
//
//	wirelayer.Register(7400) // once, before decoding
//	p := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
//	if d, ok := p.Layer(wirelayer.LayerType).(*wirelayer.Datagram); ok {
//		fmt.Println(d.Type, d.Sender, d.Session)
//	}
//	if e := p.ErrorLayer(); e != nil {
//		var we *wire.Error
//		errors.As(e.Error(), &we) // we.Field names the malformed field
//	}
package wirelayer

import (
	"crypto/ed25519"
	"fmt"
	"net/netip"
	"sync"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"tokenbed/agent/wire"
)

// DefaultPort is the agents' default UDP port.
const DefaultPort = 7400

// LayerTypeNumber is the number LayerType is registered under, in the range
// gopacket keeps for application layers (1000-1999).
const LayerTypeNumber = 1740

// LayerType is the gopacket layer type of a tokenbed datagram.
var LayerType = gopacket.RegisterLayerType(LayerTypeNumber, gopacket.LayerTypeMetadata{
	Name:    "Tokenbed",
	Decoder: gopacket.DecodeFunc(decode),
})

// Register makes UDP packets to or from port decode as tokenbed datagrams,
// in gopacket.NewPacket and in a DecodingLayerParser that holds a
// *Datagram. gopacket keeps this mapping in a global table that is not safe
// for concurrent use, so Register writes it once per port: registering a
// port already registered is safe while other goroutines decode (the swarm
// analyses many runs of one experiment at once), but a new port must be
// registered before decoding starts anywhere.
func Register(port uint16) {
	registered.Lock()
	defer registered.Unlock()
	if registered.ports[port] {
		return
	}
	layers.RegisterUDPPortLayerType(layers.UDPPort(port), LayerType)
	registered.ports[port] = true
}

var registered = struct {
	sync.Mutex
	ports map[uint16]bool
}{ports: map[uint16]bool{}}

// Datagram is a decoded tokenbed datagram. Its embedded wire.Datagram holds
// the fields (type, sender, token, session, pass id, nonce, reply port, certificate,
// directory); the layer adds the header bytes and the signature. Like every
// gopacket layer, Cert, Signature and LayerContents alias the packet data.
type Datagram struct {
	layers.BaseLayer
	wire.Datagram

	Version   uint8  // format version, wire.Version
	Flags     uint8  // bit 0 certificate present, bit 1 directory present, bit 2 pass id present
	Signature []byte // the Ed25519 signature, the last wire.SigLen bytes
}

var (
	_ gopacket.Layer            = (*Datagram)(nil)
	_ gopacket.ApplicationLayer = (*Datagram)(nil)
	_ gopacket.DecodingLayer    = (*Datagram)(nil)
)

// LayerType returns LayerType.
func (d *Datagram) LayerType() gopacket.LayerType { return LayerType }

// CanDecode implements gopacket.DecodingLayer.
func (d *Datagram) CanDecode() gopacket.LayerClass { return LayerType }

// NextLayerType implements gopacket.DecodingLayer: nothing follows a
// datagram.
func (d *Datagram) NextLayerType() gopacket.LayerType { return gopacket.LayerTypeZero }

// Payload implements gopacket.ApplicationLayer. It returns the whole
// datagram as sent, signature included: the bytes wire.Verify checks.
func (d *Datagram) Payload() []byte { return d.Contents }

// DecodeFromBytes implements gopacket.DecodingLayer. A malformed datagram
// returns an error wrapping the *wire.Error that names the field; d is then
// reset to the zero Datagram.
func (d *Datagram) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	w, err := wire.Decode(data)
	if err != nil {
		*d = Datagram{}
		return fmt.Errorf("tokenbed: %w", err)
	}
	// wire.Decode succeeded, so data holds at least the fixed header and the
	// signature.
	*d = Datagram{
		BaseLayer: layers.BaseLayer{Contents: data},
		Datagram:  w,
		Version:   data[2],
		Flags:     data[4],
		Signature: data[len(data)-wire.SigLen:],
	}
	return nil
}

// Verify reports whether the datagram carries a valid signature by pub for
// the path src→dst (the UDP addresses of the packet that carried it).
func (d *Datagram) Verify(pub ed25519.PublicKey, src, dst netip.AddrPort) bool {
	return wire.Verify(d.Contents, pub, src, dst)
}

func decode(data []byte, p gopacket.PacketBuilder) error {
	d := &Datagram{}
	if err := d.DecodeFromBytes(data, p); err != nil {
		return err
	}
	p.AddLayer(d)
	p.SetApplicationLayer(d)
	return nil
}
