package pcaptimeline_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"tokenbed/analysis/ftn/ftnliteral"
)

// TestFTNTimeline prints the timelines of the literal FTN captures of
// testdata/ftn.txt against their golden output (-rewrite regenerates
// it). The command is "pcap" with the flags of `harness pcap`
// (-name=a); the input is a literal capture (analysis/ftn/ftnliteral).
func TestFTNTimeline(t *testing.T) {
	datadriven.RunTest(t, "testdata/ftn.txt", func(t *testing.T, d *datadriven.TestData) string {
		if d.Cmd != "pcap" {
			d.Fatalf(t, "unknown command %q", d.Cmd)
		}
		path := literalFTN(t, d.Input, d.Pos)
		args := []string{path}
		for _, a := range d.CmdArgs {
			args = append(args, a.String())
		}
		out, errOut, code := run(t, args...)
		if code != 0 {
			return fmt.Sprintf("exit %d: %s", code, errOut)
		}
		return strings.ReplaceAll(out, path, "capture.pcapng")
	})
}

// literalFTN writes the literal capture text (ftnliteral's format,
// fragments of an MTU of 1500 bytes) to a file and returns its path.
func literalFTN(t *testing.T, text, pos string) string {
	t.Helper()
	c, err := ftnliteral.Build(text, pos, ftnliteral.Options{})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "ftn.pcapng")
	if err := os.WriteFile(path, c.Pcapng, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
