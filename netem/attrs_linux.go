package netem

import (
	"fmt"
	"math"
	"strconv"
	"syscall"
	"time"

	"github.com/vishvananda/netlink/nl"
)

// Netem attribute numbers from include/uapi/linux/pkt_sched.h that
// vishvananda/netlink's nl package does not define.
const (
	tcaNetemCorr      = nl.TCA_NETEM_CORR
	tcaNetemDelayDist = nl.TCA_NETEM_DELAY_DIST
	tcaNetemReorder   = nl.TCA_NETEM_REORDER
	tcaNetemCorrupt   = nl.TCA_NETEM_CORRUPT
	tcaNetemLoss      = nl.TCA_NETEM_LOSS
	tcaNetemRate      = nl.TCA_NETEM_RATE
	tcaNetemECN       = nl.TCA_NETEM_ECN
	tcaNetemRate64    = nl.TCA_NETEM_RATE64
	tcaNetemPad       = 9
	tcaNetemLatency64 = 10
	tcaNetemJitter64  = 11
	tcaNetemSlot      = 12
	tcaNetemSlotDist  = 13
	tcaNetemPRNGSeed  = 14

	netemLossGI = 1 // NETEM_LOSS_GI: 4-state model
	netemLossGE = 2 // NETEM_LOSS_GE: Gilbert-Elliott

	nlaFNested = 0x8000 // NLA_F_NESTED

	sizeofQopt = 24 // struct tc_netem_qopt
	sizeofSlot = 40 // struct tc_netem_slot
	// psched ticks are 64 ns (PSCHED_SHIFT 6).
	pschedShift = 6
)

var native = nl.NativeEndian()

// pctToU32 is iproute2's set_percent: rint(p/100 * UINT32_MAX).
func pctToU32(p Percent) uint32 {
	return uint32(math.RoundToEven(float64(p) / 100 * math.MaxUint32))
}

// u32ToPct returns the shortest decimal percentage that pctToU32 maps back
// to v, so a value read from the kernel prints as it was written ("1%", not
// "0.99999999%").
func u32ToPct(v uint32) Percent {
	exact := 100 * float64(v) / math.MaxUint32
	for prec := 1; prec <= 17; prec++ {
		f, _ := strconv.ParseFloat(strconv.FormatFloat(exact, 'g', prec, 64), 64)
		if f >= 0 && f <= 100 && pctToU32(Percent(f)) == v {
			return Percent(f)
		}
	}
	return Percent(exact)
}

func u32s(vs ...uint32) []byte {
	b := make([]byte, 4*len(vs))
	for i, v := range vs {
		native.PutUint32(b[4*i:], v)
	}
	return b
}

func u64(v uint64) []byte {
	b := make([]byte, 8)
	native.PutUint64(b, v)
	return b
}

func ticks(d time.Duration) uint32 {
	t := uint64(d) >> pschedShift
	if t > math.MaxUint32 {
		return math.MaxUint32
	}
	return uint32(t)
}

