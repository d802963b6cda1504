// Package clitest checks a tokenbed command's flag handling the way its
// users' scripts depend on it: asking for help is not an error, a wrong
// flag is (see package cli).
package clitest

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"tokenbed/internal/cli"
)

// Run is a command's entry point: its arguments (without the program
// name), its standard output and error, and its exit status.
type Run func(args []string, stdout, stderr io.Writer) int

// Help is one way of asking for help and a phrase the usage must print.
type Help struct {
	Args []string
	Want string
}

// HelpExitsZero wants each case to print usage containing Want on stdout,
// nothing on stderr, and exit cli.ExitOK, so that `NAME VERB -h` works
// under `set -e`.
func HelpExitsZero(t *testing.T, name string, run Run, cases []Help) {
	t.Helper()
	for _, c := range cases {
		var out, errb bytes.Buffer
		code := run(c.Args, &out, &errb)
		if code != cli.ExitOK || !strings.Contains(out.String(), c.Want) || errb.Len() != 0 {
			t.Errorf("%s %s: exit %d, stdout %q, stderr %q; want exit 0, %q on stdout, nothing on stderr",
				name, strings.Join(c.Args, " "), code, out.String(), errb.String(), c.Want)
		}
	}
}

// WrongFlagExitsTwo wants each verb, given a flag it does not define, to
// say so on stderr, print nothing on stdout, and exit cli.ExitUsage.
func WrongFlagExitsTwo(t *testing.T, name string, run Run, verbs [][]string) {
	t.Helper()
	for _, v := range verbs {
		var out, errb bytes.Buffer
		args := append(append([]string(nil), v...), "--no-such-flag")
		code := run(args, &out, &errb)
		const want = "flag provided but not defined: -no-such-flag"
		if code != cli.ExitUsage || !strings.Contains(errb.String(), want) || out.Len() != 0 {
			t.Errorf("%s %s: exit %d, stdout %q, stderr %q; want exit %d, %q on stderr, nothing on stdout",
				name, strings.Join(args, " "), code, out.String(), errb.String(), cli.ExitUsage, want)
		}
	}
}
