package tokenpassing

import (
	"tokenbed/analysis"

	"fmt"
	"strings"

	"tokenbed/agent/eventlog"
	"tokenbed/experiments"
)

// checkAgents fails a run in which an agent process did not run as the
// harness meant it to (issue 11): it exited with an error, or was killed
// by a signal the schedule did not send; it was started but its log is
// missing or empty; or a process of it never logged agent_started. A run
// that loses an agent silently would otherwise judge the others only.
func checkAgents(h *history, exp *experiments.Experiment) analysis.Requirement {
	insts := h.instances()
	if len(insts) == 0 {
		return analysis.Unjudged("no agents in the topology")
	}
	started := map[string]bool{} // by the harness's own record
	crashes := map[string]int{}
	var problems []string
	for _, e := range h.harness {
		switch e.Kind {
		case eventlog.AgentJoin, eventlog.AgentRestart:
			started[e.Peer] = true
		case eventlog.AgentCrash:
			crashes[e.Peer]++
		case eventlog.AgentExit:
			started[e.Peer] = true
			switch {
			case e.Detail == "exit status 0":
			case strings.HasPrefix(e.Detail, "killed by signal 9 ") && crashes[e.Peer] > 0:
				crashes[e.Peer]-- // the schedule's SIGKILL
			default:
				problems = append(problems, fmt.Sprintf("%s: the process ended with %q (see logs/%s.stderr)", e.Peer, e.Detail, e.Peer))
			}
		}
	}
	for _, inst := range insts {
		a := h.agents[inst]
		later := false
		if exp != nil {
			if ea, ok := exp.Agent(a.name); ok {
				later = ea.Later
			}
		}
		switch {
		case (started[inst] || !later) && a.noLog:
			problems = append(problems, inst+": started, but its event log is missing")
		case (started[inst] || !later) && a.lines == 0:
			problems = append(problems, inst+": started, but its event log is empty")
		case a.lines > 0 && a.started == 0:
			problems = append(problems, inst+": never logged agent_started")
		case a.headless > 0:
			problems = append(problems, fmt.Sprintf("%s: %d of its processes did not log agent_started first", inst, a.headless))
		}
	}
	r := analysis.VerdictOf(len(problems) == 0)
	r.Value = fmt.Sprintf("%d problems", len(problems))
	if r.Pass {
		r.Detail = fmt.Sprintf("%d agents: every agent started logged agent_started first in each process, and every process exited with status 0 or by the schedule's SIGKILL", len(insts))
	} else {
		r.Detail = strings.Join(problems, "; ")
	}
	return r
}
