package netem

import (
	"fmt"
	"math"
	"reflect"
	"time"

	"tokenbed/netem/dist"
)

// DefaultLimit is the queue limit, in packets, that tc uses when "limit" is
// not given and that a Profile with Limit 0 gets.
const DefaultLimit = 1000

// MaxJitter is the largest jitter (and slot distribution jitter) the kernel
// keeps: sch_netem silently caps larger values to INT_MAX nanoseconds, so
// Validate rejects them instead.
const MaxJitter = time.Duration(math.MaxInt32)

// Percent is a probability in percent, 0 to 100 inclusive, as tc writes it.
// The kernel stores it as round(p/100 * (2^32-1)).
type Percent float64

// Profile is everything one netem qdisc can do, in tc's terms. The zero
// Profile is valid and impairs nothing (tc's "netem" with no options). Every
// field maps to one tc keyword; see the package documentation for what each
// one does inside netem.
type Profile struct {
	// Limit is the queue length in packets ("limit"). 0 means DefaultLimit.
	Limit uint32

	// Delay is the mean added latency ("delay TIME"); Jitter the random
	// variation around it ("delay TIME JITTER"); DelayCorrelation the
	// correlation of successive random values ("delay TIME JITTER CORR").
	Delay            time.Duration
	Jitter           time.Duration
	DelayCorrelation Percent
	// Distribution shapes the jitter ("distribution NAME"). The zero value
	// is netem's table-less uniform distribution over [Delay-Jitter,
	// Delay+Jitter).
	Distribution Distribution

	// Loss is the loss model ("loss ...").
	Loss Loss
	// ECN marks ECN-capable packets Congestion Experienced instead of
	// dropping them ("ecn"); it needs a loss model.
	ECN bool

	// Duplicate is the probability that a packet is sent twice
	// ("duplicate PERCENT [CORR]").
	Duplicate            Percent
	DuplicateCorrelation Percent

	// Reorder is the probability that a packet eligible for reordering is
	// sent at once instead of being delayed ("reorder PERCENT [CORR]");
	// Gap makes only every Gap-th packet eligible ("gap N"). tc sets Gap to
	// 1 when reorder is given without gap; Parse does the same.
	Reorder            Percent
	ReorderCorrelation Percent
	Gap                uint32

	// Corrupt is the probability of flipping one random bit of a packet
	// ("corrupt PERCENT [CORR]").
	Corrupt            Percent
	CorruptCorrelation Percent

	// Rate limits the sending rate ("rate ...").
	Rate Rate

	// Slot delivers packets in bursts ("slot ...").
	Slot Slot
}

// Distribution names a delay distribution table. Built-in names
// (dist.Normal, dist.Pareto, dist.ParetoNormal, dist.Experimental) need no
// Table; any other name is a custom table whose values must be in Table
// (load them with dist.Load). The zero Distribution is uniform.
type Distribution struct {
	Name  string  // as in tc's "distribution NAME"; "" is uniform
	Table []int16 // required for custom names, must be nil for built-ins
}

// IsZero reports whether d is the uniform (table-less) distribution.
func (d Distribution) IsZero() bool { return d.Name == "" && d.Table == nil }

// Values returns the table netem will use: the built-in one for built-in
// names, Table otherwise, nil for uniform.
func (d Distribution) Values() ([]int16, error) {
	if d.IsZero() {
		return nil, nil
	}
	if t, ok := dist.Builtin(d.Name); ok {
		return t, nil
	}
	if len(d.Table) == 0 {
		return nil, fmt.Errorf("custom distribution %q has no table (load it with dist.Load)", d.Name)
	}
	return d.Table, nil
}

// LossModel selects one of netem's loss generators.
type LossModel uint8

const (
	// LossRandom drops each packet with probability Loss.Percent, with
	// optional correlation ("loss random P [CORR]", or "loss P [CORR]").
	LossRandom LossModel = iota
	// LossState is the 4-state Markov model ("loss state p13 [p31 [p32
	// [p23 [p14]]]]", kernel NETEM_LOSS_GI).
	LossState
	// LossGE is the Gilbert-Elliott model ("loss gemodel p [r [1-h
	// [1-k]]]", kernel NETEM_LOSS_GE).
	LossGE
)

func (m LossModel) String() string {
	switch m {
	case LossRandom:
		return "random"
	case LossState:
		return "state"
	case LossGE:
		return "gemodel"
	}
	return fmt.Sprintf("LossModel(%d)", uint8(m))
}

