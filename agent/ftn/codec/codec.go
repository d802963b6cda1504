// Package codec is the FTN lock service's datagram: a message
// (agent/ftn/msg) authenticated with the project's CA and Ed25519
// signatures (seed 001 assumes no Byzantine failures, but a lock service
// on a shared network must still know who asks). It reuses
// agent/ca's credentials and certificate verifier; the layout is its own,
// since token passing's agent/wire format has no room for a lock
// service's messages.
//
// # Format, version 1
//
// All integers are big-endian.
//
//	offset  size  field
//	0       2     magic, the ASCII bytes "FT"
//	2       1     version, 1
//	3       1     S, length of the sender's name (1..63)
//	4       S     sender's name: its certificate's CommonName
//	+0      2     C, certificate length (1..1024)
//	+2      C     the sender's X.509 certificate, DER, signed by the run's CA
//	+0      8     nonce: the sender's wall clock when it signed, ns
//	+8      4     L, body length
//	+12     L     body: the message as JSON (msg.Msg)
//	end-64  64    Ed25519 signature
//
// The signature covers the context string "tokenbed/ftn/v1", the source
// and destination UDP addresses (16-byte IPv6 or IPv4-mapped address and
// 2-byte port each) and every byte before it, as agent/wire does for
// token passing: a datagram received by another address or from another
// source is refused, so a sniffed one cannot be replayed elsewhere.
// Within one address pair a replay repeats an old request or reply: a
// server applies only a client's newest request per name (the server
// package's "Fresh requests"), a reply names the registration and the
// request it answers, a release names the fence of the hold it ends,
// and a client heartbeat counts from the leader's acknowledgement it
// echoes, not from its arrival.
//
// Every datagram carries its certificate, so a receiver needs no key
// cache to start; verified certificates are cached by their bytes, so a
// chain is checked once per sender and validity period.
package codec

import (
	"bytes"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"tokenbed/agent/ca"
	"tokenbed/agent/ftn/msg"
)

const (
	version = 1
	context = "tokenbed/ftn/v1"
	// MaxSize bounds a datagram: a UDP payload over IPv4.
	MaxSize = 65507
	maxCert = 1024
)

// ErrTooLarge: the message does not fit one datagram.
var ErrTooLarge = errors.New("codec: message larger than a datagram")

// Error is a datagram refused; Reason is short and stable, for logs.
type Error struct{ Reason string }

func (e *Error) Error() string { return "codec: " + e.Reason }

type verified struct {
	name     string
	pub      ed25519.PublicKey
	notAfter time.Time
}

// Codec seals and opens datagrams for one member.
type Codec struct {
	creds *ca.Credentials
	v     *ca.Verifier
	cache map[string]verified
}

// New returns a codec signing with creds and trusting creds.CA.
func New(creds *ca.Credentials) *Codec {
	return &Codec{creds: creds, v: ca.NewVerifier(creds.CA), cache: map[string]verified{}}
}

func addrBytes(b []byte, a netip.AddrPort) []byte {
	ip := a.Addr().As16()
	b = append(b, ip[:]...)
	return binary.BigEndian.AppendUint16(b, a.Port())
}

func signed(b []byte, src, dst netip.AddrPort) []byte {
	m := make([]byte, 0, len(context)+36+len(b))
	m = append(m, context...)
	m = addrBytes(m, src)
	m = addrBytes(m, dst)
	return append(m, b...)
}

// ErrNoCredentials: Encode on a codec made by NewOpener.
var ErrNoCredentials = errors.New("codec: no credentials to sign with")

// Encode seals m from src to dst; now is the nonce.
func (c *Codec) Encode(m msg.Msg, src, dst netip.AddrPort, now time.Time) ([]byte, error) {
	if c.creds == nil {
		return nil, ErrNoCredentials
	}
	body, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	name, cert := c.creds.Name, c.creds.Cert
	b := make([]byte, 0, 4+len(name)+2+len(cert)+12+len(body)+ed25519.SignatureSize)
	b = append(b, 'F', 'T', version, byte(len(name)))
	b = append(b, name...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(cert)))
	b = append(b, cert...)
	b = binary.BigEndian.AppendUint64(b, uint64(now.UnixNano()))
	b = binary.BigEndian.AppendUint32(b, uint32(len(body)))
	b = append(b, body...)
	if len(b)+ed25519.SignatureSize > MaxSize {
		return nil, ErrTooLarge
	}
	return append(b, ed25519.Sign(c.creds.Key, signed(b, src, dst))...), nil
}