// encodeOptions builds the TCA_OPTIONS attribute of an RTM_NEWQDISC netem
// request: struct tc_netem_qopt followed by netem attributes. Unlike tc,
// every resettable attribute is always sent, because sch_netem's change
// only touches the attributes present: a `tc qdisc change` without
// "corrupt" keeps the old corruption. Sending all of them makes Change set
// exactly p. Delay and jitter travel as nanoseconds (LATENCY64/JITTER64,
// kernel ≥ 4.15); the 32-bit tick fields are filled too for old readers.
func encodeOptions(p Profile) (*nl.RtAttr, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	limit := p.Limit
	if limit == 0 {
		limit = DefaultLimit
	}
	var loss, lossCorr uint32
	if p.Loss.Model == LossRandom {
		loss, lossCorr = pctToU32(p.Loss.Percent), pctToU32(p.Loss.Correlation)
	}
	qopt := u32s(ticks(p.Delay), limit, loss, p.Gap, pctToU32(p.Duplicate), ticks(p.Jitter))
	opts := nl.NewRtAttr(nl.TCA_OPTIONS, qopt)
	opts.AddRtAttr(tcaNetemLatency64, u64(uint64(p.Delay)))
	opts.AddRtAttr(tcaNetemJitter64, u64(uint64(p.Jitter)))
	opts.AddRtAttr(tcaNetemCorr, u32s(pctToU32(p.DelayCorrelation), lossCorr, pctToU32(p.DuplicateCorrelation)))
	opts.AddRtAttr(tcaNetemReorder, u32s(pctToU32(p.Reorder), pctToU32(p.ReorderCorrelation)))
	opts.AddRtAttr(tcaNetemCorrupt, u32s(pctToU32(p.Corrupt), pctToU32(p.CorruptCorrelation)))
	ecn := uint32(0)
	if p.ECN {
		ecn = 1
	}
	opts.AddRtAttr(tcaNetemECN, u32s(ecn))
	switch p.Loss.Model {
	case LossState:
		l := p.Loss
		nest := opts.AddRtAttr(tcaNetemLoss|nlaFNested, nil)
		// struct tc_netem_gimodel field order: p13, p31, p32, p14, p23.
		nest.AddRtAttr(netemLossGI, u32s(pctToU32(l.P13), pctToU32(l.P31), pctToU32(l.P32), pctToU32(l.P14), pctToU32(l.P23)))
	case LossGE:
		l := p.Loss
		nest := opts.AddRtAttr(tcaNetemLoss|nlaFNested, nil)
		// The kernel wants h; tc's "1-h" is its complement (as q_netem.c does).
		nest.AddRtAttr(netemLossGE, u32s(pctToU32(l.P), pctToU32(l.R), math.MaxUint32-pctToU32(l.OneMinusH), pctToU32(l.OneMinusK)))
	}
	r := p.Rate
	rate32 := uint32(r.BytesPerSecond)
	if r.BytesPerSecond >= 1<<32 {
		opts.AddRtAttr(tcaNetemRate64, u64(r.BytesPerSecond))
		rate32 = math.MaxUint32
	}
	opts.AddRtAttr(tcaNetemRate, u32s(rate32, uint32(r.PacketOverhead), r.CellSize, uint32(r.CellOverhead)))
	slot := make([]byte, sizeofSlot)
	s := p.Slot
	native.PutUint64(slot[0:], uint64(s.Min))
	native.PutUint64(slot[8:], uint64(s.Max))
	native.PutUint32(slot[16:], uint32(s.Packets))
	native.PutUint32(slot[20:], uint32(s.Bytes))
	native.PutUint64(slot[24:], uint64(s.Delay))
	native.PutUint64(slot[32:], uint64(s.Jitter))
	opts.AddRtAttr(tcaNetemSlot, slot)
	for _, d := range []struct {
		typ int
		d   Distribution
	}{{tcaNetemDelayDist, p.Distribution}, {tcaNetemSlotDist, s.Distribution}} {
		t, err := d.d.Values()
		if err != nil {
			return nil, err
		}
		if t == nil {
			continue
		}
		b := make([]byte, 2*len(t))
		for i, v := range t {
			native.PutUint16(b[2*i:], uint16(v))
		}
		opts.AddRtAttr(d.typ, b)
	}
	return opts, nil
}

// TableUnreported is the Distribution name Read gives a slot distribution:
// the kernel never reports distribution tables (netem_dump omits
// TCA_NETEM_DELAY_DIST and TCA_NETEM_SLOT_DIST), only that slot
// distribution mode is on.
const TableUnreported = "unreported"

// KernelView returns what reading p back from the kernel yields: p with
// Limit defaulted, the delay Distribution removed and a slot distribution
// named TableUnreported, since the kernel does not report tables.
func (p Profile) KernelView() Profile {
	p = p.withDefaults()
	p.Distribution = Distribution{}
	if !p.Slot.Distribution.IsZero() {
		p.Slot.Distribution = Distribution{Name: TableUnreported}
	}
	return p
}

