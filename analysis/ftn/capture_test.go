package ftn

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"tokenbed/analysis/ftn/ftnliteral"
)

// renderCapture prints the capture's verdicts, its holds and its facts.
func renderCapture(r *CaptureReport) string {
	var b strings.Builder
	for _, n := range CaptureNames {
		q := r.Requirement(n)
		fmt.Fprintf(&b, "%s: %s (%s)\n  %s\n", n, q.Verdict, q.Value, q.Detail)
	}
	for _, h := range r.Holds {
		fmt.Fprintf(&b, "hold %s %s(%s) %s fence %s [%s] %s\n", h.Op.Name, h.Op.Client, h.Op.ID, h.Op.Mode, h.Op.Fence, span(h), h.EndWhy)
	}
	for _, h := range r.NotArrived {
		fmt.Fprintf(&b, "not arrived: %s %s(%s) fence %s\n", h.Op.Name, h.Op.Client, h.Op.ID, h.Op.Fence)
	}
	fmt.Fprintf(&b, "facts: %s", r.facts())
	return b.String()
}

// checkLiteralCapture judges a literal capture (ftnliteral's format);
// times read as written.
func checkLiteralCapture(t *testing.T, text, pos string, base int64) *CaptureReport {
	t.Helper()
	// 64-byte fragments: a "fragmented" release is a few.
	c, err := ftnliteral.Build(text, pos, ftnliteral.Options{FragmentSize: 64})
	if err != nil {
		t.Fatal(err)
	}
	// BaseWall 1 ns: the literal file's own origin, 0 s.
	r, err := CheckCapture(bytes.NewReader(c.Pcapng), CaptureOptions{CA: c.CA, BaseWall: max(base, 1)})
	if err != nil {
		t.Fatal(err)
	}
	return r
}