// Loss is one loss model with its parameters; only the fields of Model may
// be non-zero. The zero Loss is random loss of 0%: no loss.
type Loss struct {
	Model LossModel

	// LossRandom.
	Percent     Percent
	Correlation Percent

	// LossState transition probabilities between the states 1 (packet sent,
	// gap period), 2 (sent, burst period), 3 (lost, burst period) and 4
	// (lost, isolated). tc's defaults when only p13 is given: p31 = 100-p13,
	// p32 = 0, p23 = 100, p14 = 0.
	P13, P31, P32, P23, P14 Percent

	// LossGE: P is good→bad, R bad→good, OneMinusH the loss probability in
	// the bad state, OneMinusK the loss probability in the good state (tc's
	// "1-h" and "1-k"). tc's defaults: R = 100-P, OneMinusH = 100,
	// OneMinusK = 0.
	P, R, OneMinusH, OneMinusK Percent
}

// Active reports whether the loss model can drop anything or was chosen
// explicitly (state and gemodel models are active even with zero
// probabilities, as in tc).
func (l Loss) Active() bool { return l.Model != LossRandom || l.Percent > 0 }

// Rate is netem's rate limiter ("rate RATE [PACKETOVERHEAD [CELLSIZE
// [CELLOVERHEAD]]]"). BytesPerSecond 0 disables it.
type Rate struct {
	// BytesPerSecond is the kernel's unit: tc's "1mbit" is 125000. tc
	// truncates fractional bytes, and so does Parse.
	BytesPerSecond uint64
	// PacketOverhead in bytes is added to (or, negative, removed from)
	// every packet's length before the transmission time is computed.
	PacketOverhead int32
	// CellSize in bytes rounds each packet up to whole cells (ATM: 48).
	CellSize uint32
	// CellOverhead in bytes is added per cell (ATM: 5); needs CellSize.
	CellOverhead int32
}

// Slot is netem's slotting ("slot MIN [MAX] [packets N] [bytes N]" or "slot
// distribution NAME DELAY JITTER [packets N] [bytes N]"): packets leave
// only at slot boundaries, at most Packets packets and Bytes bytes per
// slot, which approximates bursty MACs (Wi-Fi, DOCSIS, LTE). The zero Slot
// disables slotting.
type Slot struct {
	// Min and Max bound the uniformly random gap between slots
	// (min/max mode).
	Min, Max time.Duration
	// Distribution, Delay and Jitter draw the gap from a table instead
	// (distribution mode, when Distribution is set). Uniform is not a
	// table, so Distribution must name one.
	Distribution Distribution
	Delay        time.Duration
	Jitter       time.Duration
	// Packets and Bytes cap one slot; 0 means unlimited.
	Packets int32
	Bytes   int32
}

// Active reports whether slotting is on.
func (s Slot) Active() bool { return s.Min != 0 || s.Max != 0 || s.Jitter != 0 }

// Equal reports whether p and o describe the same netem configuration,
// field by field (Limit 0 and DefaultLimit are equal).
func (p Profile) Equal(o Profile) bool {
	return reflect.DeepEqual(p.withDefaults(), o.withDefaults())
}

func (p Profile) withDefaults() Profile {
	if p.Limit == 0 {
		p.Limit = DefaultLimit
	}
	if len(p.Distribution.Table) == 0 {
		p.Distribution.Table = nil
	}
	if len(p.Slot.Distribution.Table) == 0 {
		p.Slot.Distribution.Table = nil
	}
	return p
}

// FieldError is a Profile validation error; Field names the Go field
// (for example "Loss.P13" or "Rate.CellOverhead").
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return "netem: " + e.Field + ": " + e.Msg }

func fieldErr(field, format string, a ...any) error {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, a...)}
}

func checkPercent(field string, v Percent) error {
	if math.IsNaN(float64(v)) || v < 0 || v > 100 {
		return fieldErr(field, "%v%% is outside 0%%..100%%", float64(v))
	}
	return nil
}

// Validate checks p against what tc accepts and what the kernel keeps
// without silently changing it. It returns a *FieldError naming the first
// offending field.
func (p Profile) Validate() error { return p.validate(true) }

