package ca

import (
	"crypto/x509"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// issue makes a CA in a new directory and members in it, and returns the
// directory and the CA certificate.
func issue(t *testing.T, src *Source, names ...string) (string, *x509.Certificate) {
	t.Helper()
	dir := t.TempDir()
	if err := InitWith(dir, src); err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if err := IssueWith(dir, n, src); err != nil {
			t.Fatal(err)
		}
	}
	c, err := LoadCert(filepath.Join(dir, CACertFile))
	if err != nil {
		t.Fatal(err)
	}
	return dir, c
}

func der(t *testing.T, dir, name string) []byte {
	t.Helper()
	b, err := ReadCert(filepath.Join(dir, CertFile(name)))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A shared verifier remembers only what it accepted, for the same bytes,
// the same CA and a time inside both validity periods: a certificate of
// another CA under the same name, altered bytes, or a time outside the
// validity are refused after the genuine certificate was accepted, as a
// verifier of its own refuses them.
func TestVerifiedAcceptsOnlyWhatVerifies(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	src := &Source{Seed: 1, Seeded: true, Now: now}
	dir, caCert := issue(t, src, "A", "B")
	// Another CA, another seed, the same member names.
	other, otherCA := issue(t, &Source{Seed: 2, Seeded: true, Now: now}, "A")

	s := &Verified{}
	v := s.Verifier(caCert)
	if s.Verifier(caCert) != v {
		t.Fatal("two verifiers for one CA: nothing is shared")
	}
	again, _ := LoadCert(filepath.Join(dir, CACertFile)) // the same CA, loaded by another member
	if s.Verifier(again) != v {
		t.Fatal("the same CA certificate loaded twice gives two verifiers")
	}
	if s.Verifier(otherCA) == v {
		t.Fatal("another CA's members share the first CA's verifier")
	}

	a := der(t, dir, "A")
	for range 2 { // verified, then remembered
		name, key, err := v.Verify(a, now)
		if err != nil || name != "A" {
			t.Fatalf("A's certificate: %q %v", name, err)
		}
		_, want, _ := NewVerifier(caCert).Verify(a, now)
		if !key.Equal(want) {
			t.Fatal("remembered key differs from the certificate's")
		}
	}
	if len(v.accepted.m) != 1 {
		t.Fatalf("%d certificates remembered, want 1", len(v.accepted.m))
	}

	// A's certificate from the other CA: same name, not this CA's.
	if _, _, err := v.Verify(der(t, other, "A"), now); err == nil {
		t.Error("a certificate of another CA accepted after the genuine one")
	}
	// One byte of the signature changed.
	bad := append([]byte(nil), a...)
	bad[len(bad)-1] ^= 1
	if _, _, err := v.Verify(bad, now); err == nil {
		t.Error("an altered certificate accepted after the genuine one")
	}
	// Outside the validity period, which a remembered verdict keeps.
	for _, at := range []time.Time{now.Add(-2 * time.Hour), now.Add(MemberValidity + time.Hour)} {
		_, _, want := NewVerifier(caCert).Verify(a, at)
		if _, _, err := v.Verify(a, at); err == nil || want == nil || err.Error() != want.Error() {
			t.Errorf("at %v: %v, want %v (as a verifier of its own)", at, err, want)
		}
	}
	// Refusals are not remembered; the genuine one still verifies.
	if len(v.accepted.m) != 1 {
		t.Errorf("%d certificates remembered, want 1: a refusal was remembered", len(v.accepted.m))
	}
	if name, _, err := v.Verify(der(t, dir, "B"), now); err != nil || name != "B" {
		t.Errorf("B: %q %v", name, err)
	}
	// The other CA's verifier refuses this CA's certificates.
	if _, _, err := s.Verifier(otherCA).Verify(a, now); err == nil || !strings.Contains(err.Error(), "unknown authority") {
		t.Errorf("the other CA's verifier: %v", err)
	}
}

// Without sharing (nil: a process of its own), each call is a new
// verifier that remembers nothing.
func TestNilVerifiedIsAVerifierOfItsOwn(t *testing.T) {
	_, caCert := issue(t, nil)
	var s *Verified
	v := s.Verifier(caCert)
	if v == s.Verifier(caCert) || v.accepted != nil {
		t.Error("a nil Verified shares or remembers")
	}
}
