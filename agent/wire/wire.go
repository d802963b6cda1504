package wire

import (
	"crypto/ed25519"
	"encoding/binary"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Version is the wire format version this package encodes and accepts.
// Version 2 added the entry signature to directory entries.
const Version = 2

// MaxSize is the largest datagram, signature included: an IPv6
// minimum-MTU packet (1280) less the IPv6 and UDP headers (48).
const MaxSize = 1232

// Limits of the variable-length fields.
const (
	MaxNameLen = 63
	MaxCertLen = 1024
	MaxEntries = 32
	SigLen     = ed25519.SignatureSize
)

const (
	magic0, magic1 = 'T', 'B'
	flagCert       = 1 << 0
	flagDir        = 1 << 1
	fixedHeader    = 6 // magic, version, type, flags, sender length
	sigContext     = "tokenbed/pass/v1"
	// entryContext separates entry signatures from datagram signatures:
	// neither can be passed off as the other.
	entryContext = "tokenbed/dir/v1"
)

// Type is the datagram type tag (002 §3, Fig. 1).
type Type uint8

const (
	Move      Type = 1
	Ack       Type = 2
	Commit    Type = 3
	EarlyStop Type = 4
)

func (t Type) String() string {
	switch t {
	case Move:
		return "Move"
	case Ack:
		return "Ack"
	case Commit:
		return "Commit"
	case EarlyStop:
		return "EarlyStop"
	}
	return "Type(" + strconv.Itoa(int(t)) + ")"
}

// Valid reports whether t is one of the four datagram types.
func (t Type) Valid() bool { return t >= Move && t <= EarlyStop }

// TokenID identifies a token. IDs are unique, because an origin generates at
// most one token per nanosecond, and totally ordered by (Gen, Origin), which
// the sandwich removal rule needs (002 §3.2).
type TokenID struct {
	Gen    int64  // generation time, ns since the Unix epoch
	Origin string // member that generated the token
}

// Compare orders token ids: -1 if a < b, 0 if equal, +1 if a > b.
func (a TokenID) Compare(b TokenID) int {
	switch {
	case a.Gen < b.Gen:
		return -1
	case a.Gen > b.Gen:
		return 1
	}
	return strings.Compare(a.Origin, b.Origin)
}

// IsZero reports whether a is the zero id (no token).
func (a TokenID) IsZero() bool { return a.Gen == 0 && a.Origin == "" }

// String formats the id as "GEN@ORIGIN", the form used in event logs.
func (a TokenID) String() string {
	return strconv.FormatInt(a.Gen, 10) + "@" + a.Origin
}

// ParseTokenID parses the "GEN@ORIGIN" form written by String.
func ParseTokenID(s string) (TokenID, error) {
	gen, origin, ok := strings.Cut(s, "@")
	if !ok {
		return TokenID{}, fmt.Errorf("token id %q: want GEN@ORIGIN", s)
	}
	g, err := strconv.ParseInt(gen, 10, 64)
	if err != nil {
		return TokenID{}, fmt.Errorf("token id %q: generation: %v", s, err)
	}
	if !ValidName(origin) {
		return TokenID{}, fmt.Errorf("token id %q: bad origin name", s)
	}
	return TokenID{Gen: g, Origin: origin}, nil
}

// Entry is one member of the directory synchronised with each pass (002
// §3.2). The member it describes signs it (Sign) and every other member
// relays it verbatim, so that the entry is authenticated by its subject,
// not by whoever relays it.
type Entry struct {
	Name string
	Addr netip.AddrPort
	Seen int64 // when the member signed the entry, ns since the Unix epoch, its own clock
	Sig  [SigLen]byte
}

// entryMessage is what an entry's signature covers: the context string,
// the name, the address (16 bytes, IPv4-mapped for IPv4) and port, and
// the seen-time.
func (e *Entry) entryMessage() []byte {
	m := make([]byte, 0, len(entryContext)+1+MaxNameLen+16+2+8)
	m = append(m, entryContext...)
	m = append(m, byte(len(e.Name)))
	m = append(m, e.Name...)
	a16 := e.Addr.Addr().As16()
	m = append(m, a16[:]...)
	m = binary.BigEndian.AppendUint16(m, e.Addr.Port())
	return binary.BigEndian.AppendUint64(m, uint64(e.Seen))
}

// Sign signs the entry with key, the key of the member it describes.
func (e *Entry) Sign(key ed25519.PrivateKey) {
	copy(e.Sig[:], ed25519.Sign(key, e.entryMessage()))
}

// VerifyEntry reports whether e carries a valid signature by pub.
func (e *Entry) VerifyEntry(pub ed25519.PublicKey) bool {
	return len(pub) == ed25519.PublicKeySize && ed25519.Verify(pub, e.entryMessage(), e.Sig[:])
}

// Datagram is one protocol datagram, without its signature.
type Datagram struct {
	Type      Type
	Sender    string // member name of the sender
	Token     TokenID
	Session   uint64
	Nonce     uint64
	ReplyPort uint16
	Cert      []byte  // sender's certificate (DER), piggybacked after a timeout
	Dir       []Entry // sender's member directory, a sample if it is large
}

// ValidName reports whether s may be a member name: 1 to MaxNameLen bytes
// of ASCII letters, digits, '.', '_' and '-'. Names appear in file names,
// logs and the capture, so they are kept plain.
func ValidName(s string) bool {
	if len(s) == 0 || len(s) > MaxNameLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// Error is a decoding or encoding error. Field names the offending field;
// Reason is a short stable code, used to count rejected datagrams.
type Error struct {
	Field  string
	Offset int
	Reason string
}

func (e *Error) Error() string {
	return fmt.Sprintf("wire: %s at offset %d: %s", e.Field, e.Offset, e.Reason)
}

// Encode returns the encoding of d signed with key for the path src→dst.
func (d *Datagram) Encode(key ed25519.PrivateKey, src, dst netip.AddrPort) ([]byte, error) {
	// The signed message is context || addresses || body; build it in one
	// buffer and keep the body as the datagram's prefix.
	pre := len(sigContext) + 2*18
	buf := make([]byte, pre, pre+MaxSize)
	putSigPrefix(buf, src, dst)
	buf, err := d.appendBody(buf)
	if err != nil {
		return nil, err
	}
	if len(buf)-pre+SigLen > MaxSize {
		return nil, &Error{Field: "datagram", Offset: len(buf) - pre, Reason: "too-large"}
	}
	sig := ed25519.Sign(key, buf)
	return append(buf[pre:], sig...), nil
}

func putSigPrefix(buf []byte, src, dst netip.AddrPort) {
	n := copy(buf, sigContext)
	for _, ap := range [2]netip.AddrPort{src, dst} {
		a16 := ap.Addr().As16()
		n += copy(buf[n:], a16[:])
		binary.BigEndian.PutUint16(buf[n:], ap.Port())
		n += 2
	}
}

func (d *Datagram) appendBody(b []byte) ([]byte, error) {
	bad := func(field, reason string) error { return &Error{Field: field, Offset: -1, Reason: reason} }
	if !d.Type.Valid() {
		return nil, bad("type", "bad-type")
	}
	if !ValidName(d.Sender) {
		return nil, bad("sender", "bad-name")
	}
	if !ValidName(d.Token.Origin) {
		return nil, bad("token.origin", "bad-name")
	}
	cont := d.Type == Move || d.Type == Ack
	if cont != (d.ReplyPort != 0) {
		return nil, bad("reply_port", "bad-port")
	}
	var flags byte
	if len(d.Cert) > 0 {
		if !cont {
			return nil, bad("certificate", "not-allowed")
		}
		if len(d.Cert) > MaxCertLen {
			return nil, bad("certificate", "bad-length")
		}
		flags |= flagCert
	}
	if len(d.Dir) > 0 {
		if !cont {
			return nil, bad("directory", "not-allowed")
		}
		if len(d.Dir) > MaxEntries {
			return nil, bad("directory", "bad-length")
		}
		flags |= flagDir
	}
	b = append(b, magic0, magic1, Version, byte(d.Type), flags, byte(len(d.Sender)))
	b = append(b, d.Sender...)
	b = binary.BigEndian.AppendUint64(b, uint64(d.Token.Gen))
	b = append(b, byte(len(d.Token.Origin)))
	b = append(b, d.Token.Origin...)
	b = binary.BigEndian.AppendUint64(b, d.Session)
	b = binary.BigEndian.AppendUint64(b, d.Nonce)
	b = binary.BigEndian.AppendUint16(b, d.ReplyPort)
	if flags&flagCert != 0 {
		b = binary.BigEndian.AppendUint16(b, uint16(len(d.Cert)))
		b = append(b, d.Cert...)
	}
	if flags&flagDir != 0 {
		b = append(b, byte(len(d.Dir)))
		for _, e := range d.Dir {
			if !ValidName(e.Name) {
				return nil, bad("directory.name", "bad-name")
			}
			a := e.Addr.Addr().Unmap()
			if !a.IsValid() || a.Zone() != "" {
				return nil, bad("directory.addr", "bad-addr")
			}
			b = append(b, byte(len(e.Name)))
			b = append(b, e.Name...)
			b = append(b, byte(a.BitLen()/8))
			b = append(b, a.AsSlice()...)
			b = binary.BigEndian.AppendUint16(b, e.Addr.Port())
			b = binary.BigEndian.AppendUint64(b, uint64(e.Seen))
			b = append(b, e.Sig[:]...)
		}
	}
	return b, nil
}

// decoder reads fields and records the first error with its field and offset.
type decoder struct {
	b   []byte
	off int
	err *Error
}

func (r *decoder) fail(field, reason string) {
	if r.err == nil {
		r.err = &Error{Field: field, Offset: r.off, Reason: reason}
	}
}

func (r *decoder) take(field string, n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || len(r.b)-r.off < n {
		r.fail(field, "truncated")
		return nil
	}
	p := r.b[r.off : r.off+n]
	r.off += n
	return p
}

func (r *decoder) u8(field string) byte {
	if p := r.take(field, 1); p != nil {
		return p[0]
	}
	return 0
}

func (r *decoder) u16(field string) uint16 {
	if p := r.take(field, 2); p != nil {
		return binary.BigEndian.Uint16(p)
	}
	return 0
}

func (r *decoder) u64(field string) uint64 {
	if p := r.take(field, 8); p != nil {
		return binary.BigEndian.Uint64(p)
	}
	return 0
}

func (r *decoder) name(field string) string {
	n := int(r.u8(field + ".length"))
	if r.err == nil && (n == 0 || n > MaxNameLen) {
		r.fail(field+".length", "bad-length")
		return ""
	}
	at := r.off
	p := r.take(field, n)
	if p == nil {
		return ""
	}
	s := string(p)
	if !ValidName(s) {
		r.off = at
		r.fail(field, "bad-name")
		return ""
	}
	return s
}

// Decode parses a datagram. It checks the structure only; the signature is
// checked by Verify. Cert aliases b. Decode never panics, whatever b holds.
func Decode(b []byte) (Datagram, error) {
	var d Datagram
	if len(b) > MaxSize {
		return d, &Error{Field: "datagram", Offset: MaxSize, Reason: "too-large"}
	}
	if len(b) < fixedHeader+SigLen {
		return d, &Error{Field: "datagram", Offset: len(b), Reason: "truncated"}
	}
	r := &decoder{b: b[:len(b)-SigLen]}
	if m := r.take("magic", 2); m[0] != magic0 || m[1] != magic1 {
		r.off = 0
		r.fail("magic", "bad-magic")
		return d, r.err
	}
	if v := r.u8("version"); v != Version {
		r.off--
		r.fail("version", "bad-version")
		return d, r.err
	}
	d.Type = Type(r.u8("type"))
	if !d.Type.Valid() {
		r.off--
		r.fail("type", "bad-type")
		return d, r.err
	}
	flags := r.u8("flags")
	cont := d.Type == Move || d.Type == Ack
	if flags&^(flagCert|flagDir) != 0 || (!cont && flags != 0) {
		r.off--
		r.fail("flags", "bad-flags")
		return d, r.err
	}
	d.Sender = r.name("sender")
	d.Token.Gen = int64(r.u64("token.gen"))
	d.Token.Origin = r.name("token.origin")
	d.Session = r.u64("session")
	d.Nonce = r.u64("nonce")
	d.ReplyPort = r.u16("reply_port")
	if r.err == nil && cont != (d.ReplyPort != 0) {
		r.off -= 2
		r.fail("reply_port", "bad-port")
	}
	if flags&flagCert != 0 {
		n := int(r.u16("certificate.length"))
		if r.err == nil && (n == 0 || n > MaxCertLen) {
			r.off -= 2
			r.fail("certificate.length", "bad-length")
		}
		d.Cert = r.take("certificate", n)
	}
	if flags&flagDir != 0 {
		n := int(r.u8("directory.count"))
		if r.err == nil && (n == 0 || n > MaxEntries) {
			r.off--
			r.fail("directory.count", "bad-length")
		}
		if r.err == nil {
			d.Dir = make([]Entry, 0, n)
		}
		for i := 0; i < n && r.err == nil; i++ {
			var e Entry
			e.Name = r.name("directory.name")
			alen := int(r.u8("directory.addr.length"))
			if r.err == nil && alen != 4 && alen != 16 {
				r.off--
				r.fail("directory.addr.length", "bad-length")
			}
			ab := r.take("directory.addr", alen)
			port := r.u16("directory.port")
			e.Seen = int64(r.u64("directory.seen"))
			if sig := r.take("directory.signature", SigLen); sig != nil {
				copy(e.Sig[:], sig)
			}
			if r.err == nil {
				a, _ := netip.AddrFromSlice(ab)
				if a.Is4In6() {
					// One encoding per address: IPv4 travels as 4 bytes.
					r.off -= 10 + SigLen + alen
					r.fail("directory.addr", "bad-addr")
					break
				}
				e.Addr = netip.AddrPortFrom(a, port)
				d.Dir = append(d.Dir, e)
			}
		}
	}
	if r.err == nil && r.off != len(r.b) {
		r.fail("datagram", "trailing-bytes")
	}
	if r.err != nil {
		return Datagram{}, r.err
	}
	return d, nil
}

// Verify reports whether b, a datagram as received, carries a valid
// signature by pub for the path src→dst.
func Verify(b []byte, pub ed25519.PublicKey, src, dst netip.AddrPort) bool {
	if len(b) < fixedHeader+SigLen || len(b) > MaxSize || len(pub) != ed25519.PublicKeySize {
		return false
	}
	if takeAhead(b, pub, src, dst) { // declared by its sender: ahead.go
		return true
	}
	return verify(b, pub, src, dst)
}

func verify(b []byte, pub ed25519.PublicKey, src, dst netip.AddrPort) bool {
	if len(b) < fixedHeader+SigLen || len(b) > MaxSize || len(pub) != ed25519.PublicKeySize {
		return false
	}
	var msg [len(sigContext) + 2*18 + MaxSize]byte
	putSigPrefix(msg[:], src, dst)
	pre := len(sigContext) + 2*18
	n := copy(msg[pre:], b[:len(b)-SigLen])
	return ed25519.Verify(pub, msg[:pre+n], b[len(b)-SigLen:])
}
