package analysis

import (
	"strings"
	"testing"

	"tokenbed/internal/results"
)

// The report's head says what the host's CPUs and the userspace engine
// did beside the verdicts, and says nothing of them where run.json has
// no such record (a simulation, an older run).
func TestReportHostLines(t *testing.T) {
	s := &Summary{RunID: "tbhost01", Experiment: "endurance-smoke", Backend: "netns", Impairment: "userspace", Replicas: 16, Status: "ok",
		HostCPU: &results.HostCPU{WallS: 48.2, BusyS: 27.9, StealS: 8.18, StealFraction: 0.2267, WorstStealS: 0.93, LatencyBoundUS: new(int64)},
		Engine:  &results.EngineFidelity{Realtime: true, Delivered: 36717, LateOver1ms: 1744}}
	got := RenderReport(s, Frame{Title: "Endurance"}, "")
	for _, want := range []string{
		"Host CPUs while the agents ran: 28 s busy over 48 s; 8.18 s stolen by the hypervisor (22.7% of the CPU time wanted), at most 0.93 s in one second. Idle CPUs held to a wake-up latency of 0 µs (PM QoS).",
		"Userspace engine: 1744 of 36717 datagrams released over 1 ms after their time (4.75%); relay real-time true.",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}
	s.HostCPU.LatencyBoundUS, s.HostCPU.LatencyError = nil, "pmqos: open /dev/cpu_dma_latency: permission denied"
	if got := RenderReport(s, Frame{Title: "Endurance"}, ""); !strings.Contains(got, "The CPUs' idle states were left alone: pmqos: open /dev/cpu_dma_latency: permission denied.") {
		t.Errorf("report does not say the bound was not held:\n%s", got)
	}
	s.HostCPU, s.Engine = nil, nil
	if got := RenderReport(s, Frame{Title: "Endurance"}, ""); strings.Contains(got, "Host CPUs") || strings.Contains(got, "Userspace engine") {
		t.Errorf("report without host records mentions them:\n%s", got)
	}
}
