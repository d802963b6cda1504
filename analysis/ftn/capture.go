package ftn

// The capture's view: the lock is judged from the client histories and,
// independently, from the capture, so that a fault one record misses
// (a client's log lost in a crash, a packet the capture dropped) is still
// seen in the other. It reads only the
// packets of capture.pcapng and the run's CA certificate: every FTN
// datagram is opened with agent/ftn/codec (its certificate checked
// against the CA and its signature over both UDP addresses), and the
// lock's holds are rebuilt from what crossed the wire:
//
//   - a grant is a server's OK Reply carrying a fence to a client's
//     Acquire (matched by client ID and request number; the Acquire gives
//     the mode); its repeats (the grant was lost and the client asked
//     again) carry the same fence and are the same hold;
//   - the hold starts at the grant's first capture, the moment it left
//     the server;
//   - it ends at the first capture of the client's Release of the name
//     naming that fence (or none), the moment it left the client; or at
//     an "ID invalid" Reply to the client; or, when the leader's State
//     broadcasts stop listing the client and the client sends nothing
//     more, at its drop (the servers free its tokens there). The drop is
//     the first datagram of a server carrying the version of the State
//     that left the client out, or a later one of that term: the leader
//     drops a client, frees its names and grants them in one step, and
//     the grants may leave before the State; they carry its version.
//
// What these windows over- and under-estimate:
//
//   - The start is early: the client learns of the grant a one-way delay
//     later, and never if the grant is lost (it asks again and gets the
//     same fence, or a new server's grant, which voids the lost one). The
//     server has committed to it, though, so the wire's hold is the
//     server's obligation, not the client's belief.
//   - A grant that reached the client is judged by the client's rules
//     (agent/ftn/client): from a server incarnation that the newest global
//     state the capture saw reach the client lists as DOWN or older, it is
//     discarded as late (001 "When a Server Crashes"); a second answer to
//     an answered request is ignored. Neither is a hold; both are listed.
//     The client may know a newer state than the capture saw arrive (a
//     packet the capture dropped): then a grant it discarded counts here.
//   - The end is late against the client's own view (it stops acting
//     when it invokes the release, before the datagram leaves) and early
//     against the server's (which frees the token when the release
//     arrives). A correct server grants the next holder only after the
//     release arrived, so the next grant leaves after this end: the
//     over-estimate cannot make a correct run fail.
//   - A client that crashed holding a token sends no release; the wire
//     cannot tell a crash from a client cut off behind a dead link
//     except by what it sends afterwards (the capture is taken on the
//     sender's own interface, before impairment, so a live client's
//     heartbeats are seen even when the network drops them). A silent
//     client's hold ends at its drop; a live one keeps it until it is
//     told "ID invalid" or releases, and an overlap after its drop is
//     001's admitted window, as in the histories.
//   - The client's own view is not on the wire at all: whether it acted
//     on a grant, and when it stopped. Those are the histories' to say,
//     and the two views are compared (compare.go).
//   - Packets the capture itself dropped (its kernel rings' counts, in
//     the interface statistics) are missing grants or releases: they
//     are reported, and a hold missing from the capture is then not
//     evidence of anything.

import (
	"cmp"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/gopacket/gopacket"

	"tokenbed/agent/ca"
	"tokenbed/agent/ftn/codec"
	"tokenbed/agent/ftn/ftnlayer"
	"tokenbed/agent/ftn/msg"
	"tokenbed/analysis"
	"tokenbed/internal/pcapread"
	"tokenbed/internal/results"
)

// CaptureNames are the capture's checks, in report order, after Names.
var CaptureNames = []string{"capture-mutual-exclusion", "capture-fencing"}

