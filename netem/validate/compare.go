// Package validate cross-validates the userspace netem engine
// (netem/userspace) against the kernel's sch_netem: the same profiles,
// probed the same way, once through real netem on a veth inside a User
// Mode Linux guest and once through the engine's TUN relay between two
// network namespaces of the host, and the two sets of measurements
// compared metric by metric (see Compare and Tolerances).
//
// Each profile is probed with UDP datagrams carrying a sequence number,
// the send time and a CRC over seeded random padding; sender and receiver
// are one process, so the one-way delay is measured on one CLOCK_MONOTONIC.
// Each side's fixed measurement overhead is calibrated with a "delay 2ms"
// profile (its median delay less 2 ms) and subtracted from that side's
// delays.
package validate

import (
	"fmt"
	"math"
	"strings"

	"tokenbed/internal/stats"
)

// Tolerances, stated in the report.
const (
	// DelayAbsMS and DelayRel: a delay percentile passes within
	// max(DelayAbsMS, DelayRel × the kernel's value).
	DelayAbsMS = 0.5
	DelayRel   = 0.02
	// KSShiftMS: the KS statistic is the minimum over shifts of the
	// userspace sample within ±KSShiftMS (grid KSStepMS).
	KSShiftMS = 0.5
	KSStepMS  = 0.01
)

// Metric is one compared quantity.
type Metric struct {
	Name       string
	Kernel     float64
	User       float64
	Diff       float64
	Tol        float64 // the allowed |Diff| (or D for KS)
	Method     string  // how Tol was obtained
	Pass       bool
	Applicable bool // false: not enough data (n/a), neither pass nor fail
	Unit       string
}

// Result is one profile's comparison.
type Result struct {
	Name     string
	Kernel   string
	User     string
	Metrics  []Metric
	Pass     bool
	Info     string
	Samples  [2]int // delay samples: kernel, userspace
	Excluded int    // nothing is excluded today; kept for the report
}

// Delays returns the one-way delay (ms) of each probe's first arrival,
// less overheadMS. With Probe.FromBurstStart the delay counts from the
// send of the probe's burst's first packet: behind a rate limiter the
// k-th packet of a burst leaves (k+1) packet times after the first
// arrived, whenever the others were sent, so this measure does not carry
// the sender's timing noise (large in a UML guest), where the delay from
// its own send would.
func Delays(t *Trace, overheadMS float64) []float64 {
	seen := make([]bool, len(t.SentNS))
	var d []float64
	for _, a := range t.Arrivals {
		if seen[a.Seq] {
			continue
		}
		seen[a.Seq] = true
		ref := t.SentNS[a.Seq]
		if t.Probe.FromBurstStart && t.Probe.Burst > 1 {
			ref = t.SentNS[int(a.Seq)-int(a.Seq)%t.Probe.Burst]
		}
		d = append(d, float64(a.RecvNS-ref)/1e6-overheadMS)
	}
	return d
}

// Indicators of a trace, per probe in send order (lost, duplicated) and
// per first arrival in arrival order (reordered: a lower sequence number
// than one already received, as RFC 4737 counts it).
func Indicators(t *Trace) (lost, dup, reordered []bool) {
	n := len(t.SentNS)
	copies := make([]int, n)
	maxSeq := -1
	for _, a := range t.Arrivals {
		copies[a.Seq]++
		if copies[a.Seq] > 1 {
			continue
		}
		reordered = append(reordered, int(a.Seq) < maxSeq)
		maxSeq = max(maxSeq, int(a.Seq))
	}
	lost = make([]bool, n)
	dup = make([]bool, n)
	for i, c := range copies {
		lost[i] = c == 0
		dup[i] = c > 1
	}
	return lost, dup, reordered
}

// Calibration is a side's fixed measurement overhead: the median delay of
// a "delay 2ms" trace less 2 ms.
func Calibration(t *Trace, nominalMS float64) float64 {
	return stats.Quantile(stats.Sorted(Delays(t, 0)), 0.5) - nominalMS
}