// validate is Validate; requireTables false accepts custom distribution
// names without a Table (Parse output before LoadTables).
func (p Profile) validate(requireTables bool) error {
	pcts := []struct {
		name string
		v    Percent
	}{
		{"DelayCorrelation", p.DelayCorrelation},
		{"Loss.Percent", p.Loss.Percent}, {"Loss.Correlation", p.Loss.Correlation},
		{"Loss.P13", p.Loss.P13}, {"Loss.P31", p.Loss.P31}, {"Loss.P32", p.Loss.P32},
		{"Loss.P23", p.Loss.P23}, {"Loss.P14", p.Loss.P14},
		{"Loss.P", p.Loss.P}, {"Loss.R", p.Loss.R},
		{"Loss.OneMinusH", p.Loss.OneMinusH}, {"Loss.OneMinusK", p.Loss.OneMinusK},
		{"Duplicate", p.Duplicate}, {"DuplicateCorrelation", p.DuplicateCorrelation},
		{"Reorder", p.Reorder}, {"ReorderCorrelation", p.ReorderCorrelation},
		{"Corrupt", p.Corrupt}, {"CorruptCorrelation", p.CorruptCorrelation},
	}
	for _, c := range pcts {
		if err := checkPercent(c.name, c.v); err != nil {
			return err
		}
	}
	if p.Delay < 0 {
		return fieldErr("Delay", "negative (%v)", p.Delay)
	}
	if p.Jitter < 0 || p.Jitter > MaxJitter {
		return fieldErr("Jitter", "%v is outside 0..%v (the kernel caps jitter at INT_MAX ns)", p.Jitter, MaxJitter)
	}
	if p.DelayCorrelation != 0 && p.Jitter == 0 {
		return fieldErr("DelayCorrelation", "set without Jitter (tc syntax: delay TIME JITTER CORRELATION)")
	}
	if !p.Distribution.IsZero() {
		if p.Delay == 0 || p.Jitter == 0 {
			return fieldErr("Distribution", "needs Delay and Jitter (tc: \"distribution specified but no latency and jitter values\")")
		}
		if err := checkDistribution("Distribution", p.Distribution, requireTables); err != nil {
			return err
		}
	}
	if err := p.Loss.validate(); err != nil {
		return err
	}
	if p.ECN && !p.Loss.Active() {
		return fieldErr("ECN", "needs a loss model (tc: \"ecn requested without loss model\")")
	}
	if p.DuplicateCorrelation != 0 && p.Duplicate == 0 {
		return fieldErr("DuplicateCorrelation", "set without Duplicate")
	}
	if p.Reorder > 0 {
		if p.Delay == 0 {
			return fieldErr("Reorder", "needs Delay (tc: \"reordering not possible without specifying some delay\")")
		}
		if p.Gap == 0 {
			return fieldErr("Gap", "must be >= 1 with Reorder: netem never reorders with gap 0 (tc sets 1)")
		}
	} else {
		if p.ReorderCorrelation != 0 {
			return fieldErr("ReorderCorrelation", "set without Reorder")
		}
		if p.Gap != 0 {
			return fieldErr("Gap", "set without Reorder (tc: \"gap specified without reorder probability\")")
		}
	}
	if p.CorruptCorrelation != 0 && p.Corrupt == 0 {
		return fieldErr("CorruptCorrelation", "set without Corrupt")
	}
	if err := p.Rate.validate(); err != nil {
		return err
	}
	return p.Slot.validate(requireTables)
}

func checkDistribution(field string, d Distribution, requireTables bool) error {
	if d.Name == "" {
		return fieldErr(field+".Name", "a table without a name")
	}
	if d.Name == "uniform" {
		return fieldErr(field+".Name", "uniform is netem's table-less default; leave Distribution empty")
	}
	if dist.IsBuiltin(d.Name) {
		if d.Table != nil {
			return fieldErr(field+".Table", "set for built-in distribution %q", d.Name)
		}
		return nil
	}
	if !validName(d.Name) {
		return fieldErr(field+".Name", "%q is not a single tc word", d.Name)
	}
	if len(d.Table) == 0 && requireTables {
		return fieldErr(field+".Table", "custom distribution %q has no table (load it with dist.Load)", d.Name)
	}
	if len(d.Table) > dist.MaxEntries {
		return fieldErr(field+".Table", "%d entries, the kernel takes at most %d", len(d.Table), dist.MaxEntries)
	}
	return nil
}

