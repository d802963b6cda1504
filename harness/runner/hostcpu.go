package runner

import (
	"fmt"

	"tokenbed/agent/eventlog"
	"tokenbed/internal/cpustat"
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
	r.o.Log.Info("host cpu", "summary", detail)
	r.event(eventlog.Event{Kind: eventlog.HarnessNotice, Reason: "host_cpu", Detail: detail})
}