// CaptureReport is the capture's view of the lock, judged alone.
type CaptureReport struct {
	Packets   int // records read
	Datagrams int // distinct FTN datagrams (one seen leaving and arriving counts once)
	// Refused counts the distinct datagrams that did not open (malformed,
	// a certificate not of the run's CA, a bad signature), by reason:
	// they are left out.
	Refused  map[string]int
	Verified bool   // signatures checked (the CA was given)
	Drops    uint64 // packets the capture's kernel rings dropped
	Complete bool   // the capture ended with its interface statistics
	// Truncated says why the file ended early, if it did.
	Truncated string
	Holds     []Hold
	// Late are the grants their client discarded, by 001's rule against
	// late messages applied to the global state the capture saw reach it
	// (agent/ftn/client): from a server incarnation it knew as DOWN or
	// superseded, or a second answer to a request already answered.
	// They are no holds.
	Late []string
	// NotArrived are the holds whose grant was never seen arriving at
	// the client's interface (lost on the wire, or missed by the capture).
	NotArrived []Hold
	// Unmatched counts OK replies with a fence whose request the capture
	// lacks: neither an acquire nor a data request, so not judged.
	Unmatched   int
	Dropped     map[string]int64 // client ID → first State broadcast without it
	Overlaps    []Overlap
	FenceErrors []string

	MutualExclusion analysis.Requirement
	Fencing         analysis.Requirement
}

// Requirement returns the named capture check's verdict.
func (r *CaptureReport) Requirement(name string) analysis.Requirement {
	switch name {
	case "capture-mutual-exclusion":
		return r.MutualExclusion
	case "capture-fencing":
		return r.Fencing
	}
	return analysis.Requirement{}
}

// CaptureOptions of CheckCapture.
type CaptureOptions struct {
	// CA verifies every datagram's certificate and signature; nil reads
	// them unchecked (Verified false).
	CA *x509.Certificate
	// BaseWall is the wall clock (ns) shown as 0 (Report.BaseWall, so
	// that both views share an origin); 0: the first packet.
	BaseWall int64
}

// seen is one distinct datagram: its first capture and the instances
// whose interfaces saw it.
type seen struct {
	t      int64 // wall ns
	sender string
	m      msg.Msg
	at     []capt
}

// capt is one capture of a datagram: on inst's interface at t (wall ns).
type capt struct {
	inst string
	t    int64
}

// arrival is when the datagram was first captured on inst's interface.
func (s *seen) arrival(inst string) (int64, bool) {
	t, ok := int64(math.MaxInt64), false
	for _, c := range s.at {
		if c.inst == inst && c.t < t {
			t, ok = c.t, true
		}
	}
	return t, ok
}

// CheckCapture judges a pcapng capture alone.
func CheckCapture(r io.Reader, o CaptureOptions) (*CaptureReport, error) {
	cr := &CaptureReport{Refused: map[string]int{}, Dropped: map[string]int64{}, Verified: o.CA != nil}
	rd, err := pcapread.NewReader(r)
	if err != nil {
		return nil, err
	}
	var opener *codec.Codec
	if o.CA != nil {
		opener = codec.NewOpener(o.CA)
	}
	insts := map[int]string{}   // by interface
	byKey := map[string]*seen{} // by signature: unique per datagram, and equal in its copies
	var all []*seen
	for {
		p, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			cr.Truncated = err.Error()
			if errors.Is(err, io.ErrUnexpectedEOF) {
				cr.Truncated = "the capture ends inside a block (the harness was killed)"
			}
			break
		}
		inst, ok := insts[p.Iface]
		if !ok {
			if d, err := rd.Interface(p.Iface); err == nil {
				inst, _, _ = strings.Cut(d.Name, "/")
			}
			insts[p.Iface] = inst
		}
		// A global state listing tens of clients is larger than the MTU,
		// and the kernel fragments it (ftn-5x50: 37,376 fragments): the
		// reader reassembles it, as the receiver does, or the States that
		// drop a client would never be read.
		if p.UDP == nil || len(p.UDP.Payload) < 2 || p.UDP.Payload[0] != 'F' || p.UDP.Payload[1] != 'T' {
			continue // not FTN (the harness's annotations, ARP, ...)
		}
		if s := cr.datagram(p, inst, opener, byKey); s != nil {
			all = append(all, s)
		}
	}
	st := rd.Stats()
	cr.Packets, cr.Drops, cr.Complete = st.Packets(), st.Drops(), st.Complete()
	cr.Datagrams = len(all)
	// Records are written in time order only within the capture's flush
	// window: order by first capture.
	slices.SortStableFunc(all, func(a, b *seen) int { return cmp.Compare(a.t, b.t) })
	base := o.BaseWall
	if base == 0 && len(all) > 0 {
		base = all[0].t
	}
	wire(cr, all, base)
	cr.Overlaps, cr.FenceErrors, cr.MutualExclusion, cr.Fencing = judge(cr.Holds, cr.Dropped)
	if len(cr.Holds) == 0 && len(all) == 0 {
		cr.MutualExclusion = notJudged("no FTN datagram in the capture")
	}
	return cr, nil
}

