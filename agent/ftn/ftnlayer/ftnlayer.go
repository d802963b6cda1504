// Package ftnlayer decodes FTN lock service datagrams (agent/ftn/codec)
// as a gopacket layer, as agent/wire/wirelayer does for token passing, so
// that a capture can be read with gopacket.NewPacket or a
// DecodingLayerParser. The layer does not define the format: it calls
// codec.Split and Datagram.Message, so a malformed datagram fails with
// the *codec.Error that names the field. It checks no signature (a
// reader holding the run's CA does that with codec.NewOpener).
//
// FTN runs use the same UDP port as token passing (7400), and gopacket
// maps a port to one layer type in a global table that wirelayer.Register
// fills: so this package registers no port. A process that reads FTN
// captures alone may map one itself
// (layers.RegisterUDPPortLayerType(7400, ftnlayer.LayerType));
// analysis/ftn decodes each UDP payload with DecodeFromBytes instead.
package ftnlayer

import (
	"fmt"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"tokenbed/agent/ftn/codec"
	"tokenbed/agent/ftn/msg"
)

// LayerTypeNumber is the number LayerType is registered under, next to
// wirelayer's 1740 in gopacket's application range (1000-1999).
const LayerTypeNumber = 1741

// LayerType is the gopacket layer type of an FTN datagram.
var LayerType = gopacket.RegisterLayerType(LayerTypeNumber, gopacket.LayerTypeMetadata{
	Name:    "FTN",
	Decoder: gopacket.DecodeFunc(decode),
})

// Datagram is a decoded FTN datagram: its envelope (sender, certificate,
// nonce, signature) and its message.
type Datagram struct {
	layers.BaseLayer
	codec.Datagram
	Msg msg.Msg
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

// NextLayerType implements gopacket.DecodingLayer: nothing follows.
func (d *Datagram) NextLayerType() gopacket.LayerType { return gopacket.LayerTypeZero }

// Payload implements gopacket.ApplicationLayer: the whole datagram, the
// bytes codec.Codec.Decode checks.
func (d *Datagram) Payload() []byte { return d.Contents }

// DecodeFromBytes implements gopacket.DecodingLayer. A malformed datagram
// returns an error wrapping the *codec.Error, and d is reset.
func (d *Datagram) DecodeFromBytes(data []byte, _ gopacket.DecodeFeedback) error {
	sp, err := codec.Split(data)
	if err == nil {
		var m msg.Msg
		if m, err = sp.Message(); err == nil {
			*d = Datagram{BaseLayer: layers.BaseLayer{Contents: data}, Datagram: sp, Msg: m}
			return nil
		}
	}
	*d = Datagram{}
	return fmt.Errorf("ftn: %w", err)
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
