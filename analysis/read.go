package analysis

import (
	"os"
	"path/filepath"
	"strings"

	"tokenbed/agent/eventlog"
	"tokenbed/experiments"
	"tokenbed/internal/results"
)

// readHarnessLog reads the harness's own log (none: no events). A log
// damaged at a line (cut mid-line, or a line that is not an event) is read
// up to it: its events and the *eventlog.ParseError naming the file and
// line come back together. Any other error reads nothing.
func readHarnessLog(dir string) ([]eventlog.Event, *eventlog.ParseError, error) {
	evs, err := eventlog.ReadFile(filepath.Join(dir, results.LogsDir, results.HarnessLog))
	if pe, ok := err.(*eventlog.ParseError); ok {
		pe.File = filepath.Join(results.LogsDir, results.HarnessLog)
		return evs, pe, nil
	}
	if err != nil && !os.IsNotExist(err) {
		return nil, nil, err
	}
	return evs, nil, nil
}

// eachLogEvent calls f with every event of every process's log in dir, a
// log at a time, in its order; a missing log is skipped (a protocol's
// analysis notes it), a log cut mid-line is read to its last whole line.
func eachLogEvent(dir string, topo results.Topology, f func(eventlog.Event) error) error {
	for _, a := range topo.Agents {
		path := filepath.Join(dir, a.Log)
		fd, err := os.Open(path)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return err
		}
		err = eventlog.Read(fd, path, f)
		fd.Close()
		if pe, ok := err.(*eventlog.ParseError); ok && strings.Contains(pe.Err.Error(), "truncated line") {
			err = nil
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// LiteralHistory is the context of a literal history: one JSON-lines
// file holding every process's events and the harness's ("agent":
// "harness"), each writer's in its own order; processes are named by
// their events (replica 0). Checkers are tested on such files without a
// run (analysis/testdata/histories). No protocol analysis is loaded
// (SetPart).
func LiteralHistory(path string, info results.RunInfo, exp *experiments.Experiment) (*Context, error) {
	evs, err := eventlog.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var topo results.Topology
	var harness []eventlog.Event
	seen := map[string]bool{}
	for _, e := range evs {
		switch {
		case e.Agent == "harness":
			harness = append(harness, e)
		case !seen[e.Agent]:
			seen[e.Agent] = true
			topo.Agents = append(topo.Agents, results.AgentInfo{Name: e.Agent, Instance: e.Agent})
		}
	}
	return NewContext(info, topo, exp, harness, func(f func(eventlog.Event) error) error {
		for _, e := range evs {
			if e.Agent == "harness" {
				continue
			}
			if err := f(e); err != nil {
				return err
			}
		}
		return nil
	}), nil
}
