package wire

import (
	"bytes"
	"testing"
)

// FuzzDecode checks that Decode never panics and that whatever it accepts
// re-encodes to the same bytes (the format has one encoding per datagram).
func FuzzDecode(f *testing.F) {
	for _, typ := range []Type{Move, Ack, Commit, EarlyStop} {
		d := sample(typ)
		b, err := d.Encode(testKey, addrA, addrB)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		if typ != EarlyStop {
			d := withPassID(typ)
			b, err := d.Encode(testKey, addrA, addrB)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
	f.Add([]byte("TB"))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := Decode(b)
		if err != nil {
			return
		}
		re, err := d.Encode(testKey, addrA, addrB)
		if err != nil {
			t.Fatalf("decoded datagram does not re-encode: %v\n%+v", err, d)
		}
		if !bytes.Equal(re[:len(re)-SigLen], b[:len(b)-SigLen]) {
			t.Fatalf("re-encoding differs:\n in %x\nout %x", b[:len(b)-SigLen], re[:len(re)-SigLen])
		}
	})
}
