package ca

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestInitIssueLoad(t *testing.T) {
	dir := t.TempDir()
	if err := Init(dir); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"A", "B"} {
		if err := Issue(dir, n); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{CAKeyFile, KeyFile("A"), KeyFile("B")} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", f, st.Mode().Perm())
		}
	}
	a, err := LoadMember(dir, "A", filepath.Join(dir, CACertFile))
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Cert) > 400 {
		t.Errorf("member certificate is %d bytes; expected about 300 for Ed25519", len(a.Cert))
	}
	name, pub, err := NewVerifier(a.CA).Verify(a.Cert, time.Now())
	if err != nil || name != "A" || !pub.Equal(a.Key.Public()) {
		t.Fatalf("Verify = %q, %v, %v", name, pub, err)
	}
	// Expired or not yet valid.
	if _, _, err := NewVerifier(a.CA).Verify(a.Cert, time.Now().Add(MemberValidity+time.Hour)); err == nil {
		t.Error("expired certificate accepted")
	}
	// A member certificate is not a CA: B's certificate signed by another CA.
	other := t.TempDir()
	if err := Init(other); err != nil {
		t.Fatal(err)
	}
	if err := Issue(other, "B"); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadMember(other, "B", filepath.Join(dir, CACertFile)); err == nil || !strings.Contains(err.Error(), "B.crt") {
		t.Errorf("certificate from another CA: got %v, want an error naming B.crt", err)
	}
	// Mismatched key and certificate.
	if err := os.Rename(filepath.Join(dir, KeyFile("B")), filepath.Join(dir, KeyFile("A")+".b")); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, KeyFile("A")))
	os.Rename(filepath.Join(dir, KeyFile("A")+".b"), filepath.Join(dir, KeyFile("A")))
	if _, err := LoadMember(dir, "A", filepath.Join(dir, CACertFile)); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Errorf("mismatched key: got %v", err)
	}
}

func TestRefusals(t *testing.T) {
	dir := t.TempDir()
	if err := Init(dir); err != nil {
		t.Fatal(err)
	}
	if err := Init(dir); err == nil || !strings.Contains(err.Error(), "refusing to overwrite") {
		t.Errorf("second Init: %v", err)
	}
	if err := Issue(dir, "A"); err != nil {
		t.Fatal(err)
	}
	if err := Issue(dir, "A"); err == nil {
		t.Error("second Issue of A overwrote credentials")
	}
	if err := Issue(dir, "bad name"); err == nil || !strings.Contains(err.Error(), "member name") {
		t.Errorf("bad name: %v", err)
	}
	os.Chmod(filepath.Join(dir, KeyFile("A")), 0o644)
	if _, err := LoadKey(filepath.Join(dir, KeyFile("A"))); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("world-readable key: %v", err)
	}
}

// The key Verify returns must not alias the certificate bytes: the agent
// caches it while its receive buffer is reused for the next datagram.
func TestVerifiedKeyDoesNotAliasInput(t *testing.T) {
	dir := t.TempDir()
	if err := Init(dir); err != nil {
		t.Fatal(err)
	}
	if err := Issue(dir, "A"); err != nil {
		t.Fatal(err)
	}
	a, err := LoadMember(dir, "A", filepath.Join(dir, CACertFile))
	if err != nil {
		t.Fatal(err)
	}
	buf := append([]byte(nil), a.Cert...)
	_, pub, err := NewVerifier(a.CA).Verify(buf, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for i := range buf {
		buf[i] = 0xAA
	}
	if !pub.Equal(a.Key.Public()) {
		t.Fatal("overwriting the certificate bytes changed the verified key")
	}
}
