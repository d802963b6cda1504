// Package ca is the membership's Certification Authority (002 §2, §3): it
// issues X.509 certificates for Ed25519 member keys, and verifies the
// certificates that members piggyback on their datagrams. The CA
// certificate is the only global datum of the protocol.
//
// Files, all PEM, in one directory:
//
//	ca.crt       the CA certificate (0644): give it to every member
//	ca.key       the CA private key (0600): keep it away from members
//	NAME.crt     a member's certificate, CommonName NAME (0644)
//	NAME.key     a member's private key (0600)
package ca

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"sync"
	"time"

	"tokenbed/agent/wire"
)

// Validity periods of issued certificates.
const (
	CAValidity     = 10 * 365 * 24 * time.Hour
	MemberValidity = 2 * 365 * 24 * time.Hour
)

// File names inside a CA directory.
const (
	CACertFile = "ca.crt"
	CAKeyFile  = "ca.key"
)

// CertFile and KeyFile name a member's files.
func CertFile(name string) string { return name + ".crt" }
func KeyFile(name string) string  { return name + ".key" }

// Source is where credentials get their randomness and dates. The zero
// value (or nil) is crypto/rand and the wall clock: what a real CA uses.
// The simulator (harness/sim) uses Seeded, so that the same seed gives the
// same keys, certificates, signatures and therefore the same capture.
type Source struct {
	// Seed, when Seeded is set, derives every key and serial number:
	// each from the seed and what it is for (the member's name), so a
	// member's key does not depend on the order of issue.
	Seed   uint64
	Seeded bool
	// Now, when not zero, replaces the wall clock for the validity
	// periods; NotAfter, when not zero, ends every certificate's validity.
	Now      time.Time
	NotAfter time.Time
}

// Seeded returns a deterministic source: keys from seed, certificates
// valid from an hour before now until notAfter.
func Seeded(seed uint64, now, notAfter time.Time) *Source {
	return &Source{Seed: seed, Seeded: true, Now: now, NotAfter: notAfter}
}

func (s *Source) now() time.Time {
	if s == nil || s.Now.IsZero() {
		return time.Now()
	}
	return s.Now
}

func (s *Source) notAfter(validity time.Duration) time.Time {
	if s == nil || s.NotAfter.IsZero() {
		return s.now().Add(validity)
	}
	return s.NotAfter
}

// bytes returns n bytes for label: seeded, or from crypto/rand.
func (s *Source) bytes(label string, n int) []byte {
	b := make([]byte, n)
	if s == nil || !s.Seeded {
		rand.Read(b)
		return b
	}
	for i := 0; i < n; i += sha256.Size {
		sum := sha256.Sum256(fmt.Appendf(nil, "tokenbed ca %d %s %d", s.Seed, label, i))
		copy(b[i:], sum[:])
	}
	return b
}

func (s *Source) key(label string) (ed25519.PublicKey, ed25519.PrivateKey) {
	priv := ed25519.NewKeyFromSeed(s.bytes("key "+label, ed25519.SeedSize))
	return priv.Public().(ed25519.PublicKey), priv
}

// serial is a positive 127-bit serial number.
func (s *Source) serial(label string) *big.Int {
	b := s.bytes("serial "+label, 16)
	b[0] &= 0x7f
	return new(big.Int).SetBytes(b)
}

// Init creates a new CA in dir. It refuses to overwrite an existing CA.
func Init(dir string) error { return InitWith(dir, nil) }

