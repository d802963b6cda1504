package wire

import (
	"crypto/ed25519"
	"errors"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"testing"
)

var (
	testSeed   = [32]byte{1, 2, 3}
	testKey    = ed25519.NewKeyFromSeed(testSeed[:])
	testPub    = testKey.Public().(ed25519.PublicKey)
	addrA      = netip.MustParseAddrPort("10.7.0.1:7400")
	addrB      = netip.MustParseAddrPort("10.7.0.2:7400")
	addrC      = netip.MustParseAddrPort("[fd00::3]:7400")
	sampleCert = make([]byte, 264)
)

func sample(t Type) Datagram {
	d := Datagram{
		Type:    t,
		Sender:  "A",
		Token:   TokenID{Gen: 1_700_000_000_123_456_789, Origin: "C"},
		Session: 41,
		Nonce:   0xdeadbeefcafe,
	}
	if t == Move || t == Ack {
		d.ReplyPort = 7400
		d.Cert = sampleCert
		d.Dir = []Entry{
			{Name: "A", Addr: addrA, Seen: 11},
			{Name: "peer-c.example", Addr: addrC, Seen: -1},
		}
		d.Dir[0].Sign(testKey)
	}
	return d
}

func TestRoundTrip(t *testing.T) {
	for _, typ := range []Type{Move, Ack, Commit, EarlyStop} {
		d := sample(typ)
		b, err := d.Encode(testKey, addrA, addrB)
		if err != nil {
			t.Fatalf("%v: encode: %v", typ, err)
		}
		got, err := Decode(b)
		if err != nil {
			t.Fatalf("%v: decode: %v", typ, err)
		}
		if !reflect.DeepEqual(got, d) {
			t.Fatalf("%v: round trip:\n got %+v\nwant %+v", typ, got, d)
		}
		if !Verify(b, testPub, addrA, addrB) {
			t.Fatalf("%v: signature does not verify", typ)
		}
	}
}

// A datagram is bound to its (source, destination) pair (002 §3).
func TestSignatureBindsAddresses(t *testing.T) {
	d := sample(Move)
	b, err := d.Encode(testKey, addrA, addrB)
	if err != nil {
		t.Fatal(err)
	}
	other := netip.MustParseAddrPort("10.7.0.2:7401")
	cases := []struct {
		name     string
		src, dst netip.AddrPort
	}{
		{"other destination", addrA, addrC},
		{"other source", addrC, addrB},
		{"other destination port", addrA, other},
		{"swapped", addrB, addrA},
	}
	for _, c := range cases {
		if Verify(b, testPub, c.src, c.dst) {
			t.Errorf("%s: signature verified, want rejection", c.name)
		}
	}
	// Every single-bit flip of the datagram breaks the signature.
	for i := range b {
		bb := append([]byte(nil), b...)
		bb[i] ^= 0x10
		if Verify(bb, testPub, addrA, addrB) {
			t.Fatalf("bit flip at byte %d still verifies", i)
		}
	}
	other2 := ed25519.NewKeyFromSeed(make([]byte, 32)).Public().(ed25519.PublicKey)
	if Verify(b, other2, addrA, addrB) {
		t.Error("verified with another member's key")
	}
}

// Two datagrams with the same content but different nonces have different
// signatures (002 §3: the timestamp changes every signature).
func TestNonceChangesSignature(t *testing.T) {
	d := sample(Commit)
	b1, _ := d.Encode(testKey, addrA, addrB)
	d.Nonce++
	b2, _ := d.Encode(testKey, addrA, addrB)
	if string(b1[len(b1)-SigLen:]) == string(b2[len(b2)-SigLen:]) {
		t.Fatal("same signature for different nonces")
	}
}

func TestDecodeErrorsNameTheField(t *testing.T) {
	good, err := (&Datagram{Type: Commit, Sender: "A", Token: TokenID{Gen: 5, Origin: "A"}, Session: 1, Nonce: 2}).Encode(testKey, addrA, addrB)
	if err != nil {
		t.Fatal(err)
	}
	mut := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	cases := []struct {
		name   string
		b      []byte
		field  string
		reason string
	}{
		{"empty", nil, "datagram", "truncated"},
		{"magic", mut(func(b []byte) []byte { b[0] = 'X'; return b }), "magic", "bad-magic"},
		{"version", mut(func(b []byte) []byte { b[2] = 9; return b }), "version", "bad-version"},
		{"type", mut(func(b []byte) []byte { b[3] = 0; return b }), "type", "bad-type"},
		{"flags on commit", mut(func(b []byte) []byte { b[4] = flagCert; return b }), "flags", "bad-flags"},
		{"unknown flag", mut(func(b []byte) []byte { b[3] = byte(Move); b[4] = 0x80; return b }), "flags", "bad-flags"},
		{"sender length", mut(func(b []byte) []byte { b[5] = 0; return b }), "sender.length", "bad-length"},
		{"sender name", mut(func(b []byte) []byte { b[6] = '/'; return b }), "sender", "bad-name"},
		{"reply port on commit", mut(func(b []byte) []byte { b[len(b)-SigLen-1] = 1; return b }), "reply_port", "bad-port"},
		{"trailing", mut(func(b []byte) []byte {
			return append(b[:len(b)-SigLen], append([]byte{0}, b[len(b)-SigLen:]...)...)
		}), "datagram", "trailing-bytes"},
		{"too large", make([]byte, MaxSize+1), "datagram", "too-large"},
	}
	for _, c := range cases {
		_, err := Decode(c.b)
		var we *Error
		if !errors.As(err, &we) {
			t.Errorf("%s: got %v, want *Error", c.name, err)
			continue
		}
		if we.Field != c.field || we.Reason != c.reason {
			t.Errorf("%s: got field %q reason %q (%v), want %q %q", c.name, we.Field, we.Reason, we, c.field, c.reason)
		}
	}
}

