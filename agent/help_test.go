package main

import (
	"testing"

	"tokenbed/internal/cli/clitest"
)

// Asking for help is not an error: every verb prints its usage to stdout
// and exits 0, so that a script can run `agent VERB -h` under set -e; a
// flag the verb does not know is still a usage error, on stderr, exit 2.
func TestHelpExitsZero(t *testing.T) {
	clitest.HelpExitsZero(t, "agent", run, []clitest.Help{
		{Args: []string{"-h"}, Want: "agent run"},
		{Args: []string{"--help"}, Want: "agent run"},
		{Args: []string{"run", "-h"}, Want: "agent run"},
		{Args: []string{"run", "--help"}, Want: "-config"},
		{Args: []string{"ca", "-h"}, Want: "agent ca init"},
		{Args: []string{"ca", "init", "-h"}, Want: "agent ca init"},
		{Args: []string{"ca", "issue", "-h"}, Want: "agent ca issue"},
		{Args: []string{"resource-server", "-h"}, Want: "agent resource-server"},
		{Args: []string{"ftn", "-h"}, Want: "agent ftn server"},
		{Args: []string{"ftn", "server", "-h"}, Want: "agent ftn server"},
		{Args: []string{"ftn", "client", "-h"}, Want: "agent ftn client"},
		{Args: []string{"ftn", "run", "-h"}, Want: "agent ftn run"},
		{Args: []string{"ftn", "server", "--config", "F", "-h"}, Want: "agent ftn server"},
		{Args: []string{"ftn", "client", "--config", "F", "--help"}, Want: "-hold"},
		{Args: []string{"ftn", "run", "--config=F", "-help"}, Want: "agent ftn run"},
		{Args: []string{"version", "-h"}, Want: "agent version"},
	})
}

func TestWrongFlagExitsTwo(t *testing.T) {
	clitest.WrongFlagExitsTwo(t, "agent", run, [][]string{
		{"run"}, {"ca", "init"}, {"ca", "issue"}, {"resource-server"},
		{"ftn", "server"}, {"ftn", "client"}, {"ftn", "run"}, {"version"},
	})
}