// Datagram is a datagram's fields as sent, split without checking its
// certificate or its signature: what a reader of a capture sees before
// it verifies (analysis/ftn, agent/ftn/ftnlayer). Every slice aliases the
// bytes given to Split.
type Datagram struct {
	Sender string // the name the sender claims (its certificate's CommonName once verified)
	Cert   []byte // the sender's certificate, DER
	Nonce  uint64 // the sender's wall clock when it signed, ns
	Body   []byte // the message as JSON
	Sig    []byte // the Ed25519 signature
	head   []byte // every byte before the signature: what it covers, with the addresses
}

// Split splits b into its fields. A malformed datagram is an *Error
// whose Reason names the field ("malformed:cert").
func Split(b []byte) (Datagram, error) {
	bad := func(r string) (Datagram, error) { return Datagram{}, &Error{Reason: r} }
	if len(b) < 4+1+2+12+ed25519.SignatureSize || b[0] != 'F' || b[1] != 'T' {
		return bad("malformed:magic")
	}
	if b[2] != version {
		return bad("malformed:version")
	}
	body, sig := b[:len(b)-ed25519.SignatureSize], b[len(b)-ed25519.SignatureSize:]
	r := body[3:]
	take := func(n int) []byte {
		if n > len(r) {
			return nil
		}
		p := r[:n]
		r = r[n:]
		return p
	}
	nl := int(take(1)[0])
	name := take(nl)
	if nl == 0 || nl > 63 || name == nil {
		return bad("malformed:name")
	}
	cl := take(2)
	if cl == nil {
		return bad("malformed:cert")
	}
	cert := take(int(binary.BigEndian.Uint16(cl)))
	if cert == nil || len(cert) == 0 || len(cert) > maxCert {
		return bad("malformed:cert")
	}
	nonce := take(8)
	if nonce == nil {
		return bad("malformed:nonce")
	}
	ll := take(4)
	if ll == nil {
		return bad("malformed:body")
	}
	js := take(int(binary.BigEndian.Uint32(ll)))
	if js == nil || len(r) != 0 {
		return bad("malformed:body")
	}
	return Datagram{Sender: string(name), Cert: cert, Nonce: binary.BigEndian.Uint64(nonce), Body: js, Sig: sig, head: body}, nil
}

// Message decodes the body strictly: an unknown field or kind is an
// *Error ("malformed:json", "malformed:kind N").
func (d Datagram) Message() (msg.Msg, error) {
	var m msg.Msg
	dec := json.NewDecoder(bytes.NewReader(d.Body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return msg.Msg{}, &Error{Reason: "malformed:json"}
	}
	if !m.Kind.Valid() {
		return msg.Msg{}, &Error{Reason: fmt.Sprintf("malformed:kind %d", m.Kind)}
	}
	return m, nil
}

// NewOpener returns a codec that only opens datagrams (Decode), trusting
// caCert: for a reader of a capture, which holds no member's key. Its
// Encode fails.
func NewOpener(caCert *x509.Certificate) *Codec {
	return &Codec{v: ca.NewVerifier(caCert), cache: map[string]verified{}}
}

// Decode opens a datagram received on dst from src at now: the sender
// must hold a certificate of the CA valid at now, for the name it
// claims, and the signature must verify (Verify). The body is decoded
// only then.
func (c *Codec) Decode(b []byte, src, dst netip.AddrPort, now time.Time) (msg.Peer, msg.Msg, error) {
	d, err := Split(b)
	if err != nil {
		return msg.Peer{}, msg.Msg{}, err
	}
	name, err := c.Verify(d, src, dst, now)
	if err != nil {
		return msg.Peer{}, msg.Msg{}, err
	}
	m, err := d.Message()
	if err != nil {
		return msg.Peer{}, msg.Msg{}, err
	}
	return msg.Peer{Name: name, Addr: src}, m, nil
}

// Verify checks a split datagram received on dst from src at now: its
// certificate is the CA's, valid at now, for the name it claims, and its
// signature verifies. It returns that name.
func (c *Codec) Verify(d Datagram, src, dst netip.AddrPort, now time.Time) (string, error) {
	who, ok := c.cache[string(d.Cert)]
	if !ok || now.After(who.notAfter) {
		n, pub, err := c.v.Verify(d.Cert, now)
		if err != nil {
			return "", &Error{Reason: "bad-certificate"}
		}
		na, _ := notAfter(d.Cert)
		who = verified{name: n, pub: pub, notAfter: na}
		if len(c.cache) > 4096 {
			c.cache = map[string]verified{} // bounded: a flood of certificates
		}
		c.cache[string(d.Cert)] = who
	}
	if who.name != d.Sender {
		return "", &Error{Reason: "name-mismatch"}
	}
	if !ed25519.Verify(who.pub, signed(d.head, src, dst), d.Sig) {
		return "", &Error{Reason: "bad-signature"}
	}
	return who.name, nil
}
