// Package pcaptimeline turns a tokenbed packet capture (pcapng from
// harness/capture, or any pcap/pcapng holding the agents' UDP traffic) into
// a per-session timeline: for each token passing operation, identified by
// (token, session) (seed 002 §3), every datagram seen on every captured
// interface, with the harness's annotations interleaved.
//
// # FTN
//
// The FTN lock service (seed 001, agent/ftn) shares the UDP port; its
// datagrams start with "FT" and are decoded with agent/ftn/ftnlayer, one
// line each (msg.Msg's String, with what a reader of the wire also needs:
// the client a reply answers, the server index and incarnation that sent
// it). They go into one section in time order: most of them (global
// states, heartbeats, votes) belong to no token, and a lock's story runs
// through the servers' states. IPv4 fragments are reassembled per
// interface first (internal/pcapread): a global state listing tens of
// clients exceeds the MTU. A request sent again with the same client and
// request number (a Register with the same nonce) in the same direction,
// and the reply repeated to it, is a retransmission.
//
// # Signatures
//
// Neither protocol's signatures are checked: the timeline has no CA, and
// shows what was on the wire, forgeries included. The checkers verify
// (analysis/ftn with the run's CA; the agents themselves for token
// passing).
//
// # Transmissions, copies and retransmissions
//
// One datagram crossing a veth is captured twice, once on each end; with a
// bridge, more. Those sightings are copies of one transmission, not
// retransmissions. A sighting is a copy of the latest earlier transmission
// with the same bytes and addresses that was not yet seen on its
// interface; otherwise it starts a new transmission. Within a session, a
// transmission is a retransmission #n when it is the (n+1)-th transmission
// of the same datagram type in the same direction (source → destination
// address) and of the same pass (the 3-way exchange's pass id, 004 §4;
// none in the 4-way exchange): a Move sent again after a timeout, whether
// with a fresh nonce or the same bytes. A 3-way sender's next pass to the
// same member in the same session is a new pass, not a retransmission. The numbering is computed over the whole file, before
// any filter, so a filter never renumbers.
//
// # Names
//
// The sender's name is in every datagram (for FTN, in the envelope: its
// certificate's CommonName, as claimed). The receiver's name is looked up
// by address in what the file itself says: the source address of the
// datagrams each agent or FTN member sent, and the directory entries token
// passing datagrams carry. An address the file never ties to a name is
// shown as is.
package pcaptimeline

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"tokenbed/agent/eventlog"
	"tokenbed/agent/ftn/ftnlayer"
	"tokenbed/agent/ftn/msg"
	"tokenbed/agent/wire"
)

// Options select what the timeline shows. The zero value shows everything
// on the default port. The filters combine: a datagram is shown if it
// passes all of them. Token and Session select token passing, so either
// hides the FTN datagrams; Name and Client select FTN and hide token
// passing; Agent and the time window apply to both.
type Options struct {
	Port    uint16 // the agents' UDP port; 7400 if zero
	Token   string // "GEN@ORIGIN": only this token
	Session uint64 // only this session, if HasSession
	// HasSession says that Session is a filter (0 is a valid session id).
	HasSession bool
	// Agent keeps the datagrams this agent sent or received, and the
	// annotations that name it (as agent, peer or link end) or no agent.
	Agent string
	// From and To bound the time window (inclusive); zero bounds are open.
	From, To Bound
	// Name keeps the FTN datagrams about the token of that name: the
	// requests and replies naming it, the transfers and query replies
	// listing it.
	Name string
	// Client, if not 0, keeps the FTN datagrams about that client ID: its
	// requests, the replies to them, and the transfers listing it as
	// holder or waiter. No client has ID 0 (term<<32 | count, both from 1).
	Client uint64
}

// Bound is one end of a time window: an absolute time, or an offset from
// the first record of the capture. The zero Bound is open.
type Bound struct {
	Abs   time.Time     // an absolute time, if not IsRel
	Rel   time.Duration // an offset from Timeline.Start, if IsRel
	IsRel bool
}

// ParseBound parses an RFC 3339 time (2026-01-02T15:04:05.123456789Z) or
// an offset from the start of the capture (+1.5s, 250ms).
func ParseBound(s string) (Bound, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return Bound{Abs: t}, nil
	}
	d, err := time.ParseDuration(strings.TrimPrefix(s, "+"))
	if err != nil {
		return Bound{}, fmt.Errorf("%q: want an RFC 3339 time (2026-01-02T15:04:05.5Z) or an offset from the start (+1.5s)", s)
	}
	if d < 0 {
		return Bound{}, fmt.Errorf("%q: negative offset", s)
	}
	return Bound{Rel: d, IsRel: true}, nil
}