// Compare compares one profile's kernel and userspace traces, each with
// its side's calibrated overhead (ms) subtracted from its delays.
func Compare(name string, k, u *Trace, calK, calU float64) Result {
	r := Result{Name: name, Kernel: k.Profile, User: u.Profile, Pass: true}
	dk, du := stats.Sorted(Delays(k, calK)), stats.Sorted(Delays(u, calU))
	r.Samples = [2]int{len(dk), len(du)}
	for _, p := range []float64{0.5, 0.9, 0.99} {
		m := Metric{Name: fmt.Sprintf("delay p%g", p*100), Unit: "ms", Applicable: len(dk) > 0 && len(du) > 0}
		if m.Applicable {
			m.Kernel, m.User = stats.Quantile(dk, p), stats.Quantile(du, p)
			m.Diff = m.User - m.Kernel
			m.Tol = max(DelayAbsMS, DelayRel*math.Abs(m.Kernel))
			m.Method = fmt.Sprintf("max(%gms,%g%%)", DelayAbsMS, DelayRel*100)
			m.Pass = math.Abs(m.Diff) <= m.Tol
			kl, kh := stats.QuantileCI(dk, p, 0.99)
			ul, uh := stats.QuantileCI(du, p, 0.99)
			if (kh-kl)/2 > m.Tol || (uh-ul)/2 > m.Tol {
				// 2000 samples cannot pin this percentile to the fixed
				// tolerance: the 99% order-statistic CIs must overlap.
				m.Method = fmt.Sprintf("CI99 k[%.3f,%.3f] u[%.3f,%.3f]", kl, kh, ul, uh)
				m.Pass = m.Pass || (kl <= uh && ul <= kh)
			}
		}
		r.add(m)
	}
	ks := Metric{Name: "KS D", Applicable: len(dk) > 1 && len(du) > 1}
	if ks.Applicable {
		d, shift := stats.KSMinShift(dk, du, KSShiftMS, KSStepMS)
		ks.Kernel, ks.User = math.NaN(), math.NaN()
		ks.Diff = stats.KSBand(dk, du, KSShiftMS)
		ks.Tol = stats.KSCritical(len(dk), len(du), 0.01)
		ks.Method = fmt.Sprintf("±%gms band; global shift: D=%.3f at %+.2fms", KSShiftMS, d, shift)
		ks.Pass = ks.Diff <= ks.Tol
	}
	r.add(ks)

	lk, dupk, rk := Indicators(k)
	lu, dupu, ru := Indicators(u)
	r.add(rateMetric("loss rate", RateOf(lk), RateOf(lu)))
	bk, bu := Bursts(lk), Bursts(lu)
	bm := Metric{Name: "mean loss burst", Unit: "pkts", Applicable: len(bk) >= 5 && len(bu) >= 5}
	if bm.Applicable {
		mk, sk := meanSD(bk)
		mu, su := meanSD(bu)
		bm.Kernel, bm.User, bm.Diff = mk, mu, mu-mk
		bm.Tol = Z99 * math.Sqrt(sk*sk/float64(len(bk))+su*su/float64(len(bu)))
		bm.Method = fmt.Sprintf("99%% CI (%d vs %d bursts)", len(bk), len(bu))
		bm.Pass = math.Abs(bm.Diff) <= bm.Tol
	}
	r.add(bm)
	r.add(rateMetric("duplicate rate", RateOf(dupk), RateOf(dupu)))
	r.add(rateMetric("reorder rate", RateOf(rk), RateOf(ru)))
	r.Info = fmt.Sprintf("send spacing p1/p50/p99 (ms): kernel side %s, userspace side %s; ", spacing(k), spacing(u)) + fmt.Sprintf("kernel: %d sent, %d arrivals, %d damaged, %d csum/hdr errors, %s timestamps; userspace: %d sent, %d arrivals, %d damaged, %d csum/hdr errors, %s timestamps; %s",
		len(k.SentNS), len(k.Arrivals), k.Damaged, k.CsumErrors, k.Clock, len(u.SentNS), len(u.Arrivals), u.Damaged, u.CsumErrors, u.Clock, u.Notes)
	return r
}

func rateMetric(name string, k, u Rate) Metric {
	m := Metric{Name: name, Unit: "%", Applicable: k.Trials > 0 && u.Trials > 0}
	if !m.Applicable {
		return m
	}
	m.Kernel, m.User, m.Diff = 100*k.P, 100*u.P, 100*(u.P-k.P)
	m.Tol = 100 * DiffCI(k, u)
	m.Method = "99% CI of difference"
	// Both zero: equal, nothing to estimate.
	m.Pass = math.Abs(m.Diff) <= m.Tol
	return m
}

func (r *Result) add(m Metric) {
	r.Metrics = append(r.Metrics, m)
	if m.Applicable && !m.Pass {
		r.Pass = false
	}
}

// Failed lists the metrics that failed.
func (r Result) Failed() []string {
	var f []string
	for _, m := range r.Metrics {
		if m.Applicable && !m.Pass {
			f = append(f, m.Name)
		}
	}
	return f
}

func num(v float64) string {
	if math.IsNaN(v) {
		return "–"
	}
	return fmt.Sprintf("%.3f", v)
}

