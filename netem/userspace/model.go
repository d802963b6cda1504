// Package userspace is a netem engine in user space, for kernels without
// sch_netem: the same netem.Profile, the same decisions sch_netem makes,
// applied by a relay process instead of a qdisc.
//
// # The model
//
// Qdisc is one direction's netem, with no I/O and no clock: Enqueue takes
// a packet's length and the current time and returns what becomes of it,
// following Linux 6.1's netem_enqueue: a duplicate with probability
// Duplicate; a loss decided by the loss model (random with correlation,
// 4-state, or Gilbert-Elliott); a corrupted bit with probability Corrupt;
// a drop when Limit packets are already queued; then either the delay
// (Delay, Jitter, correlation and the distribution table, as tabledist
// computes it, plus the rate limiter's transmission time and queueing) or,
// for reordering, immediate release ahead of the queue. Random numbers come
// from a seeded PCG source, drawn as 32-bit values and correlated as
// get_crandom does, so a run replays from its seed.
//
// Not supported, and refused with an error rather than ignored: ECN
// marking (the relay does not rewrite ECN bits) and slots.
//
// # The relay
//
// See Engine: a TUN device in each agent's namespace, routes to the peers
// through it, and one process moving packets between the devices at the
// times the model decides.
package userspace

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"time"

	"tokenbed/netem"
)

// distScale is NETEM_DIST_SCALE: table entries are in 1/8192 of sigma.
const distScale = 8192

// crnd is a correlated random source (get_crandom).
type crnd struct {
	rho  uint64 // correlation as a u32 fraction; 0: none
	last uint64
}

func u32(p netem.Percent) uint32 {
	if p <= 0 {
		return 0
	}
	if p >= 100 {
		return ^uint32(0)
	}
	return uint32(float64(p) / 100 * float64(^uint32(0)))
}

func (c *crnd) next(r *rand.Rand) uint32 {
	v := uint64(r.Uint32())
	if c.rho == 0 {
		return uint32(v)
	}
	rho := c.rho + 1
	ans := (v*((1<<32)-rho) + c.last*rho) >> 32
	c.last = ans
	return uint32(ans)
}

// Loss-model states (sch_netem's clgstate).
const (
	txInGap = iota + 1
	txInBurst
	lostInBurst
	lostInGap
	goodState = 1
	badState  = 2
)

// Outcome of one packet.
type Outcome struct {
	Drop    bool
	Reason  string // "loss" or "limit" when Drop
	At      time.Time
	Corrupt int // bit index to flip, or -1
	// Dup, when set, is the time of the duplicate copy (sch_netem sends
	// the clone through the qdisc again, without duplication: the clone
	// may be lost, corrupted or dropped at the limit on its own). It may be
	// set even when Drop is (the original hit the limit after the clone
	// was queued).
	Dup *time.Time
	// DupCorrupt is the bit of the duplicate to flip (its own draw, on an
	// unshared copy of the original as it arrived), or -1.
	DupCorrupt int
}

// Qdisc is one direction's netem model. It is not safe for concurrent use.
type Qdisc struct {
	p        netem.Profile
	rnd      *rand.Rand
	table    []int16
	delayCor crnd
	lossCor  crnd
	dupCor   crnd
	reorCor  crnd
	corrCor  crnd
	loss     uint32
	dup      uint32
	reorder  uint32
	corrupt  uint32
	a        [6]uint32 // loss model parameters a1..a5
	state    int
	counter  uint32
	limit    int
	pending  []time.Time // send times of queued packets, sorted
}

