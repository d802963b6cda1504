package main

import (
	"bytes"
	"strings"
	"testing"
)

// Asking for help is not an error: every verb prints its usage to stdout
// and exits 0, so that a script can run `harness VERB -h` under set -e; a
// flag the verb does not know is still a usage error, on stderr, exit 2.
func TestHelpExitsZero(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string // in the usage printed
	}{
		{[]string{"-h"}, "harness run"},
		{[]string{"--help"}, "harness run"},
		{[]string{"run", "-h"}, "harness run"},
		{[]string{"run", "--help"}, "-backend"},
		{[]string{"analyze", "-h"}, "harness analyze"},
		{[]string{"compare", "-h"}, "harness compare"},
		{[]string{"pcap", "-h"}, "harness pcap"},
		{[]string{"pcap", "capture.pcapng", "-h"}, "harness pcap"},
		{[]string{"preflight", "-h"}, "harness preflight"},
		{[]string{"clean", "-h"}, "harness clean"},
		{[]string{"swarm", "-h"}, "harness swarm"},
	} {
		var out, errb bytes.Buffer
		code := run(c.args, &out, &errb)
		if code != exitOK || !strings.Contains(out.String(), c.want) || errb.Len() != 0 {
			t.Errorf("harness %s: exit %d, stdout %q, stderr %q; want exit 0, %q on stdout, nothing on stderr",
				strings.Join(c.args, " "), code, out.String(), errb.String(), c.want)
		}
	}
}

func TestWrongFlagExitsTwo(t *testing.T) {
	for _, verb := range []string{"run", "analyze", "compare", "pcap", "preflight", "clean", "swarm"} {
		var out, errb bytes.Buffer
		code := run([]string{verb, "--no-such-flag"}, &out, &errb)
		const want = "flag provided but not defined: -no-such-flag"
		if code != exitUsage || !strings.Contains(errb.String(), want) || out.Len() != 0 {
			t.Errorf("harness %s --no-such-flag: exit %d, stdout %q, stderr %q; want exit %d, %q on stderr, nothing on stdout",
				verb, code, out.String(), errb.String(), exitUsage, want)
		}
	}
}
