package main

import (
	"bytes"
	"strings"
	"testing"
)

// Asking for help is not an error: every verb prints its usage to stdout
// and exits 0, so that a script can run `agent VERB -h` under set -e; a
// flag the verb does not know is still a usage error, on stderr, exit 2.
func TestHelpExitsZero(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string // in the usage printed
	}{
		{[]string{"-h"}, "agent run"},
		{[]string{"--help"}, "agent run"},
		{[]string{"run", "-h"}, "agent run"},
		{[]string{"run", "--help"}, "-config"},
		{[]string{"ca", "-h"}, "agent ca init"},
		{[]string{"ca", "init", "-h"}, "agent ca init"},
		{[]string{"ca", "issue", "-h"}, "agent ca issue"},
		{[]string{"resource-server", "-h"}, "agent resource-server"},
		{[]string{"ftn", "-h"}, "agent ftn server"},
		{[]string{"ftn", "server", "-h"}, "agent ftn server"},
		{[]string{"ftn", "client", "-h"}, "agent ftn client"},
		{[]string{"ftn", "run", "-h"}, "agent ftn run"},
		{[]string{"ftn", "server", "--config", "F", "-h"}, "agent ftn server"},
		{[]string{"ftn", "client", "--config", "F", "--help"}, "-hold"},
		{[]string{"ftn", "run", "--config=F", "-help"}, "agent ftn run"},
		{[]string{"version", "-h"}, "agent version"},
	} {
		var out, errb bytes.Buffer
		code := run(c.args, &out, &errb)
		if code != exitOK || !strings.Contains(out.String(), c.want) || errb.Len() != 0 {
			t.Errorf("agent %s: exit %d, stdout %q, stderr %q; want exit 0, %q on stdout, nothing on stderr",
				strings.Join(c.args, " "), code, out.String(), errb.String(), c.want)
		}
	}
}

func TestWrongFlagExitsTwo(t *testing.T) {
	for _, args := range [][]string{
		{"run"}, {"ca", "init"}, {"ca", "issue"}, {"resource-server"},
		{"ftn", "server"}, {"ftn", "client"}, {"ftn", "run"}, {"version"},
	} {
		var out, errb bytes.Buffer
		code := run(append(args, "--no-such-flag"), &out, &errb)
		const want = "flag provided but not defined: -no-such-flag"
		if code != exitUsage || !strings.Contains(errb.String(), want) || out.Len() != 0 {
			t.Errorf("agent %s --no-such-flag: exit %d, stdout %q, stderr %q; want exit %d, %q on stderr, nothing on stdout",
				strings.Join(args, " "), code, out.String(), errb.String(), exitUsage, want)
		}
	}
}