func (b Bound) set() bool { return b.IsRel || !b.Abs.IsZero() }

func (b Bound) at(start time.Time) time.Time {
	if b.IsRel {
		return start.Add(b.Rel)
	}
	return b.Abs
}

// Observation is one sighting of a datagram on the tokenbed port: one
// packet on one captured interface.
type Observation struct {
	Frame     int // position in the file from 1, as tshark numbers frames
	Time      time.Time
	Interface string // capture interface name
	Src, Dst  netip.AddrPort
	Bytes     []byte // the UDP payload

	Datagram *wire.Datagram // token passing, nil if malformed or FTN
	// FTN is an FTN datagram (IsFTN), nil if malformed or token passing.
	FTN      *ftnlayer.Datagram
	Err      error  // why the datagram is malformed: a *wire.Error, or for FTN an error wrapping a *codec.Error
	Receiver string // receiver's name, "" if the file does not tell
	// Fragments is the number of IPv4 fragments the datagram was
	// reassembled from, 0 if it was captured whole.
	Fragments int

	// CopyOf is the first sighting of the same transmission on another
	// interface, nil for the first sighting.
	CopyOf *Observation
	// Tx numbers the transmissions of a group from 1 (copies share it).
	Tx int
	// Retransmission is n for the n-th retransmission of the same type in
	// the same direction within the session, 0 for the first sending. For
	// FTN: of the same request (or its reply) in the same direction.
	Retransmission int
}

// IsFTN reports whether the datagram is the FTN lock service's: its
// payload starts with codec's magic, "FT" (token passing's is "TB").
func (o *Observation) IsFTN() bool { return isFTN(o.Bytes) }

func isFTN(b []byte) bool { return len(b) >= 2 && b[0] == 'F' && b[1] == 'T' }

// SenderName returns the sender's name, from the datagram, or from its
// address when malformed.
func (o *Observation) SenderName(tl *Timeline) string {
	switch {
	case o.Datagram != nil:
		return o.Datagram.Sender
	case o.FTN != nil:
		return o.FTN.Sender
	}
	return tl.nameOf(o.Src)
}

// Annotation is one harness record of the capture.
type Annotation struct {
	Frame     int
	Time      time.Time
	Interface string
	Event     eventlog.Event // decoded from Raw, if it parses
	Raw       string         // the JSON as recorded
	Err       error          // why Raw does not parse as an event
}

// Line is one line of a group: an observation or an annotation.
type Line struct {
	Obs *Observation
	Ann *Annotation
}

// Time is when the line happened.
func (l Line) Time() time.Time {
	if l.Obs != nil {
		return l.Obs.Time
	}
	return l.Ann.Time
}

// Group is the timeline of one passing operation: one (token, session).
type Group struct {
	Token           wire.TokenID
	Session         uint64
	Lines           []Line // in time order, annotations interleaved
	Transmissions   int    // distinct transmissions shown
	Retransmissions int    // of those, retransmissions
}

// FTNGroup is the timeline of the FTN lock service: every FTN datagram
// shown, refused ones included, in time order, annotations interleaved.
type FTNGroup struct {
	Lines           []Line
	Transmissions   int // distinct decoded transmissions shown
	Retransmissions int // of those, retransmissions
	Refused         int // distinct malformed transmissions shown
}

// Timeline is a decoded capture.
type Timeline struct {
	Name       string   // the file's path, for ReadFile
	Format     string   // "pcapng" or "pcap"
	Interfaces []string // capture interface names, by index
	Start      time.Time
	Records    int // records in the file
	Other      int // records that are neither tokenbed datagrams, nor annotations, nor IPv4 fragments
	// Fragments counts the records that are IPv4 fragments; Reassembled
	// the datagrams made of them (per interface); LeftOver the fragments
	// in none (incomplete at the end of the file, or contradictory).
	Fragments, Reassembled, LeftOver int
	// Truncated is set when the file ends inside a record (a capture
	// killed mid-write): the records before it are all there.
	Truncated error

	Groups      []*Group
	FTN         *FTNGroup // nil if no FTN datagram is shown
	Malformed   []*Observation
	Annotations []*Annotation

	// Before filtering.
	all    []*Observation
	anns   []*Annotation
	names  map[netip.AddrPort]string
	ipName map[netip.Addr]string
	port   uint16
}

// nameOf returns the name the capture ties to addr, or "".
func (tl *Timeline) nameOf(addr netip.AddrPort) string {
	if n, ok := tl.names[addr]; ok {
		return n
	}
	return tl.ipName[addr.Addr()]
}