// datagram opens the FTN datagram of p, captured on inst's interface, and
// returns it when it is new; a copy of one already seen adds its capture
// to it, and one that does not open is counted in Refused, its copies
// too.
func (cr *CaptureReport) datagram(p *pcapread.Packet, inst string, opener *codec.Codec, byKey map[string]*seen) *seen {
	// FTN shares token passing's port, so its layer is not in gopacket's
	// port table (agent/ftn/ftnlayer) and the payload is decoded here.
	var dg ftnlayer.Datagram
	if err := dg.DecodeFromBytes(p.UDP.Payload, gopacket.NilDecodeFeedback); err != nil {
		var ce *codec.Error
		if errors.As(err, &ce) {
			cr.Refused[ce.Reason]++
		}
		return nil
	}
	t := p.Time.UnixNano()
	key := string(dg.Sig)
	if s := byKey[key]; s != nil {
		s.t = min(s.t, t)
		s.at = append(s.at, capt{inst, t})
		return nil
	}
	if opener != nil {
		_, err := opener.Verify(dg.Datagram, netip.AddrPortFrom(p.Src.Unmap(), uint16(p.UDP.SrcPort)),
			netip.AddrPortFrom(p.Dst.Unmap(), uint16(p.UDP.DstPort)), p.Time)
		if err != nil {
			var ce *codec.Error
			if errors.As(err, &ce) {
				cr.Refused[ce.Reason]++
			}
			byKey[key] = &seen{t: math.MinInt64} // refused: its copies too
			return nil
		}
	}
	s := &seen{t: t, sender: dg.Sender, m: dg.Msg, at: []capt{{inst, t}}}
	byKey[key] = s
	return s
}

type reqKey struct {
	id  uint64
	req uint64
}

type request struct {
	kind msg.Kind
	mode msg.Mode
	name string
	inst string // the client process (its certificate's name)
}

// release is a client's Release of a name, naming a fence (or none).
type release struct {
	t     int64
	fence msg.Fence
}

// nameKey is one client ID's interest in one name.
type nameKey struct {
	id   uint64
	name string
}

// state is a State broadcast: its time, version and the clients it lists.
type state struct {
	t   int64
	v   uint64
	ids []uint64
}

// holdKey is one grant: a client ID, a name and its fence.
type holdKey struct {
	id    uint64
	name  string
	fence msg.Fence
}