func TestEncodeRejectsBadFields(t *testing.T) {
	cases := map[string]Datagram{
		"type":         {Type: 7, Sender: "A", Token: TokenID{Origin: "A"}},
		"sender":       {Type: Commit, Sender: "", Token: TokenID{Origin: "A"}},
		"token.origin": {Type: Commit, Sender: "A", Token: TokenID{Origin: "a b"}},
		"reply_port":   {Type: Move, Sender: "A", Token: TokenID{Origin: "A"}},
		"certificate":  {Type: Commit, Sender: "A", Token: TokenID{Origin: "A"}, Cert: []byte{1}},
		"directory":    {Type: Move, ReplyPort: 1, Sender: "A", Token: TokenID{Origin: "A"}, Dir: make([]Entry, MaxEntries+1)},
	}
	for field, d := range cases {
		_, err := d.Encode(testKey, addrA, addrB)
		var we *Error
		if !errors.As(err, &we) || we.Field != field {
			t.Errorf("%s: got %v, want an error naming %q", field, err, field)
		}
	}
	// A full directory with a certificate must still fit MaxSize.
	d := sample(Move)
	d.Dir = nil
	for i := 0; i < MaxEntries; i++ {
		d.Dir = append(d.Dir, Entry{Name: "member-with-a-long-name-" + string(rune('a'+i%26)), Addr: addrC, Seen: 1})
	}
	if _, err := d.Encode(testKey, addrA, addrB); err == nil {
		t.Log("32 long entries fit")
	} else if we := (*Error)(nil); !errors.As(err, &we) || we.Reason != "too-large" {
		t.Fatalf("oversized datagram: %v, want too-large", err)
	}
}

// A directory entry's signature binds every field to the member that
// signed it, and cannot be confused with a datagram signature.
func TestEntrySignature(t *testing.T) {
	e := Entry{Name: "A", Addr: addrA, Seen: 1_700_000_000_000_000_000}
	e.Sign(testKey)
	if !e.VerifyEntry(testPub) {
		t.Fatal("a signed entry does not verify")
	}
	_, otherKey, _ := ed25519.GenerateKey(nil)
	for name, mod := range map[string]func(*Entry){
		"name":      func(e *Entry) { e.Name = "B" },
		"address":   func(e *Entry) { e.Addr = addrC },
		"port":      func(e *Entry) { e.Addr = netip.AddrPortFrom(e.Addr.Addr(), e.Addr.Port()+1) },
		"seen":      func(e *Entry) { e.Seen++ },
		"signature": func(e *Entry) { e.Sig[5] ^= 1 },
		"signer":    func(e *Entry) { e.Sign(otherKey) },
	} {
		c := e
		mod(&c)
		if c.VerifyEntry(testPub) {
			t.Errorf("entry with another %s still verifies", name)
		}
	}
	// The signature travels: decode(encode) keeps it verifiable.
	d := sample(Move)
	d.Dir = []Entry{e}
	b, err := d.Encode(testKey, addrA, addrB)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(b)
	if err != nil || !got.Dir[0].VerifyEntry(testPub) {
		t.Fatalf("entry signature lost on the wire: %v", err)
	}
}

func TestTokenIDOrderAndText(t *testing.T) {
	a := TokenID{Gen: 10, Origin: "B"}
	b := TokenID{Gen: 10, Origin: "C"}
	c := TokenID{Gen: 11, Origin: "A"}
	if a.Compare(b) >= 0 || b.Compare(c) >= 0 || a.Compare(c) >= 0 || c.Compare(a) <= 0 || a.Compare(a) != 0 {
		t.Fatal("token ids are not ordered by (generation, origin)")
	}
	got, err := ParseTokenID(c.String())
	if err != nil || got != c {
		t.Fatalf("ParseTokenID(%q) = %v, %v", c.String(), got, err)
	}
	for _, bad := range []string{"", "12", "x@A", "12@", "12@a b"} {
		if _, err := ParseTokenID(bad); err == nil {
			t.Errorf("ParseTokenID(%q) accepted", bad)
		}
	}
}

func TestRandomGarbageNeverDecodesAsSigned(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 20000; i++ {
		b := make([]byte, r.IntN(300))
		for j := range b {
			b[j] = byte(r.Uint32())
		}
		if _, err := Decode(b); err == nil && Verify(b, testPub, addrA, addrB) {
			t.Fatalf("random bytes verified: %x", b)
		}
	}
}

func BenchmarkEncodeSign(b *testing.B) {
	d := sample(Commit)
	for b.Loop() {
		if _, err := d.Encode(testKey, addrA, addrB); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeVerify(b *testing.B) {
	d := sample(Move)
	raw, _ := d.Encode(testKey, addrA, addrB)
	for b.Loop() {
		if _, err := Decode(raw); err != nil {
			b.Fatal(err)
		}
		if !Verify(raw, testPub, addrA, addrB) {
			b.Fatal("verify")
		}
	}
}
