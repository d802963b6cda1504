package codec

import (
	"crypto/x509"
	"time"
)

// notAfter is a verified certificate's expiry, so that a cached one is
// checked again once it has expired.
func notAfter(der []byte) (time.Time, error) {
	c, err := x509.ParseCertificate(der)
	if err != nil {
		return time.Time{}, err
	}
	return c.NotAfter, nil
}