// wire rebuilds the holds from the datagrams in time order (times
// relative to base).
func wire(cr *CaptureReport, all []*seen, base int64) {
	reqs := map[reqKey]request{}
	lastHeard := map[uint64]int64{}
	lives := map[string][]uint64{} // client process → its IDs, in order
	releases := map[nameKey][]release{}
	invalid := map[uint64][]int64{}
	var states []state
	holds := map[holdKey]int{} // → index in cr.Holds
	arrived := map[int]bool{}
	accepted := map[reqKey]msg.Fence{} // the grant the client took for its request
	known := knownStates(all, base)
	var carried versionsSeen
	for _, s := range all {
		m, t := s.m, s.t-base
		carried.add(m, t)
		if !m.Kind.FromServer() && m.Client != 0 {
			lastHeard[m.Client] = max(lastHeard[m.Client], t)
			if !slices.Contains(lives[s.sender], m.Client) {
				lives[s.sender] = append(lives[s.sender], m.Client)
			}
		}
		switch m.Kind {
		case msg.Acquire, msg.SetData, msg.GetData:
			reqs[reqKey{m.Client, m.Req}] = request{kind: m.Kind, mode: m.Mode, name: m.Name, inst: s.sender}
		case msg.Release:
			k := nameKey{m.Client, m.Name}
			releases[k] = append(releases[k], release{t, m.Fence})
		case msg.StateMsg:
			if m.Global != nil {
				st := state{t: t, v: m.Global.Version}
				for _, c := range m.Global.Clients {
					st.ids = append(st.ids, c.ID)
				}
				states = append(states, st)
			}
		case msg.Reply:
			if m.Status == msg.IDInvalid {
				invalid[m.Client] = append(invalid[m.Client], t)
				continue
			}
			if m.Status != msg.OK || m.Fence.IsZero() {
				continue // a release's acknowledgement, or a refusal
			}
			rq, ok := reqs[reqKey{m.Client, m.Req}]
			if !ok {
				cr.Unmatched++
				continue
			}
			if rq.kind != msg.Acquire || rq.name != m.Name {
				continue
			}
			// What the client did with it, as far as the capture shows:
			// a grant that reached it is judged by the client's rules.
			ta, got := s.arrival(rq.inst)
			if f, ok := accepted[reqKey{m.Client, m.Req}]; ok && f != m.Fence {
				cr.Late = append(cr.Late, fmt.Sprintf("%s: %s(%s) fence %s from server %d at %s: its request was answered with fence %s",
					m.Name, rq.inst, msg.IDString(m.Client), m.Fence, m.Server, ms(t), f))
				continue
			}
			if got {
				if g := known.at(rq.inst, ta-base); g != nil && m.Server >= 0 && m.Server < len(g.Servers) {
					k := g.Servers[m.Server]
					if m.Inc < k.Inc || (m.Inc == k.Inc && k.State == msg.Down) {
						cr.Late = append(cr.Late, fmt.Sprintf("%s: %s(%s) fence %s from server %d (incarnation %d) at %s: the global state %s it had then lists that server %s/%d",
							m.Name, rq.inst, msg.IDString(m.Client), m.Fence, m.Server, m.Inc, ms(t), msg.VersionString(g.Version), k.State, k.Inc))
						continue
					}
				}
				accepted[reqKey{m.Client, m.Req}] = m.Fence
			}
			hk := holdKey{m.Client, m.Name, m.Fence}
			i, ok := holds[hk]
			if ok && cr.Holds[i].Op.Req != m.Req && slices.ContainsFunc(releases[nameKey{m.Client, m.Name}], func(rl release) bool {
				return rl.t >= cr.Holds[i].Start && rl.t < t && (rl.fence.IsZero() || rl.fence == m.Fence)
			}) {
				// The client released that hold, and a new request of
				// its is granted the same fence again (the server still
				// listed it as holder): a new hold. The same request
				// answered again is a repeat, even after the release: a
				// retransmitted acquire that reached the server before
				// the release did gets the grant once more, and the
				// client ignores a second answer (ftn-perf-10ms: 145
				// holds "never released" that way).
				ok = false
			}
			if !ok {
				i = len(cr.Holds)
				holds[hk] = i
				life := slices.Index(lives[rq.inst], m.Client) + 1
				cr.Holds = append(cr.Holds, Hold{Op: &Op{Client: rq.inst, Life: life, ID: msg.IDString(m.Client), Req: m.Req,
					Kind: msg.Acquire, Name: m.Name, Mode: rq.mode, Inv: t, Done: t, Result: "ok", Fence: m.Fence},
					Start: t, End: math.MaxInt64})
			}
			arrived[i] = arrived[i] || got
		}
	}
	dropped(cr, states, carried)
	endHolds(cr, releases, invalid, lastHeard, arrived)
	slices.SortStableFunc(cr.Holds, func(a, b Hold) int { return cmp.Compare(a.Start, b.Start) })
}