func validName(s string) bool {
	for _, r := range s {
		if r <= ' ' || r == 0x7f {
			return false
		}
	}
	return s != "" && !(s[0] >= '0' && s[0] <= '9')
}

func (l Loss) validate() error {
	zero := func(names []string, vals ...Percent) error {
		for i, v := range vals {
			if v != 0 {
				return fieldErr("Loss."+names[i], "set but Loss.Model is %v", l.Model)
			}
		}
		return nil
	}
	random := []string{"Percent", "Correlation"}
	state := []string{"P13", "P31", "P32", "P23", "P14"}
	ge := []string{"P", "R", "OneMinusH", "OneMinusK"}
	switch l.Model {
	case LossRandom:
		if l.Correlation != 0 && l.Percent == 0 {
			return fieldErr("Loss.Correlation", "set without Loss.Percent")
		}
		if err := zero(state, l.P13, l.P31, l.P32, l.P23, l.P14); err != nil {
			return err
		}
		return zero(ge, l.P, l.R, l.OneMinusH, l.OneMinusK)
	case LossState:
		if err := zero(random, l.Percent, l.Correlation); err != nil {
			return err
		}
		if err := zero(ge, l.P, l.R, l.OneMinusH, l.OneMinusK); err != nil {
			return err
		}
		// From state 1 the kernel compares one random number against p14
		// and p13+p14; from state 3 against p32 and p31+p32.
		if l.P13+l.P14 > 100 {
			return fieldErr("Loss.P14", "p13+p14 = %v%% exceeds 100%%", float64(l.P13+l.P14))
		}
		if l.P31+l.P32 > 100 {
			return fieldErr("Loss.P32", "p31+p32 = %v%% exceeds 100%%", float64(l.P31+l.P32))
		}
		return nil
	case LossGE:
		if err := zero(random, l.Percent, l.Correlation); err != nil {
			return err
		}
		return zero(state, l.P13, l.P31, l.P32, l.P23, l.P14)
	}
	return fieldErr("Loss.Model", "unknown model %d", uint8(l.Model))
}

func (r Rate) validate() error {
	if r.BytesPerSecond == 0 {
		if r.PacketOverhead != 0 {
			return fieldErr("Rate.PacketOverhead", "set without Rate.BytesPerSecond")
		}
		if r.CellSize != 0 {
			return fieldErr("Rate.CellSize", "set without Rate.BytesPerSecond")
		}
	}
	if r.CellOverhead != 0 && r.CellSize == 0 {
		return fieldErr("Rate.CellOverhead", "set without Rate.CellSize (the kernel ignores it)")
	}
	if r.CellSize > math.MaxInt32 {
		return fieldErr("Rate.CellSize", "%d exceeds 2^31-1", r.CellSize)
	}
	return nil
}

func (s Slot) validate(requireTables bool) error {
	if s.Min < 0 {
		return fieldErr("Slot.Min", "negative (%v)", s.Min)
	}
	if s.Max < s.Min {
		return fieldErr("Slot.Max", "%v is below Slot.Min %v", s.Max, s.Min)
	}
	if s.Packets < 0 {
		return fieldErr("Slot.Packets", "negative (%d)", s.Packets)
	}
	if s.Bytes < 0 {
		return fieldErr("Slot.Bytes", "negative (%d)", s.Bytes)
	}
	if s.Distribution.IsZero() {
		if s.Delay != 0 || s.Jitter != 0 {
			return fieldErr("Slot.Distribution", "Slot.Delay/Slot.Jitter set without a slot distribution")
		}
	} else {
		if s.Min != 0 || s.Max != 0 {
			return fieldErr("Slot.Min", "min/max set together with a slot distribution")
		}
		if s.Delay < 0 {
			return fieldErr("Slot.Delay", "negative (%v)", s.Delay)
		}
		if s.Jitter <= 0 || s.Jitter > MaxJitter {
			return fieldErr("Slot.Jitter", "%v is outside (0, %v] (tc: \"Non-positive jitter\"; the kernel caps at INT_MAX ns)", s.Jitter, MaxJitter)
		}
		if err := checkDistribution("Slot.Distribution", s.Distribution, requireTables); err != nil {
			return err
		}
	}
	if !s.Active() && (s.Packets != 0 || s.Bytes != 0) {
		return fieldErr("Slot.Packets", "packets/bytes limits set without a slot (the kernel keeps no slot config then)")
	}
	return nil
}
