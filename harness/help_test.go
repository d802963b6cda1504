package main

import (
	"testing"

	"tokenbed/internal/cli/clitest"
)

// Asking for help is not an error: every verb prints its usage to stdout
// and exits 0, so that a script can run `harness VERB -h` under set -e; a
// flag the verb does not know is still a usage error, on stderr, exit 2.
func TestHelpExitsZero(t *testing.T) {
	clitest.HelpExitsZero(t, "harness", run, []clitest.Help{
		{Args: []string{"-h"}, Want: "harness run"},
		{Args: []string{"--help"}, Want: "harness run"},
		{Args: []string{"run", "-h"}, Want: "harness run"},
		{Args: []string{"run", "--help"}, Want: "-backend"},
		{Args: []string{"analyze", "-h"}, Want: "harness analyze"},
		{Args: []string{"compare", "-h"}, Want: "harness compare"},
		{Args: []string{"pcap", "-h"}, Want: "harness pcap"},
		{Args: []string{"pcap", "capture.pcapng", "-h"}, Want: "harness pcap"},
		{Args: []string{"preflight", "-h"}, Want: "harness preflight"},
		{Args: []string{"clean", "-h"}, Want: "harness clean"},
		{Args: []string{"swarm", "-h"}, Want: "harness swarm"},
		{Args: []string{"campaign", "-h"}, Want: "harness campaign run"},
		{Args: []string{"campaign", "run", "-h"}, Want: "harness campaign run"},
		{Args: []string{"index", "-h"}, Want: "harness index"},
	})
}

func TestWrongFlagExitsTwo(t *testing.T) {
	clitest.WrongFlagExitsTwo(t, "harness", run, [][]string{
		{"run"}, {"analyze"}, {"compare"}, {"pcap"}, {"preflight"}, {"clean"}, {"swarm"}, {"campaign", "run"}, {"index"},
	})
}