// build links observations: names, copies, transmissions and
// retransmissions, over the whole capture.
func (tl *Timeline) build() {
	slices.SortStableFunc(tl.all, func(a, b *Observation) int { return a.Time.Compare(b.Time) })
	slices.SortStableFunc(tl.anns, func(a, b *Annotation) int { return a.Time.Compare(b.Time) })
	if len(tl.all) > 0 && (tl.Start.IsZero() || tl.all[0].Time.Before(tl.Start)) {
		tl.Start = tl.all[0].Time
	}
	if len(tl.anns) > 0 && (tl.Start.IsZero() || tl.anns[0].Time.Before(tl.Start)) {
		tl.Start = tl.anns[0].Time
	}

	// Names: who sends from which address, and the directories.
	tl.names = map[netip.AddrPort]string{}
	ipNames := map[netip.Addr]map[string]bool{}
	learn := func(ap netip.AddrPort, name string) {
		if _, ok := tl.names[ap]; !ok {
			tl.names[ap] = name
		}
		a := ap.Addr().Unmap()
		if ipNames[a] == nil {
			ipNames[a] = map[string]bool{}
		}
		ipNames[a][name] = true
	}
	for _, o := range tl.all {
		if o.Datagram != nil || o.FTN != nil {
			learn(o.Src, o.SenderName(tl))
		}
	}
	for _, o := range tl.all {
		if o.Datagram != nil {
			for _, e := range o.Datagram.Dir {
				learn(e.Addr, e.Name)
			}
		}
	}
	tl.ipName = map[netip.Addr]string{}
	for a, ns := range ipNames {
		if len(ns) == 1 {
			for n := range ns {
				tl.ipName[a] = n
			}
		}
	}

	// Copies: the latest transmission with the same bytes and addresses
	// not yet seen on this interface.
	type txKey struct {
		src, dst netip.AddrPort
		bytes    string
	}
	type tx struct {
		first *Observation
		seen  map[string]bool
	}
	txs := map[txKey][]*tx{}
	for _, o := range tl.all {
		o.Receiver = tl.nameOf(o.Dst)
		k := txKey{o.Src, o.Dst, string(o.Bytes)}
		list := txs[k]
		var match *tx
		for i := len(list) - 1; i >= 0; i-- {
			if !list[i].seen[o.Interface] {
				match = list[i]
				break
			}
		}
		if match == nil {
			txs[k] = append(list, &tx{first: o, seen: map[string]bool{o.Interface: true}})
			continue
		}
		match.seen[o.Interface] = true
		o.CopyOf = match.first
	}

	// Transmission and retransmission numbers, per (token, session).
	type gKey struct {
		tok     wire.TokenID
		session uint64
	}
	type dirKey struct {
		typ      wire.Type
		src, dst netip.AddrPort
		pass     uint64
	}
	txCount := map[gKey]int{}
	sends := map[gKey]map[dirKey]int{}
	for _, o := range tl.all {
		if o.Datagram == nil {
			continue
		}
		if o.CopyOf != nil {
			o.Tx, o.Retransmission = o.CopyOf.Tx, o.CopyOf.Retransmission
			continue
		}
		g := gKey{o.Datagram.Token, o.Datagram.Session}
		txCount[g]++
		o.Tx = txCount[g]
		if sends[g] == nil {
			sends[g] = map[dirKey]int{}
		}
		d := dirKey{o.Datagram.Type, o.Src, o.Dst, o.Datagram.PassID}
		o.Retransmission = sends[g][d]
		sends[g][d]++
	}

	// FTN retransmissions: the same request (client and request number;
	// a Register's nonce) or its reply, in the same direction.
	type ftnKey struct {
		kind               msg.Kind
		src, dst           netip.AddrPort
		client, req, nonce uint64
	}
	ftnSends := map[ftnKey]int{}
	for _, o := range tl.all {
		if o.FTN == nil {
			continue
		}
		if o.CopyOf != nil {
			o.Retransmission = o.CopyOf.Retransmission
			continue
		}
		m := o.FTN.Msg
		if m.Req == 0 && m.Kind != msg.Register {
			continue // heartbeats, states, votes: repeated by design
		}
		k := ftnKey{m.Kind, o.Src, o.Dst, m.Client, m.Req, m.Nonce}
		o.Retransmission = ftnSends[k]
		ftnSends[k]++
	}
}