// NewQdisc builds the model of p with a seeded random source.
func NewQdisc(p netem.Profile, seed uint64) (*Qdisc, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if p.ECN {
		return nil, errors.New("userspace netem: ecn is not supported (the relay does not rewrite ECN bits)")
	}
	if p.Slot.Active() {
		return nil, errors.New("userspace netem: slot is not supported")
	}
	q := &Qdisc{p: p, rnd: rand.New(rand.NewPCG(seed, 0x6e6574656d)), limit: int(p.Limit)}
	if q.limit == 0 {
		q.limit = netem.DefaultLimit
	}
	t, err := p.Distribution.Values()
	if err != nil {
		return nil, err
	}
	q.table = t
	q.delayCor.rho = uint64(u32(p.DelayCorrelation))
	q.lossCor.rho = uint64(u32(p.Loss.Correlation))
	q.dupCor.rho = uint64(u32(p.DuplicateCorrelation))
	q.reorCor.rho = uint64(u32(p.ReorderCorrelation))
	q.corrCor.rho = uint64(u32(p.CorruptCorrelation))
	q.loss, q.dup, q.corrupt = u32(p.Loss.Percent), u32(p.Duplicate), u32(p.Corrupt)
	q.reorder = u32(p.Reorder)
	switch p.Loss.Model {
	case netem.LossState:
		q.a = [6]uint32{0, u32(p.Loss.P13), u32(p.Loss.P31), u32(p.Loss.P32), u32(p.Loss.P14), u32(p.Loss.P23)}
		q.state = txInGap
	case netem.LossGE:
		// The kernel keeps h (loss in Bad is 1-h) and k1 = 1-k.
		q.a = [6]uint32{0, u32(p.Loss.P), u32(p.Loss.R), u32(100 - p.Loss.OneMinusH), u32(p.Loss.OneMinusK), 0}
		q.state = goodState
	}
	return q, nil
}

// Profile returns the profile modelled.
func (q *Qdisc) Profile() netem.Profile { return q.p }

func (q *Qdisc) lossEvent() bool {
	switch q.p.Loss.Model {
	case netem.LossState:
		rnd := q.rnd.Uint32()
		a1, a2, a3, a4, a5 := q.a[1], q.a[2], q.a[3], q.a[4], q.a[5]
		switch q.state {
		case txInGap:
			switch {
			case rnd < a4:
				q.state = lostInGap
				return true
			case a4 < rnd && uint64(rnd) < uint64(a1)+uint64(a4):
				q.state = lostInBurst
				return true
			}
		case txInBurst:
			if rnd < a5 {
				q.state = lostInBurst
				return true
			}
		case lostInBurst:
			switch {
			case rnd < a3:
				q.state = txInBurst
			case a3 < rnd && uint64(rnd) < uint64(a2)+uint64(a3):
				q.state = txInGap
			case uint64(a2)+uint64(a3) < uint64(rnd):
				return true
			}
		case lostInGap:
			q.state = txInGap
		}
		return false
	case netem.LossGE:
		switch q.state {
		case goodState:
			if q.rnd.Uint32() < q.a[1] {
				q.state = badState
			}
			if q.rnd.Uint32() < q.a[4] {
				return true
			}
		case badState:
			if q.rnd.Uint32() < q.a[2] {
				q.state = goodState
			}
			if q.rnd.Uint32() > q.a[3] {
				return true
			}
		}
		return false
	}
	return q.loss != 0 && q.loss >= q.lossCor.next(q.rnd)
}

// tabledist draws a delay around mu with spread sigma (ns).
func (q *Qdisc) tabledist(mu, sigma int64) int64 {
	if sigma == 0 {
		return mu
	}
	rnd := q.delayCor.next(q.rnd)
	if q.table == nil {
		return int64(uint64(rnd)%uint64(2*sigma)) + mu - sigma
	}
	t := int64(q.table[int(rnd)%len(q.table)])
	x := (sigma % distScale) * t
	if x >= 0 {
		x += distScale / 2
	} else {
		x -= distScale / 2
	}
	return x/distScale + (sigma/distScale)*t + mu
}

// LinkHeader is what the rate limiter adds to each packet's length: the
// engine sees layer-3 packets (TUN), but sch_netem on the veth or Ethernet
// device the profile is meant for counts qdisc_pkt_len(skb), which there
// includes the 14-byte Ethernet header (packet_time_ns() in sch_netem.c
// takes len = qdisc_pkt_len(skb) + q->packet_overhead). Cross-validation
// (netem/validate, `make validate-netem`) showed the difference: bursts
// of 128-byte IP packets at 1 mbit left 10% sooner than through kernel
// netem.
const LinkHeader = 14

// packetTime is the rate limiter's transmission time of a packet of n
// bytes at layer 3.
func (q *Qdisc) packetTime(n int) int64 {
	r := q.p.Rate
	l := int64(n) + LinkHeader + int64(r.PacketOverhead)
	if r.CellSize > 0 {
		cells := l / int64(r.CellSize)
		if l > cells*int64(r.CellSize) {
			cells++
		}
		l = cells * (int64(r.CellSize) + int64(r.CellOverhead))
	}
	return l * int64(time.Second) / int64(r.BytesPerSecond)
}

