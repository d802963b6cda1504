package main

import (
	"slices"
	"testing"

	"tokenbed/analysis"
	"tokenbed/harness/protocol"
	"tokenbed/protocols"
)

// TestPluginsLinkBothHalves: every protocol this binary declares has its
// run half and its analysis half linked in (plugins/NAME holds the pair),
// so that no protocol runs without being judged or is judged without
// running.
func TestPluginsLinkBothHalves(t *testing.T) {
	declared := protocols.Names()
	if len(declared) == 0 {
		t.Fatal("the harness links in no protocol")
	}
	if run := protocol.Names(); !slices.Equal(run, declared) {
		t.Errorf("run halves %v, declared protocols %v", run, declared)
	}
	if judged := analysis.Protocols(); !slices.Equal(judged, declared) {
		t.Errorf("analysis halves %v, declared protocols %v", judged, declared)
	}
	if !slices.Contains(declared, protocols.Default) {
		t.Errorf("declared protocols %v lack the default, %s", declared, protocols.Default)
	}
}