// filter fills Groups, FTN, Malformed and Annotations from what opts
// keeps.
func (tl *Timeline) filter(opts Options) error {
	var tok wire.TokenID
	if opts.Token != "" {
		var err error
		if tok, err = wire.ParseTokenID(opts.Token); err != nil {
			return err
		}
	}
	inWindow := func(t time.Time) bool {
		if opts.From.set() && t.Before(opts.From.at(tl.Start)) {
			return false
		}
		if opts.To.set() && t.After(opts.To.at(tl.Start)) {
			return false
		}
		return true
	}
	for _, a := range tl.anns {
		if inWindow(a.Time) && (opts.Agent == "" || a.concerns(opts.Agent)) {
			tl.Annotations = append(tl.Annotations, a)
		}
	}
	type gKey struct {
		tok     wire.TokenID
		session uint64
	}
	groups := map[gKey]*Group{}
	passing, ftn := opts.Token != "" || opts.HasSession, opts.Name != "" || opts.Client != 0
	for _, o := range tl.all {
		if !inWindow(o.Time) {
			continue
		}
		if opts.Agent != "" && o.SenderName(tl) != opts.Agent && o.Receiver != opts.Agent {
			continue
		}
		if o.IsFTN() {
			if passing || (ftn && (o.FTN == nil || !about(o.FTN.Msg, opts.Name, opts.Client))) {
				continue
			}
			if tl.FTN == nil {
				tl.FTN = &FTNGroup{}
			}
			g := tl.FTN
			g.Lines = append(g.Lines, Line{Obs: o})
			switch {
			case o.CopyOf != nil:
			case o.FTN == nil:
				g.Refused++
			default:
				g.Transmissions++
				if o.Retransmission > 0 {
					g.Retransmissions++
				}
			}
			continue
		}
		if ftn {
			continue
		}
		if o.Datagram == nil {
			if opts.Token == "" && !opts.HasSession {
				tl.Malformed = append(tl.Malformed, o)
			}
			continue
		}
		d := o.Datagram
		if (opts.Token != "" && d.Token != tok) || (opts.HasSession && d.Session != opts.Session) {
			continue
		}
		k := gKey{d.Token, d.Session}
		g := groups[k]
		if g == nil {
			g = &Group{Token: d.Token, Session: d.Session}
			groups[k] = g
			tl.Groups = append(tl.Groups, g)
		}
		g.Lines = append(g.Lines, Line{Obs: o})
		if o.CopyOf == nil {
			g.Transmissions++
			if o.Retransmission > 0 {
				g.Retransmissions++
			}
		}
	}
	for _, g := range tl.Groups {
		g.Lines = tl.interleave(g.Lines)
	}
	if tl.FTN != nil {
		tl.FTN.Lines = tl.interleave(tl.FTN.Lines)
	}
	return nil
}

// interleave adds the annotations inside the lines' time span, in time
// order.
func (tl *Timeline) interleave(lines []Line) []Line {
	first, last := lines[0].Time(), lines[len(lines)-1].Time()
	for _, a := range tl.Annotations {
		if !a.Time.Before(first) && !a.Time.After(last) {
			lines = append(lines, Line{Ann: a})
		}
	}
	slices.SortStableFunc(lines, func(a, b Line) int { return a.Time().Compare(b.Time()) })
	return lines
}

// about reports whether an FTN message concerns the token name (if not
// "") and the client id (if not 0).
func about(m msg.Msg, name string, id uint64) bool {
	named, client := m.Name == name, m.Client == id
	for _, t := range m.Tokens {
		named = named || t.Name == name
		for _, h := range t.Holders {
			client = client || h.Client == id
		}
		for _, w := range t.Queue {
			client = client || w.Client == id
		}
	}
	for _, h := range m.Holds {
		named = named || h.Name == name
	}
	return (name == "" || named) && (id == 0 || client)
}

// concerns reports whether the annotation names agent, or no agent at all
// (a run-level event).
func (a *Annotation) concerns(agent string) bool {
	ev := a.Event
	if ev.Peer == agent || (ev.Agent != "harness" && ev.Agent == agent) {
		return true
	}
	from, to, _ := strings.Cut(ev.Link, ">")
	if from == agent || to == agent {
		return true
	}
	return ev.Peer == "" && ev.Link == "" && (ev.Agent == "" || ev.Agent == "harness")
}

func parseAnnotation(frame int, ts time.Time, iface string, js []byte) *Annotation {
	a := &Annotation{Frame: frame, Time: ts, Interface: iface, Raw: string(js)}
	dec := json.NewDecoder(strings.NewReader(a.Raw))
	if err := dec.Decode(&a.Event); err != nil {
		a.Err = err
	}
	return a
}
