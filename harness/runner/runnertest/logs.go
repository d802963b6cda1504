package runnertest

import (
	"path/filepath"
	"testing"

	"tokenbed/agent/eventlog"
)

// ReadLog reads the event log of instance name in the run in dir.
func ReadLog(t *testing.T, dir, name string) []eventlog.Event {
	t.Helper()
	evs, err := eventlog.ReadFile(filepath.Join(dir, "logs", name+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return evs
}
