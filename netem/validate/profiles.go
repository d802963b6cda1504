package validate

import "time"

// CalibrationProfile measures each side's fixed overhead.
const CalibrationProfile = "delay 2ms"

// CalibrationMS is its nominal delay.
const CalibrationMS = 2.0

// Profiles are the profiles `make validate-netem` compares, each probed
// with count probes (DefaultProbe otherwise).
func Profiles(count int) []Spec {
	pr := DefaultProbe
	pr.Count = count
	// Rate: bursts of 7 100-byte datagrams (128 bytes at layer 3, 142
	// on the wire), 250 µs apart, every 20 ms at 1 mbit/s. The k-th
	// packet (from 0) of a burst leaves (k+1)×1.136 ms after the first
	// arrived; its delay is counted from the burst's first send
	// (FromBurstStart), so a 14-byte error in the packet length shifts
	// the upper percentiles by 0.8 ms. The delays take 7 discrete values,
	// each 1/7 of the probes: p50, p90 and p99 fall inside a class, not on
	// a boundary between two (with bursts of 10, p50 and p90 sat exactly
	// on boundaries and a few late packets moved them by a whole class).
	rate := Probe{Count: count, Interval: 20 * time.Millisecond, Burst: 7, Size: 100, Spacing: 250 * time.Microsecond, FromBurstStart: true}
	var out []Spec
	for _, s := range []struct {
		p  string
		pr Probe
	}{
		{"delay 10ms", pr},
		{"delay 10ms 2ms", pr},
		{"delay 10ms 2ms 25%", pr},
		{"delay 20ms 5ms distribution normal", pr},
		{"delay 20ms 5ms distribution pareto", pr},
		{"delay 20ms 5ms distribution paretonormal", pr},
		{"loss 5%", pr},
		{"loss 5% 25%", pr},
		{"loss state 2% 30% 10% 5% 1%", pr},
		{"loss gemodel 2% 20% 80% 1%", pr},
		{"duplicate 10%", pr},
		// sch_netem re-enqueues the duplicate through netem_enqueue: it
		// meets the loss model again, so 2 copies arrive with probability
		// 0.5·0.8·0.8 = 32% (40% if the clone skipped the loss model).
		{"duplicate 50% loss 20%", pr},
		{"delay 10ms reorder 25% 50%", pr},
		{"corrupt 5%", pr},
		{"rate 1mbit", rate},
	} {
		out = append(out, Spec{Name: s.p, Kernel: s.p, User: s.p, Probe: s.pr})
	}
	return out
}

// Calibration spec with count probes.
func CalibrationSpec(count int) Spec {
	pr := DefaultProbe
	pr.Count = count
	return Spec{Name: "calibration " + CalibrationProfile, Kernel: CalibrationProfile, User: CalibrationProfile, Probe: pr}
}