// dropped finds when each client was dropped: a client listed in a
// State of version v is dropped by the first State of a later version
// that does not list it (IDs are never reused: term<<32 | count).
func dropped(cr *CaptureReport, states []state, carried versionsSeen) {
	firstV := map[uint64]uint64{}
	for _, st := range states {
		for _, id := range st.ids {
			if v, ok := firstV[id]; !ok || st.v < v {
				firstV[id] = st.v
			}
		}
	}
	for _, st := range states {
		for id, v := range firstV {
			if st.v > v && !slices.Contains(st.ids, id) {
				// The drop was decided when the first datagram of a
				// server holding that version left, which may precede
				// the State: the leader frees the dropped client's names
				// and grants them in the step that drops it, and its
				// grants carry the new version (001 "When a Client
				// Crashes").
				t := min(st.t, carried.first(st.v))
				if d, ok := cr.Dropped[msg.IDString(id)]; !ok || t < d {
					cr.Dropped[msg.IDString(id)] = t
				}
			}
		}
	}
}

// endHolds ends each hold at the first of: a later grant of the name to
// the same client with another fence, the client's release, an "ID
// invalid" reply, or its drop when it has been silent since; and lists
// the holds whose grant was never seen arriving.
func endHolds(cr *CaptureReport, releases map[nameKey][]release, invalid map[uint64][]int64, lastHeard map[uint64]int64, arrived map[int]bool) {
	grantsOf := map[nameKey][]Hold{}
	for _, h := range cr.Holds {
		k := nameKey{idOf(h.Op.ID), h.Op.Name}
		grantsOf[k] = append(grantsOf[k], h)
	}
	for i := range cr.Holds {
		h := &cr.Holds[i]
		id := idOf(h.Op.ID)
		// A client holds a name once: a later grant of it to the same
		// client with another fence voids this one (a grant lost on the
		// way, then the name's new server granting afresh).
		for _, g := range grantsOf[nameKey{id, h.Op.Name}] {
			if g.Op.Fence != h.Op.Fence && g.Start >= h.Start && g.Start < h.End {
				h.End, h.EndWhy = g.Start, "superseded by fence "+g.Op.Fence.String()
			}
		}
		for _, rl := range releases[nameKey{id, h.Op.Name}] {
			if rl.t >= h.Start && (rl.fence.IsZero() || rl.fence == h.Op.Fence) && rl.t < h.End {
				h.End, h.EndWhy = rl.t, "release"
			}
		}
		for _, t := range invalid[id] {
			if t >= h.Start && t < h.End {
				h.End, h.EndWhy = t, "ID invalid"
			}
		}
		if d, ok := cr.Dropped[h.Op.ID]; ok && d >= h.Start && d < h.End && lastHeard[id] <= d {
			h.End, h.EndWhy = d, "dropped, silent since"
		}
		if !arrived[i] {
			cr.NotArrived = append(cr.NotArrived, *h)
		}
	}
}

// versionsSeen is, per leader term, the global state versions the
// servers' datagrams carried (a State's or a query's global state, the
// Version of every other kind: the one its sender held), in time order,
// with their running maximum.
type versionsSeen map[uint64][]struct{ t, maxV int64 }

func (vs *versionsSeen) add(m msg.Msg, t int64) {
	if !m.Kind.FromServer() {
		return
	}
	v := m.Version
	if m.Global != nil {
		v = m.Global.Version
	}
	if v == 0 {
		return
	}
	if *vs == nil {
		*vs = versionsSeen{}
	}
	l := (*vs)[v>>32]
	mv := int64(v)
	if n := len(l); n > 0 {
		mv = max(mv, l[n-1].maxV)
	}
	(*vs)[v>>32] = append(l, struct{ t, maxV int64 }{t, mv})
}

// first is when a server's datagram first carried version v or a later
// one of v's term (a version of another term may not descend from v),
// or math.MaxInt64.
func (vs versionsSeen) first(v uint64) int64 {
	l := vs[v>>32]
	i := sort.Search(len(l), func(i int) bool { return l[i].maxV >= int64(v) })
	if i == len(l) {
		return math.MaxInt64
	}
	return l[i].t
}