// InitWith is Init with the randomness and dates of src.
func InitWith(dir string, src *Source) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	pub, priv := src.key("ca")
	now := src.now()
	tmpl := &x509.Certificate{
		SerialNumber:          src.serial("ca"),
		Subject:               pkix.Name{CommonName: "tokenbed CA", Organization: []string{"tokenbed"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              src.notAfter(CAValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, priv)
	if err != nil {
		return err
	}
	if err := writeKey(filepath.Join(dir, CAKeyFile), priv); err != nil {
		return err
	}
	return writePEM(filepath.Join(dir, CACertFile), "CERTIFICATE", der, 0o644)
}

// Issue creates a key pair and a certificate for the member name, signed by
// the CA in dir, and writes them into dir. It refuses to overwrite.
func Issue(dir, name string) error { return IssueWith(dir, name, nil) }

// IssueWith is Issue with the randomness and dates of src.
func IssueWith(dir, name string, src *Source) error {
	if !wire.ValidName(name) {
		return fmt.Errorf("member name %q: want 1 to %d letters, digits, '.', '_' or '-'", name, wire.MaxNameLen)
	}
	caCert, err := LoadCert(filepath.Join(dir, CACertFile))
	if err != nil {
		return err
	}
	caKey, err := LoadKey(filepath.Join(dir, CAKeyFile))
	if err != nil {
		return err
	}
	pub, priv := src.key("member " + name)
	now := src.now()
	tmpl := &x509.Certificate{
		SerialNumber: src.serial("member " + name),
		Subject:      pkix.Name{CommonName: name, Organization: []string{"tokenbed member"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     src.notAfter(MemberValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, pub, caKey)
	if err != nil {
		return err
	}
	if len(der) > wire.MaxCertLen {
		return fmt.Errorf("certificate for %q is %d bytes, more than a datagram carries (%d)", name, len(der), wire.MaxCertLen)
	}
	if err := writeKey(filepath.Join(dir, KeyFile(name)), priv); err != nil {
		return err
	}
	return writePEM(filepath.Join(dir, CertFile(name)), "CERTIFICATE", der, 0o644)
}

func writeKey(path string, k ed25519.PrivateKey) error {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return err
	}
	return writePEM(path, "PRIVATE KEY", der, 0o600)
}

// writePEM creates path exclusively: credentials are never overwritten.
func writePEM(path, typ string, der []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%s already exists: refusing to overwrite credentials", path)
		}
		return err
	}
	if err := pem.Encode(f, &pem.Block{Type: typ, Bytes: der}); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func readPEM(path, typ string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != typ {
		return nil, fmt.Errorf("%s: no PEM block of type %q", path, typ)
	}
	return blk.Bytes, nil
}

// LoadCert reads a PEM certificate.
func LoadCert(path string) (*x509.Certificate, error) {
	der, err := readPEM(path, "CERTIFICATE")
	if err != nil {
		return nil, err
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return c, nil
}

// ReadCert reads a PEM certificate's DER, unparsed (Verifier.Verify
// parses it).
func ReadCert(path string) ([]byte, error) { return readPEM(path, "CERTIFICATE") }

// LoadKey reads a PEM PKCS#8 Ed25519 private key. A key readable by group
// or others is refused, as ssh does.
func LoadKey(path string) (ed25519.PrivateKey, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%s: private key is accessible by others (mode %v); chmod 600 it", path, st.Mode().Perm())
	}
	der, err := readPEM(path, "PRIVATE KEY")
	if err != nil {
		return nil, err
	}
	k, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	ek, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%s: not an Ed25519 key", path)
	}
	return ek, nil
}

// Credentials are what a member needs to take part: its name, key and
// certificate, and the CA certificate to check the others'.
type Credentials struct {
	Name string
	Key  ed25519.PrivateKey
	Cert []byte // DER, piggybacked on datagrams
	CA   *x509.Certificate
}

// LoadMember reads the credentials of member name: NAME.key and NAME.crt
// from dir, and the CA certificate from caCert. It checks that the
// certificate is the key's and is signed by the CA.
func LoadMember(dir, name, caCert string) (*Credentials, error) {
	ca, err := LoadCert(caCert)
	if err != nil {
		return nil, err
	}
	key, err := LoadKey(filepath.Join(dir, KeyFile(name)))
	if err != nil {
		return nil, err
	}
	cert, err := LoadCert(filepath.Join(dir, CertFile(name)))
	if err != nil {
		return nil, err
	}
	v := NewVerifier(ca)
	cn, pub, err := v.Verify(cert.Raw, time.Now())
	if err != nil {
		return nil, fmt.Errorf("%s: %v", filepath.Join(dir, CertFile(name)), err)
	}
	if cn != name {
		return nil, fmt.Errorf("%s: certificate is for %q, not %q", filepath.Join(dir, CertFile(name)), cn, name)
	}
	if !pub.Equal(key.Public()) {
		return nil, fmt.Errorf("%s does not match %s", CertFile(name), KeyFile(name))
	}
	return &Credentials{Name: name, Key: key, Cert: cert.Raw, CA: ca}, nil
}

// Verifier checks member certificates against the CA certificate.
type Verifier struct {
	roots *x509.CertPool
	ca    *x509.Certificate
	// accepted, when not nil, remembers verdicts (Verified.Verifier).
	accepted *accepted
}

// NewVerifier returns a verifier trusting ca alone.
func NewVerifier(ca *x509.Certificate) *Verifier {
	p := x509.NewCertPool()
	p.AddCert(ca)
	return &Verifier{roots: p, ca: ca}
}

// Verify checks that der is a certificate signed by the CA, valid at now,
// for an Ed25519 key and a valid member name. It returns the name and key.
// It reads no clock: now is the caller's.
func (v *Verifier) Verify(der []byte, now time.Time) (string, ed25519.PublicKey, error) {
	if name, key, ok := v.accepted.lookup(der, now); ok {
		return name, key, nil
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		return "", nil, fmt.Errorf("certificate: %v", err)
	}
	if _, err := c.Verify(x509.VerifyOptions{Roots: v.roots, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return "", nil, fmt.Errorf("certificate of %q: %v", c.Subject.CommonName, err)
	}
	pub, ok := c.PublicKey.(ed25519.PublicKey)
	if !ok {
		return "", nil, fmt.Errorf("certificate of %q: not an Ed25519 key", c.Subject.CommonName)
	}
	// x509 returns the key as a slice of der: copy it, since callers cache
	// keys and der is often a reused receive buffer.
	pub = append(ed25519.PublicKey(nil), pub...)
	if !wire.ValidName(c.Subject.CommonName) {
		return "", nil, fmt.Errorf("certificate: bad member name %q", c.Subject.CommonName)
	}
	v.accepted.add(der, c, v.ca, c.Subject.CommonName, pub)
	return c.Subject.CommonName, pub, nil
}

// Verified shares certificate verification among the members of one
// simulation (harness/sim runs a run's agents in one process): the
// members' verifiers of one CA are one Verifier, which remembers each
// certificate it accepted, so that n members loading their n-1 peers'
// certificates verify n of them, not n(n-1), and a certificate
// piggybacked to many members is verified once.
//
// It is sound because a verdict depends on nothing but the certificate's
// bytes, the CA certificate and the time: a remembered verdict is reused
// only for the same bytes (the key is the whole DER, not a file name or a
// hash of it), by the verifier of the same CA (by its bytes), and at a
// time inside the validity periods of both certificates, the only use
// x509 verification makes of the time. A refused certificate is not
// remembered: it is checked, and refused, each time, as each real member
// would. The keys it returns are shared: callers do not write them.
//
// Real members are separate processes and verify what they load
// themselves: a nil *Verified gives each its own NewVerifier.
type Verified struct {
	mu   sync.Mutex
	byCA map[string]*Verifier // by the CA certificate's DER
}

// Verifier returns the verifier trusting ca: one per CA, shared, when s is
// not nil; a new one when s is nil.
func (s *Verified) Verifier(ca *x509.Certificate) *Verifier {
	if s == nil {
		return NewVerifier(ca)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if v := s.byCA[string(ca.Raw)]; v != nil {
		return v
	}
	v := NewVerifier(ca)
	v.accepted = &accepted{m: map[string]acceptance{}}
	if s.byCA == nil {
		s.byCA = map[string]*Verifier{}
	}
	s.byCA[string(ca.Raw)] = v
	return v
}

// accepted are the certificates a shared verifier accepted, by their DER.
// At most one entry per certificate the CA issued: nothing else verifies.
type accepted struct {
	mu sync.Mutex
	m  map[string]acceptance
}

// acceptance is a verdict and the times it holds for: the intersection of
// the certificate's and the CA's validity periods.
type acceptance struct {
	name          string
	key           ed25519.PublicKey
	from, through time.Time
}

func (a *accepted) lookup(der []byte, now time.Time) (string, ed25519.PublicKey, bool) {
	if a == nil {
		return "", nil, false
	}
	a.mu.Lock()
	e, ok := a.m[string(der)]
	a.mu.Unlock()
	// The bounds as x509 checks them: valid from NotBefore through
	// NotAfter, both included.
	if !ok || now.Before(e.from) || now.After(e.through) {
		return "", nil, false
	}
	return e.name, e.key, true
}

func (a *accepted) add(der []byte, c, ca *x509.Certificate, name string, key ed25519.PublicKey) {
	if a == nil {
		return
	}
	e := acceptance{name: name, key: key, from: c.NotBefore, through: c.NotAfter}
	if ca.NotBefore.After(e.from) {
		e.from = ca.NotBefore
	}
	if ca.NotAfter.Before(e.through) {
		e.through = ca.NotAfter
	}
	a.mu.Lock()
	a.m[string(der)] = e
	a.mu.Unlock()
}