// decodeOptions parses the TCA_OPTIONS payload of a netem qdisc (as dumped
// by the kernel, or as sent by tc) into a Profile. Tables are not decoded:
// the kernel does not dump them; a request's DELAY_DIST is reported by the
// returned table slices for tests.
func decodeOptions(b []byte) (p Profile, delayTable, slotTable []int16, err error) {
	if len(b) < sizeofQopt {
		return p, nil, nil, fmt.Errorf("netem: TCA_OPTIONS is %d bytes, want >= %d", len(b), sizeofQopt)
	}
	lat, limit, loss, gap, dup, jit := native.Uint32(b[0:]), native.Uint32(b[4:]), native.Uint32(b[8:]),
		native.Uint32(b[12:]), native.Uint32(b[16:]), native.Uint32(b[20:])
	p.Delay = time.Duration(uint64(lat) << pschedShift)
	p.Jitter = time.Duration(uint64(jit) << pschedShift)
	p.Limit = limit
	p.Gap = gap
	p.Duplicate = u32ToPct(dup)
	p.Loss.Percent = u32ToPct(loss)
	attrs, err := nl.ParseRouteAttr(b[sizeofQopt:])
	if err != nil {
		return p, nil, nil, fmt.Errorf("netem: bad netem attributes: %w", err)
	}
	need := func(a syscall.NetlinkRouteAttr, n int, name string) error {
		if len(a.Value) < n {
			return fmt.Errorf("netem: %s attribute is %d bytes, want %d", name, len(a.Value), n)
		}
		return nil
	}
	var rate64 uint64
	for _, a := range attrs {
		v := a.Value
		switch a.Attr.Type &^ nlaFNested {
		case tcaNetemLatency64:
			if err := need(a, 8, "LATENCY64"); err != nil {
				return p, nil, nil, err
			}
			p.Delay = time.Duration(int64(native.Uint64(v)))
		case tcaNetemJitter64:
			if err := need(a, 8, "JITTER64"); err != nil {
				return p, nil, nil, err
			}
			p.Jitter = time.Duration(int64(native.Uint64(v)))
		case tcaNetemCorr:
			if err := need(a, 12, "CORR"); err != nil {
				return p, nil, nil, err
			}
			p.DelayCorrelation = u32ToPct(native.Uint32(v))
			p.Loss.Correlation = u32ToPct(native.Uint32(v[4:]))
			p.DuplicateCorrelation = u32ToPct(native.Uint32(v[8:]))
		case tcaNetemReorder:
			if err := need(a, 8, "REORDER"); err != nil {
				return p, nil, nil, err
			}
			p.Reorder = u32ToPct(native.Uint32(v))
			p.ReorderCorrelation = u32ToPct(native.Uint32(v[4:]))
		case tcaNetemCorrupt:
			if err := need(a, 8, "CORRUPT"); err != nil {
				return p, nil, nil, err
			}
			p.Corrupt = u32ToPct(native.Uint32(v))
			p.CorruptCorrelation = u32ToPct(native.Uint32(v[4:]))
		case tcaNetemECN:
			if err := need(a, 4, "ECN"); err != nil {
				return p, nil, nil, err
			}
			p.ECN = native.Uint32(v) != 0
		case tcaNetemRate:
			if err := need(a, 16, "RATE"); err != nil {
				return p, nil, nil, err
			}
			p.Rate = Rate{BytesPerSecond: uint64(native.Uint32(v)), PacketOverhead: int32(native.Uint32(v[4:])),
				CellSize: native.Uint32(v[8:]), CellOverhead: int32(native.Uint32(v[12:]))}
		case tcaNetemRate64:
			if err := need(a, 8, "RATE64"); err != nil {
				return p, nil, nil, err
			}
			rate64 = native.Uint64(v)
		case tcaNetemSlot:
			if err := need(a, sizeofSlot, "SLOT"); err != nil {
				return p, nil, nil, err
			}
			p.Slot = Slot{Min: time.Duration(int64(native.Uint64(v))), Max: time.Duration(int64(native.Uint64(v[8:]))),
				Packets: int32(native.Uint32(v[16:])), Bytes: int32(native.Uint32(v[20:])),
				Delay: time.Duration(int64(native.Uint64(v[24:]))), Jitter: time.Duration(int64(native.Uint64(v[32:])))}
		case tcaNetemLoss:
			inner, err := nl.ParseRouteAttr(v)
			if err != nil {
				return p, nil, nil, fmt.Errorf("netem: bad LOSS attribute: %w", err)
			}
			for _, m := range inner {
				w := m.Value
				switch m.Attr.Type {
				case netemLossGI:
					if err := need(m, 20, "LOSS/GI"); err != nil {
						return p, nil, nil, err
					}
					p.Loss = Loss{Model: LossState, P13: u32ToPct(native.Uint32(w)), P31: u32ToPct(native.Uint32(w[4:])),
						P32: u32ToPct(native.Uint32(w[8:])), P14: u32ToPct(native.Uint32(w[12:])), P23: u32ToPct(native.Uint32(w[16:]))}
				case netemLossGE:
					if err := need(m, 16, "LOSS/GE"); err != nil {
						return p, nil, nil, err
					}
					p.Loss = Loss{Model: LossGE, P: u32ToPct(native.Uint32(w)), R: u32ToPct(native.Uint32(w[4:])),
						OneMinusH: u32ToPct(math.MaxUint32 - native.Uint32(w[8:])), OneMinusK: u32ToPct(native.Uint32(w[12:]))}
				}
			}
		case tcaNetemDelayDist, tcaNetemSlotDist:
			t := make([]int16, len(v)/2)
			for i := range t {
				t[i] = int16(native.Uint16(v[2*i:]))
			}
			if a.Attr.Type == tcaNetemDelayDist {
				delayTable = t
			} else {
				slotTable = t
			}
		}
	}
	if rate64 > p.Rate.BytesPerSecond { // the kernel takes max(rate, rate64)
		p.Rate.BytesPerSecond = rate64
	}
	if p.Loss.Model != LossRandom {
		p.Loss.Percent, p.Loss.Correlation = 0, 0
	}
	// The kernel keeps a slot config only when some slot time is set, and
	// reports 0 for "unlimited" packets/bytes.
	if !p.Slot.Active() {
		p.Slot = Slot{}
	} else if p.Slot.Jitter != 0 {
		p.Slot.Distribution = Distribution{Name: TableUnreported}
		p.Slot.Min, p.Slot.Max = 0, 0
	}
	if p.Slot.Packets == math.MaxInt32 {
		p.Slot.Packets = 0
	}
	if p.Slot.Bytes == math.MaxInt32 {
		p.Slot.Bytes = 0
	}
	return p, delayTable, slotTable, nil
}