// globalsSeen is, per client process, the global states that reached it
// (Registered, HeartbeatAck, Query), by arrival, each the newest it had
// by then: a client adopts only newer ones (agent/ftn/client).
type globalsSeen map[string][]struct {
	t int64
	g *msg.Global
}

func knownStates(all []*seen, base int64) globalsSeen {
	ks := globalsSeen{}
	for _, s := range all {
		if s.m.Global == nil || (s.m.Kind != msg.Registered && s.m.Kind != msg.HeartbeatAck && s.m.Kind != msg.Query) {
			continue
		}
		for _, c := range s.at {
			if c.inst != s.sender {
				ks[c.inst] = append(ks[c.inst], struct {
					t int64
					g *msg.Global
				}{c.t - base, s.m.Global})
			}
		}
	}
	for inst, l := range ks {
		slices.SortStableFunc(l, func(a, b struct {
			t int64
			g *msg.Global
		}) int {
			return cmp.Compare(a.t, b.t)
		})
		for i := 1; i < len(l); i++ {
			if l[i].g.Version < l[i-1].g.Version {
				l[i].g = l[i-1].g
			}
		}
		ks[inst] = l
	}
	return ks
}

// at is the newest global state inst had received before t, or nil.
func (ks globalsSeen) at(inst string, t int64) *msg.Global {
	l := ks[inst]
	i := sort.Search(len(l), func(i int) bool { return l[i].t >= t })
	if i == 0 {
		return nil
	}
	return l[i-1].g
}

// idOf parses msg.IDString ("c1.7").
func idOf(s string) uint64 {
	var term, n uint64
	fmt.Sscanf(s, "c%d.%d", &term, &n)
	return term<<32 | n
}

// CheckCaptureDir judges a results directory's capture.pcapng with its
// CA; baseWall as in CaptureOptions. A directory without a capture
// gives (nil, nil).
func CheckCaptureDir(dir string, baseWall int64) (*CaptureReport, error) {
	path := filepath.Join(dir, results.CaptureFile)
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	c, err := ca.LoadCert(filepath.Join(dir, results.CADir, ca.CACertFile))
	if err != nil {
		return nil, fmt.Errorf("CA certificate: %w", err)
	}
	r, err := CheckCapture(f, CaptureOptions{CA: c, BaseWall: baseWall})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// facts is one line on what the capture held, for the report.
func (r *CaptureReport) facts() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d packets, %d distinct FTN datagrams", r.Packets, r.Datagrams)
	if r.Verified {
		b.WriteString(", each signature checked against the run's CA")
	} else {
		b.WriteString(", signatures not checked")
	}
	if len(r.Refused) > 0 {
		var rs []string
		for k, n := range r.Refused {
			rs = append(rs, fmt.Sprintf("%s %d", k, n))
		}
		sort.Strings(rs)
		fmt.Fprintf(&b, "; refused (left out): %s", strings.Join(rs, ", "))
	}
	if r.Drops > 0 {
		fmt.Fprintf(&b, "; the capture dropped %d packets", r.Drops)
	}
	if r.Truncated != "" {
		fmt.Fprintf(&b, "; %s", r.Truncated)
	} else if !r.Complete {
		b.WriteString("; no interface statistics at its end (the capture was not stopped)")
	}
	if len(r.Late) > 0 {
		fmt.Fprintf(&b, "; %d grants their client discarded (late or a second answer), not holds: %s", len(r.Late), strings.Join(firstOf(r.Late), "; "))
	}
	if r.Unmatched > 0 {
		fmt.Fprintf(&b, "; %d OK replies with a fence whose request is not in the capture", r.Unmatched)
	}
	return b.String()
}

// firstOf is at most maxListed items, then how many more.
func firstOf(items []string) []string {
	if len(items) <= maxListed {
		return items
	}
	return append(slices.Clone(items[:maxListed]), fmt.Sprintf("%d more", len(items)-maxListed))
}