// Enqueue decides the fate of a packet of n bytes arriving at now.
func (q *Qdisc) Enqueue(now time.Time, n int) Outcome {
	// Packets whose time has come have left the queue.
	i := 0
	for i < len(q.pending) && !q.pending[i].After(now) {
		i++
	}
	q.pending = q.pending[i:]
	return q.enqueue(now, n, q.dup != 0)
}

// enqueue is netem_enqueue (Linux 6.1 sch_netem.c); mayDup is false for
// the duplicate's own pass, as sch_netem zeroes q->duplicate around it.
func (q *Qdisc) enqueue(now time.Time, n int, mayDup bool) Outcome {
	count := 1
	if mayDup && q.dup >= q.dupCor.next(q.rnd) {
		count++
	}
	if q.lossEvent() {
		count--
	}
	if count == 0 {
		return Outcome{Drop: true, Reason: "loss", Corrupt: -1, DupCorrupt: -1}
	}
	out := Outcome{Corrupt: -1, DupCorrupt: -1}
	if count > 1 {
		// sch_netem clones the packet and re-enqueues the clone at the
		// root qdisc (rootq->enqueue) with q->duplicate zeroed, before the
		// original is corrupted or queued: the clone goes through the whole
		// of netem_enqueue again, so it is itself subject to the loss model,
		// to corruption (its own bit, on its own copy: skb_unshare) and to
		// the limit, but is never duplicated again. Cross-validation
		// against kernel netem (netem/validate, profile "duplicate 50%
		// loss 20%") showed it: 32% of packets arrived twice through
		// sch_netem (0.5·0.8·0.8), 40% through a model whose clone
		// skipped the loss model.
		if d := q.enqueue(now, n, false); !d.Drop {
			t := d.At
			out.Dup, out.DupCorrupt = &t, d.Corrupt
		}
	}
	if q.corrupt != 0 && q.corrupt >= q.corrCor.next(q.rnd) {
		out.Corrupt = int(q.rnd.Uint32() % uint32(max(n, 1)*8))
	}
	if len(q.pending) >= q.limit {
		// The original is dropped; a clone already queued still goes.
		return Outcome{Drop: true, Reason: "limit", Corrupt: -1, Dup: out.Dup, DupCorrupt: out.DupCorrupt}
	}
	out.At = q.schedule(now, n)
	return out
}

// schedule places one packet and returns its send time.
func (q *Qdisc) schedule(now time.Time, n int) time.Time {
	if q.p.Gap == 0 || q.counter+1 < q.p.Gap || q.reorder < q.reorCor.next(q.rnd) {
		delay := q.tabledist(int64(q.p.Delay), int64(q.p.Jitter))
		if q.p.Rate.BytesPerSecond != 0 {
			if len(q.pending) > 0 {
				// The last packet queued is the reference point: the delay
				// already spent waiting behind it counts.
				last := q.pending[len(q.pending)-1]
				if last.After(now) {
					delay -= int64(last.Sub(now))
					delay = max(delay, 0)
					now = last
				}
			}
			delay += q.packetTime(n)
		}
		at := now.Add(time.Duration(delay))
		q.counter++
		q.insert(at)
		return at
	}
	// Reordering: this one jumps the queue.
	q.counter = 0
	q.insert(now)
	return now
}

func (q *Qdisc) insert(t time.Time) {
	i, _ := slices.BinarySearchFunc(q.pending, t, func(a, b time.Time) int { return a.Compare(b) })
	q.pending = slices.Insert(q.pending, i, t)
}

// DirectionSeed is the seed of the direction from→to's model under a
// run's seed: the engine and the simulator (harness/sim) split it the same
// way, so a direction replays from the run's seed and its two addresses.
func DirectionSeed(seed uint64, from, to netip.Addr) uint64 {
	for _, a := range []netip.Addr{from, to} {
		for _, b := range a.AsSlice() {
			seed = (seed ^ uint64(b)) * 1099511628211
		}
	}
	return seed
}

// String describes the model.
func (q *Qdisc) String() string { return fmt.Sprintf("userspace netem %s", q.p) }
