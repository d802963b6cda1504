package wire

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"reflect"
	"testing"
)

// 002's 4-way datagrams carry no pass id, and their bytes are those they
// had before the 3-way exchange's pass id existed: the digests of the
// sample datagrams as the format encoded them then (ed25519 signatures
// are deterministic).
func TestFourWayBytesUnchanged(t *testing.T) {
	want := map[Type]string{
		Move:      "2437a8c5487d9edbaa5b6a3895b06f4b1bd7c17a047e2689bbf9aec30976f5e9",
		Ack:       "8805f5797382a2a73990a784b19789128b8b400bc35d91655915f073b162d7d6",
		Commit:    "a61d58f346e68b7f28755cf8d14632d4307f5416f398b81fde0c2ff5eb14e3c4",
		EarlyStop: "9c85e47ce8d0da50927d50273c6d336261875a384e46a9d1c73f78e155091726",
	}
	for typ, w := range want {
		d := sample(typ)
		b, err := d.Encode(testKey, addrA, addrB)
		if err != nil {
			t.Fatal(err)
		}
		if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != w {
			t.Errorf("%v: encoding changed: sha256 %x, want %s", typ, sum, w)
		}
	}
}

func withPassID(typ Type) Datagram {
	d := sample(typ)
	d.PassID = 0x9e3779b97f4a7c15
	return d
}

func TestPassIDRoundTrip(t *testing.T) {
	for _, typ := range []Type{Move, Ack, Commit} {
		d := withPassID(typ)
		b, err := d.Encode(testKey, addrA, addrB)
		if err != nil {
			t.Fatalf("%v: encode: %v", typ, err)
		}
		if b[4]&flagPassID == 0 {
			t.Fatalf("%v: flags %#x lack the pass id bit", typ, b[4])
		}
		got, err := Decode(b)
		if err != nil {
			t.Fatalf("%v: decode: %v", typ, err)
		}
		if !reflect.DeepEqual(got, d) {
			t.Fatalf("%v: round trip:\n got %+v\nwant %+v", typ, got, d)
		}
	}
}

// passIDOffset is where the pass id of a Commit encoded from d starts.
func passIDOffset(d Datagram) int {
	return fixedHeader + len(d.Sender) + 8 + 1 + len(d.Token.Origin) + 8 + 8 + 2
}

// The signature covers the pass id: a datagram whose id was changed in
// flight (a late reply passed off as one of the pass in progress) does
// not verify.
func TestPassIDSigned(t *testing.T) {
	d := withPassID(Commit)
	b, err := d.Encode(testKey, addrA, addrB)
	if err != nil {
		t.Fatal(err)
	}
	at := passIDOffset(d)
	b[at+7] ^= 1
	got, err := Decode(b)
	if err != nil || got.PassID != d.PassID^1 {
		t.Fatalf("tampered datagram: decode %v, pass id %#x, want %#x", err, got.PassID, d.PassID^1)
	}
	if Verify(b, testPub, addrA, addrB) {
		t.Fatal("a tampered pass id verifies")
	}
}

func TestPassIDDecodeErrors(t *testing.T) {
	d := withPassID(Commit)
	good, err := d.Encode(testKey, addrA, addrB)
	if err != nil {
		t.Fatal(err)
	}
	at := passIDOffset(d)
	cut := func(n int) []byte { // the datagram cut n bytes into its pass id
		return append(append([]byte(nil), good[:at+n]...), good[len(good)-SigLen:]...)
	}
	zero := append([]byte(nil), good...)
	copy(zero[at:at+8], make([]byte, 8))
	for _, c := range []struct {
		name          string
		b             []byte
		field, reason string
		offset        int
	}{
		{"truncated", cut(5), "pass_id", "truncated", at},
		{"absent", cut(0), "pass_id", "truncated", at},
		{"zero", zero, "pass_id", "bad-value", at},
	} {
		_, err := Decode(c.b)
		var we *Error
		if !errors.As(err, &we) || we.Field != c.field || we.Reason != c.reason || we.Offset != c.offset {
			t.Errorf("%s: got %v, want field %q reason %q at offset %d", c.name, err, c.field, c.reason, c.offset)
		}
	}
}
