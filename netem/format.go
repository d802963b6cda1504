package netem

import (
	"strconv"
	"strings"
	"time"
)

// String returns p in canonical tc syntax (the words after "netem"), which
// Parse reads back to an equal Profile: times in the largest exact unit,
// percentages in Go's shortest exact form, rates in bits with the largest
// exact decimal unit, loss model parameters always all written out, and
// reorder always with its gap. A custom distribution is written by name
// only (its table is not text); an invalid Profile is printed as far as it
// can be. The empty Profile prints as "".
//
// tc 6.1 reads this text with two differences: it truncates delay and
// jitter to whole microseconds and does not know the "ns" unit for them
// (tc ≥ 6.9 does), and it needs custom tables as files in its library
// directory.
func (p Profile) String() string {
	var b strings.Builder
	add := func(ws ...string) {
		for _, w := range ws {
			if b.Len() > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(w)
		}
	}
	if p.Limit != 0 {
		add("limit", strconv.FormatUint(uint64(p.Limit), 10))
	}
	if p.Delay != 0 || p.Jitter != 0 {
		add("delay", formatTime(p.Delay))
		if p.Jitter != 0 || p.DelayCorrelation != 0 {
			add(formatTime(p.Jitter))
			if p.DelayCorrelation != 0 {
				add(formatPercent(p.DelayCorrelation))
			}
		}
	}
	if p.Distribution.Name != "" {
		add("distribution", p.Distribution.Name)
	}
	l := p.Loss
	switch l.Model {
	case LossRandom:
		if l.Percent != 0 || l.Correlation != 0 {
			add("loss", "random", formatPercent(l.Percent))
			if l.Correlation != 0 {
				add(formatPercent(l.Correlation))
			}
		}
	case LossState:
		add("loss", "state", formatPercent(l.P13), formatPercent(l.P31), formatPercent(l.P32),
			formatPercent(l.P23), formatPercent(l.P14))
	case LossGE:
		add("loss", "gemodel", formatPercent(l.P), formatPercent(l.R), formatPercent(l.OneMinusH),
			formatPercent(l.OneMinusK))
	}
	if p.ECN {
		add("ecn")
	}
	probCorr := func(kw string, prob, corr Percent) {
		if prob != 0 || corr != 0 {
			add(kw, formatPercent(prob))
			if corr != 0 {
				add(formatPercent(corr))
			}
		}
	}
	probCorr("duplicate", p.Duplicate, p.DuplicateCorrelation)
	probCorr("reorder", p.Reorder, p.ReorderCorrelation)
	if p.Gap != 0 {
		add("gap", strconv.FormatUint(uint64(p.Gap), 10))
	}
	probCorr("corrupt", p.Corrupt, p.CorruptCorrelation)
	r := p.Rate
	if r.BytesPerSecond != 0 || r.PacketOverhead != 0 || r.CellSize != 0 || r.CellOverhead != 0 {
		add("rate", formatRate(r.BytesPerSecond))
		switch {
		case r.CellOverhead != 0:
			add(itoa(r.PacketOverhead), strconv.FormatUint(uint64(r.CellSize), 10), itoa(r.CellOverhead))
		case r.CellSize != 0:
			add(itoa(r.PacketOverhead), strconv.FormatUint(uint64(r.CellSize), 10))
		case r.PacketOverhead != 0:
			add(itoa(r.PacketOverhead))
		}
	}
	s := p.Slot
	if s.Active() || s.Packets != 0 || s.Bytes != 0 || !s.Distribution.IsZero() {
		if s.Distribution.IsZero() {
			add("slot", formatTime(s.Min), formatTime(s.Max))
		} else {
			add("slot", "distribution", s.Distribution.Name, formatTime(s.Delay), formatTime(s.Jitter))
		}
		if s.Packets != 0 {
			add("packets", itoa(s.Packets))
		}
		if s.Bytes != 0 {
			add("bytes", itoa(s.Bytes))
		}
	}
	return b.String()
}

func itoa(v int32) string { return strconv.FormatInt(int64(v), 10) }

// formatTime writes d exactly in the largest of s, ms, us, ns that gives at
// most three decimals (so 1.5ms, not 1500us; 40ms, not 0.04s).
func formatTime(d time.Duration) string {
	units := []struct {
		name string
		v    time.Duration
	}{{"s", time.Second}, {"ms", time.Millisecond}, {"us", time.Microsecond}}
	neg := ""
	if d < 0 {
		neg, d = "-", -d
	}
	for _, u := range units {
		if d >= u.v && d%(u.v/1000) == 0 {
			return neg + decimal(int64(d/(u.v/1000)), 3) + u.name
		}
	}
	if d == 0 {
		return "0ms"
	}
	return neg + strconv.FormatInt(int64(d), 10) + "ns"
}

// decimal writes v / 10^places without trailing zeros.
func decimal(v int64, places int) string {
	s := strconv.FormatInt(v, 10)
	for len(s) <= places {
		s = "0" + s
	}
	intPart, frac := s[:len(s)-places], strings.TrimRight(s[len(s)-places:], "0")
	if frac == "" {
		return intPart
	}
	return intPart + "." + frac
}

func formatPercent(v Percent) string {
	return strconv.FormatFloat(float64(v), 'g', -1, 64) + "%"
}

// formatRate writes bytes/s as bits/s in the largest decimal unit that
// divides it (tc's "rate" input form).
func formatRate(bytesPerSec uint64) string {
	bits := bytesPerSec * 8
	if bytesPerSec > (1<<64-1)/8 {
		return strconv.FormatUint(bytesPerSec, 10) + "bps" // bytes, no overflow
	}
	for _, u := range []struct {
		name string
		v    uint64
	}{{"tbit", 1e12}, {"gbit", 1e9}, {"mbit", 1e6}, {"kbit", 1e3}} {
		if bits >= u.v && bits%u.v == 0 {
			return strconv.FormatUint(bits/u.v, 10) + u.name
		}
	}
	return strconv.FormatUint(bits, 10) + "bit"
}
