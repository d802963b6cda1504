package codec

import (
	"errors"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"tokenbed/agent/ca"
	"tokenbed/agent/ftn/msg"
)

// t0 is now: ca.LoadMember checks certificates against the wall clock.
var t0 = time.Now().Truncate(time.Second)

func member(t testing.TB, dir, name string, seed uint64) *ca.Credentials {
	t.Helper()
	src := ca.Seeded(seed, t0, t0.Add(24*time.Hour))
	if _, err := ca.LoadCert(filepath.Join(dir, "ca.crt")); err != nil {
		if err := ca.InitWith(dir, src); err != nil {
			t.Fatal(err)
		}
	}
	if err := ca.IssueWith(dir, name, src); err != nil {
		t.Fatal(err)
	}
	c, err := ca.LoadMember(dir, name, filepath.Join(dir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func reason(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ""
}

func TestRoundTripAndRefusals(t *testing.T) {
	dir := t.TempDir()
	s0, c0 := member(t, dir, "s0", 1), member(t, dir, "c0", 1)
	other := member(t, t.TempDir(), "c0", 2) // same name, another CA
	a := netip.MustParseAddrPort("10.0.0.1:7000")
	b := netip.MustParseAddrPort("10.0.1.1:7000")
	m := msg.Msg{Kind: msg.Acquire, Client: 5, Req: 3, Name: "a", Mode: msg.Shared, Fence: msg.Fence{Epoch: 1 << 32, Counter: 2}}
	enc := New(c0)
	dec := New(s0)
	d, err := enc.Encode(m, b, a, t0)
	if err != nil {
		t.Fatal(err)
	}
	from, got, err := dec.Decode(d, b, a, t0)
	if err != nil || from.Name != "c0" || from.Addr != b || got.Name != "a" || got.Mode != msg.Shared || got.Fence != m.Fence {
		t.Fatalf("decode: %v %+v %+v", err, from, got)
	}
	cases := []struct {
		name     string
		data     []byte
		src, dst netip.AddrPort
		want     string
	}{
		{"another destination", d, b, b, "bad-signature"},
		{"another source", d, a, a, "bad-signature"},
		{"a flipped body byte", flip(d, len(d)-70), b, a, "bad-signature"},
		{"another CA", must(New(other).Encode(m, b, a, t0)), b, a, "bad-certificate"},
		{"shorter than the fixed fields", d[:20], b, a, "malformed:magic"},
		{"not ours", []byte("TB\x02hello world, long enough to be a datagram of some other kind................................"), b, a, "malformed:magic"},
		{"another version", setByte(d, 2, 2), b, a, "malformed:version"},
		{"an empty name", setByte(d, 3, 0), b, a, "malformed:name"},
		{"a name longer than 63", setByte(d, 3, 64), b, a, "malformed:name"},
		// Cut inside each field: the signature is taken from the last 64
		// bytes whatever they are, so every field after the cut runs short.
		{"truncated in the certificate", d[:4+2+2+100+64], b, a, "malformed:cert"},
		{"truncated in the nonce", d[:4+2+2+certLen(d)+3+64], b, a, "malformed:nonce"},
		{"truncated in the body length", d[:4+2+2+certLen(d)+8+2+64], b, a, "malformed:body"},
		{"truncated in the body", d[:len(d)-64-5], b, a, "malformed:body"},
		{"a byte too many", append(append(append([]byte(nil), d[:len(d)-64]...), 0), d[len(d)-64:]...), b, a, "malformed:body"},
	}
	for _, c := range cases {
		if _, _, err := dec.Decode(c.data, c.src, c.dst, t0); reason(err) != c.want {
			t.Errorf("%s: %v, want %s", c.name, err, c.want)
		}
	}
	// An expired certificate is refused even once cached.
	if _, _, err := dec.Decode(d, b, a, t0.Add(48*time.Hour)); reason(err) != "bad-certificate" {
		t.Errorf("expired: %v", err)
	}
}

// setByte returns a copy of b with b[i] = v.
func setByte(b []byte, i int, v byte) []byte {
	c := append([]byte(nil), b...)
	c[i] = v
	return c
}

// certLen is the certificate length field of a datagram whose sender's
// name is two bytes long ("c0").
func certLen(d []byte) int { return int(d[6])<<8 | int(d[7]) }

func flip(b []byte, i int) []byte {
	c := append([]byte(nil), b...)
	c[i] ^= 1
	return c
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// A reader of a capture holds only the CA: NewOpener opens what a member
// sealed, and Split gives the fields before any check.
func TestOpenerAndSplit(t *testing.T) {
	dir := t.TempDir()
	c0 := member(t, dir, "c0", 1)
	a := netip.MustParseAddrPort("10.0.0.1:7000")
	b := netip.MustParseAddrPort("10.0.1.1:7000")
	m := msg.Msg{Kind: msg.Release, Client: 5, Req: 4, Name: "a", Fence: msg.Fence{Epoch: 1 << 32, Counter: 2}}
	d, err := New(c0).Encode(m, b, a, t0)
	if err != nil {
		t.Fatal(err)
	}
	sp, err := Split(d)
	if err != nil || sp.Sender != "c0" || sp.Nonce != uint64(t0.UnixNano()) || len(sp.Sig) != 64 {
		t.Fatalf("split: %v %+v", err, sp)
	}
	if got, err := sp.Message(); err != nil || got.Kind != msg.Release || got.Fence != m.Fence {
		t.Errorf("message: %v %+v", err, got)
	}
	op := NewOpener(c0.CA)
	if from, got, err := op.Decode(d, b, a, t0); err != nil || from.Name != "c0" || got.Req != 4 {
		t.Errorf("opener: %v %+v %+v", err, from, got)
	}
	if _, _, err := op.Decode(flip(d, len(d)-70), b, a, t0); reason(err) != "bad-signature" {
		t.Errorf("opener, flipped byte: %v", err)
	}
	if _, err := op.Encode(m, a, b, t0); !errors.Is(err, ErrNoCredentials) {
		t.Errorf("opener's Encode: %v", err)
	}
	if _, err := Split(d[:30]); reason(err) != "malformed:magic" {
		t.Errorf("split of a truncated datagram: %v, want malformed:magic", err)
	}
	if _, err := Split(d[:len(d)-70]); reason(err) != "malformed:body" {
		t.Errorf("split of a datagram cut in its body: %v, want malformed:body", err)
	}
	bad := Datagram{Body: []byte(`{"Kind":4,"Bogus":1}`)}
	if _, err := bad.Message(); reason(err) != "malformed:json" {
		t.Errorf("an unknown field: %v, want malformed:json", err)
	}
	bad.Body = []byte(`{"Kind":99}`)
	if _, err := bad.Message(); reason(err) != "malformed:kind 99" {
		t.Errorf("an unknown kind: %v, want malformed:kind 99", err)
	}
}