// Markdown renders the results as tables: a summary, then every metric.
func Markdown(results []Result) string {
	var b strings.Builder
	b.WriteString("| profile | verdict | failing metrics |\n|---|---|---|\n")
	for _, r := range results {
		v := "PASS"
		if !r.Pass {
			v = "**FAIL**"
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", r.Name, v, strings.Join(r.Failed(), ", "))
	}
	b.WriteString("\n| profile | metric | kernel | userspace | diff (u−k) | tolerance | method | result |\n|---|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		for _, m := range r.Metrics {
			res := "n/a"
			if m.Applicable {
				res = "PASS"
				if !m.Pass {
					res = "**FAIL**"
				}
			}
			unit := m.Unit
			if unit != "" {
				unit = " " + unit
			}
			tol := "–"
			if m.Applicable {
				tol = "±" + num(m.Tol) + unit
				if m.Name == "KS D" {
					tol = "≤ " + num(m.Tol)
				}
			}
			diff := num(m.Diff)
			if !m.Applicable {
				diff = "–"
			} else if m.Name != "KS D" {
				diff = fmt.Sprintf("%+.3f%s", m.Diff, unit)
			}
			kv, uv := num(m.Kernel), num(m.User)
			if !m.Applicable {
				kv, uv = "–", "–"
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", r.Name, m.Name, kv, uv, diff, tol, m.Method, res)
		}
	}
	return b.String()
}

// TolerancesText states the tolerances, for the report.
var TolerancesText = fmt.Sprintf(`Tolerances:
- delay p50/p90/p99 (after subtracting each side's calibration): |u−k| ≤ max(%g ms, %g%% of the kernel's value). Where the 99%% order-statistic confidence interval of either side's percentile (the order statistics whose ranks bound it with probability 0.99 under Binomial(n, p)) is wider than that tolerance (wide jitter: 2000 samples cannot pin the percentile), the metric also passes when the two 99%% CIs overlap; the method column then shows "CI99" and both intervals.
- KS D: two-sample Kolmogorov–Smirnov statistic against the α=0.01 critical value 1.628·sqrt((n+m)/(n·m)), with a ±%g ms allowance. The verdict uses the band form: D = the least ε with F_k(x−0.5ms)−ε ≤ F_u(x) ≤ F_k(x+0.5ms)+ε for all x (the probability mass that must move by more than 0.5 ms). The method column also shows the plain global-shift form (D minimised over shifts of the userspace sample within ±0.5 ms, grid %g ms), which is never smaller: it fails every zero-jitter profile (delay 10ms, reorder) because there it compares the two sides' measurement noises (a few tens of µs wide, of different shapes: UML guest vs host) rather than netem's delay.
- loss, duplicate and reorder rates: |u−k| within the 99%% CI of the difference of two proportions, 2.576·sqrt(se_k²+se_u²), each se the larger of the binomial one and a 20-batch batch-means one (bursty and correlated processes vary more than binomially). Loss counts every probe that never arrived intact (corrupted datagrams fail the UDP checksum and are dropped by the receiver's kernel: corrupt shows as loss). Reorder: a first arrival with a lower sequence number than one already received (RFC 4737).
- mean loss burst length (runs of consecutive lost probes): |u−k| within the 99%% CI of the difference of means (needs ≥5 bursts per side, else n/a).
- rate 1mbit: bursts of 7 probes, each delay counted from the send of its burst's first probe (behind the rate limiter the k-th probe leaves (k+1) packet times after the first arrived, whenever it was sent itself).
- Send times: the guest sends on a 2 ms schedule (its sleeps end late, irregularly); the host side replays the guest's actual send times of the same profile (spinning to hit them within µs), so both sides see the same spacing: the spacing alone changes reorder rates under jitter and queueing behind a rate limiter.
- No arrival is excluded (no stall window).
`, DelayAbsMS, DelayRel*100, KSShiftMS, KSStepMS)

// spacing summarises the intervals between successive sends of a trace.
func spacing(t *Trace) string {
	if len(t.SentNS) < 3 {
		return "–"
	}
	var d []float64
	for i := 1; i < len(t.SentNS); i++ {
		if t.Probe.Burst > 1 && (i%t.Probe.Burst != 0 || i < t.Probe.Burst) {
			continue // within a burst: first send to first send
		}
		d = append(d, float64(t.SentNS[i]-t.SentNS[i-max(t.Probe.Burst, 1)])/1e6)
	}
	d = stats.Sorted(d)
	return fmt.Sprintf("%.3f/%.3f/%.3f", stats.Quantile(d, 0.01), stats.Quantile(d, 0.5), stats.Quantile(d, 0.99))
}
