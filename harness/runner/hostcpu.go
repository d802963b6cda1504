package runner

import (
	"fmt"

	"tokenbed/agent/eventlog"
	"tokenbed/internal/cpustat"
	"tokenbed/internal/pmqos"
	"tokenbed/internal/results"
)

// hostCPU is a watch's report as run.json records it.
func hostCPU(rep cpustat.Report) *results.HostCPU {
	h := &results.HostCPU{WallS: rep.Wall.Seconds(), BusyS: rep.Busy.Seconds(), StealS: rep.Steal.Seconds(),
		StealFraction: rep.StealFraction(), WorstStealS: rep.WorstSteal.Seconds()}
	if !rep.WorstAt.IsZero() {
		h.WorstStealAt = rep.WorstAt.UTC()
	}
	if rep.Err != nil {
		h.Error = rep.Err.Error()
	}
	return h
}

// holdCPULatency holds o.CPULatency, if asked; a host that cannot (no
// device, not root) runs anyway, and says why in run.json and the log.
func holdCPULatency(o Options) (*pmqos.Request, string) {
	if o.CPULatency == nil {
		return nil, ""
	}
	req, err := pmqos.Hold(*o.CPULatency)
	if err != nil {
		o.Log.Warn("the CPUs' idle states are left as they are: datagrams may wait for a halted CPU to wake", "err", err)
		return nil, err.Error()
	}
	return req, ""
}

// noteCPU writes the host's CPU time to the harness log, where a failed
// latency check is triaged beside the userspace engine's summary.
func (r *run) noteCPU() {
	h := r.info.HostCPU
	if h == nil {
		return
	}
	detail := fmt.Sprintf("busy %.1f s, stolen by the hypervisor %.2f s (%.1f%% of the CPU time wanted), worst second %.2f s stolen, over %.1f s",
		h.BusyS, h.StealS, 100*h.StealFraction, h.WorstStealS, h.WallS)
	if h.Error != "" {
		detail += "; reading stopped: " + h.Error
	}
	if h.LatencyBoundUS != nil {
		detail += fmt.Sprintf("; PM QoS CPU latency held at %d µs", *h.LatencyBoundUS)
	}
	if h.LatencyError != "" {
		detail += "; PM QoS CPU latency not held: " + h.LatencyError
	}
	r.o.Log.Info("host cpu", "summary", detail)
	r.event(eventlog.Event{Kind: eventlog.HarnessNotice, Reason: "host_cpu", Detail: detail})
}
