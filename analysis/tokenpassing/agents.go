package tokenpassing

import (
	"tokenbed/analysis"

	"fmt"
	"strings"

	"tokenbed/agent/eventlog"
	"tokenbed/experiments"
)

// checkAgents fails a run in which an agent process did not run as the
// harness meant it to: it exited with an error, or was killed by a signal
// the schedule did not send; it was started but its log is missing or
// empty; a process of it never logged agent_started; or a log is damaged
// (damagedLogs). A run that loses an agent, or half of a log, silently
// would otherwise judge the rest only.
func checkAgents(h *history, exp *experiments.Experiment, status string) analysis.Requirement {
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
	damaged, excused := damagedLogs(h, status)
	problems = append(problems, damaged...)
	r := analysis.VerdictOf(len(problems) == 0)
	r.Value = fmt.Sprintf("%d problems", len(problems))
	if r.Pass {
		r.Detail = fmt.Sprintf("%d agents: every agent started logged agent_started first in each process, every process exited with status 0 or by the schedule's SIGKILL, "+
			"and every log is whole: each process's log ends with agent_stopping unless the schedule killed it", len(insts))
	} else {
		r.Detail = strings.Join(problems, "; ")
	}
	if len(excused) > 0 {
		r.Detail += "; " + strings.Join(excused, "; ")
	}
	return r
}

// damagedLogs lists the logs that lost their end: a log damaged at a line
// (cut mid-line, or a line that is not an event), and a process whose log
// ends without agent_stopping, the last event of every process that ends
// by itself, unless a crash or leave of the schedule ended it. A log cut
// mid-line at the end of a process the schedule killed is its kill, not
// damage. The harness's log damaged loses the record of what the schedule
// did after it. excused says what was not held against the run.
func damagedLogs(h *history, status string) (problems, excused []string) {
	if d := h.harnessDamage; d != nil {
		problems = append(problems, fmt.Sprintf("%s: the harness's log is damaged; the starts, exits, crashes and outages after line %d are unknown", d, d.line-1))
	}
	crashes := h.crashes()
	unstopped := 0
	for _, inst := range h.instances() {
		a := h.agents[inst]
		killed := a.killedAt(crashes[inst])
		if d := a.damage; d != nil {
			if d.truncated && len(a.procs) > 0 && killed[len(a.procs)-1] > 0 {
				excused = append(excused, fmt.Sprintf("%s: %s: the schedule killed the process mid-line", inst, d))
			} else {
				problems = append(problems, fmt.Sprintf("%s: %s: the log is damaged there, the rest of it is lost", inst, d))
			}
		}
		for i, pr := range a.procs {
			switch {
			case pr.stopped || killed[i] > 0:
			case status != "ok" && i == len(a.procs)-1:
				unstopped++ // killed with the run
			case h.harnessDamage != nil:
				excused = append(excused, fmt.Sprintf("%s: %s line %d ends a process without agent_stopping: not judged, the schedule's record is damaged", inst, a.logName(), pr.lastLine))
			case a.damage == nil:
				problems = append(problems, fmt.Sprintf("%s: %s line %d ends a process without agent_stopping, and the schedule did not kill it: the end of its log is lost", inst, a.logName(), pr.lastLine))
			}
		}
	}
	if unstopped > 0 {
		excused = append(excused, fmt.Sprintf("%d processes without agent_stopping at the end of a run that did not finish (status %q) not judged", unstopped, status))
	}
	return problems, excused
}

// killedAt is, for each of the agent's processes, the crash or leave of
// the schedule (crashes: its times, in order) that ended it, or 0: a
// process that did not log agent_stopping is matched with the first
// crash after its start and before the next process starts.
func (a *agentInfo) killedAt(crashes []int64) []int64 {
	used := 0
	killed := make([]int64, len(a.procs))
	for i, pr := range a.procs {
		for used < len(crashes) && crashes[used] < pr.from {
			used++
		}
		if !pr.stopped && used < len(crashes) && (i == len(a.procs)-1 || crashes[used] <= a.procs[i+1].from) {
			killed[i] = crashes[used]
			used++
		}
	}
	return killed
}

// logName is the agent's log as the results name it.
func (a *agentInfo) logName() string {
	if a.log != "" {
		return a.log
	}
	return a.instance + "'s log"
}
