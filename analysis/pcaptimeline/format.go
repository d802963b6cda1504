package pcaptimeline

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"tokenbed/agent/ftn/msg"
)

// WriteText writes the timeline as text: a summary, one section per
// (token, session) in order of first appearance, the FTN section, the
// malformed token passing datagrams, and the harness annotations. Every
// line starts with the frame number (as in tshark and Wireshark), the
// time from the start of the capture and the absolute time (UTC,
// CLOCK_REALTIME as captured).
func (tl *Timeline) WriteText(w io.Writer) error {
	bw := bufio.NewWriter(w)
	tl.writeSummary(bw)
	ifw := len("INTERFACE")
	for _, n := range tl.Interfaces {
		ifw = max(ifw, len(n))
	}
	for _, g := range tl.Groups {
		fmt.Fprintf(bw, "\ntoken %s session %d: %s, %s\n", g.Token, g.Session,
			plural(g.Transmissions, "transmission"), plural(g.Retransmissions, "retransmission"))
		pw := len("SENDER → RECEIVER")
		for _, l := range g.Lines {
			if l.Obs != nil {
				pw = max(pw, len(tl.path(l.Obs)))
			}
		}
		fmt.Fprintf(bw, "  %-7s %-13s %-30s  %-*s  %-*s  %-9s  %-20s  %-4s  %s\n",
			"FRAME", "TIME", "ABSOLUTE (UTC)", ifw, "INTERFACE", pw, "SENDER → RECEIVER", "TYPE", "NONCE", "CERT", "TRANSMISSION")
		for _, l := range g.Lines {
			if l.Ann != nil {
				tl.writeAnnotation(bw, l.Ann, ifw)
				continue
			}
			o := l.Obs
			cert := ""
			if len(o.Datagram.Cert) > 0 {
				cert = "cert"
			}
			fmt.Fprintf(bw, "  %s  %-*s  %-*s  %-9s  %-20d  %-4s  %s\n", tl.when(o.Frame, o.Time), ifw, o.Interface,
				pw, tl.path(o), o.Datagram.Type, o.Datagram.Nonce, cert, txNote(o))
		}
	}
	if g := tl.FTN; g != nil {
		fmt.Fprintf(bw, "\nFTN lock service: %s, %s, %s\n", plural(g.Transmissions, "transmission"),
			plural(g.Retransmissions, "retransmission"), strconv.Itoa(g.Refused)+" refused")
		pw := len("SENDER → RECEIVER")
		for _, l := range g.Lines {
			if l.Obs != nil {
				pw = max(pw, len(tl.path(l.Obs)))
			}
		}
		fmt.Fprintf(bw, "  %-7s %-13s %-30s  %-*s  %-*s  %s\n", "FRAME", "TIME", "ABSOLUTE (UTC)", ifw, "INTERFACE", pw, "SENDER → RECEIVER", "MESSAGE")
		for _, l := range g.Lines {
			if l.Ann != nil {
				tl.writeAnnotation(bw, l.Ann, ifw)
				continue
			}
			o := l.Obs
			what := "refused: " + fmt.Sprint(o.Err)
			if o.FTN != nil {
				what = ftnText(o.FTN.Msg)
			}
			var notes []string
			if o.Retransmission > 0 {
				notes = append(notes, "retransmission #"+strconv.Itoa(o.Retransmission))
			}
			if o.CopyOf != nil {
				notes = append(notes, copyNote(o))
			}
			if o.Fragments > 0 {
				notes = append(notes, "reassembled from "+plural(o.Fragments, "IPv4 fragment"))
			}
			if len(notes) > 0 {
				what += "  (" + strings.Join(notes, "; ") + ")"
			}
			fmt.Fprintf(bw, "  %s  %-*s  %-*s  %s\n", tl.when(o.Frame, o.Time), ifw, o.Interface, pw, tl.path(o), what)
		}
	}
	if len(tl.Malformed) > 0 {
		fmt.Fprintf(bw, "\nmalformed datagrams on port %d: %d\n", tl.port, len(tl.Malformed))
		for _, o := range tl.Malformed {
			note := ""
			if o.CopyOf != nil {
				note = "  (" + copyNote(o) + ")"
			}
			fmt.Fprintf(bw, "  %s  %-*s  %s  %v → %v  %v%s\n", tl.when(o.Frame, o.Time), ifw, o.Interface,
				tl.path(o), o.Src, o.Dst, o.Err, note)
		}
	}
	if len(tl.Annotations) > 0 {
		fmt.Fprintf(bw, "\nharness annotations: %d\n", len(tl.Annotations))
		for _, a := range tl.Annotations {
			tl.writeAnnotation(bw, a, ifw)
		}
	}
	if tl.Truncated != nil {
		fmt.Fprintf(bw, "\nnote: the file ends inside a record (%v): the capturing process was probably killed while writing; "+
			"everything before it is shown (harness/capture.Repair removes the partial record)\n", tl.Truncated)
	}
	return bw.Flush()
}

func (tl *Timeline) writeSummary(w io.Writer) {
	var sightings, txs, retx, malformed int
	var ftn, ftnTxs, ftnRetx, refused int
	for _, o := range tl.all {
		if o.IsFTN() {
			switch {
			case o.FTN == nil:
				refused++
			default:
				ftn++
				if o.CopyOf == nil {
					ftnTxs++
					if o.Retransmission > 0 {
						ftnRetx++
					}
				}
			}
			continue
		}
		if o.Datagram == nil {
			malformed++
			continue
		}
		sightings++
		if o.CopyOf == nil {
			txs++
			if o.Retransmission > 0 {
				retx++
			}
		}
	}
	name := tl.Name
	if name == "" {
		name = "capture"
	}
	fmt.Fprintf(w, "%s: %s, %s; interfaces: %s\n", name, tl.Format, plural(tl.Records, "record"), strings.Join(tl.Interfaces, ", "))
	if !tl.Start.IsZero() {
		fmt.Fprintf(w, "start: %s (TIME is seconds since then)\n", abs(tl.Start))
	}
	fmt.Fprintf(w, "whole file: %s of token passing datagrams on port %d (%s, %s), %s, %s, %s\n",
		plural(sightings, "sighting"), tl.port, plural(txs, "transmission"), plural(retx, "retransmission"),
		plural(malformed, "malformed sighting"), plural(len(tl.anns), "annotation"), plural(tl.Other, "other packet"))
	if ftn+refused > 0 {
		fmt.Fprintf(w, "whole file: %s of FTN datagrams on port %d (%s, %s), %s\n",
			plural(ftn, "sighting"), tl.port, plural(ftnTxs, "transmission"), plural(ftnRetx, "retransmission"), plural(refused, "refused sighting"))
	}
	if tl.Fragments > 0 {
		fmt.Fprintf(w, "IPv4 fragments: %s, reassembled per interface into %s, %s left over (incomplete or contradictory)\n",
			plural(tl.Fragments, "record"), plural(tl.Reassembled, "datagram"), strconv.Itoa(tl.LeftOver))
	}
	fmt.Fprintln(w, "signatures not checked (no CA here): every datagram is shown as sent, a forged one too")
}

// ftnText is an FTN message on one line: its String, with what that
// leaves out and a reader of the wire needs: a Release's fence, the
// version of the global state a Registered carries, and for a Reply the
// client it answers, the sending server's index and incarnation and the
// global state version it acted under.
func ftnText(m msg.Msg) string {
	switch m.Kind {
	case msg.Reply:
		var b strings.Builder
		b.WriteString("Reply " + msg.IDString(m.Client))
		if m.Req != 0 {
			fmt.Fprintf(&b, " req=%d", m.Req)
		}
		if m.Name != "" {
			b.WriteString(" " + m.Name)
		}
		b.WriteString(" " + m.Status.String())
		if !m.Fence.IsZero() {
			b.WriteString(" fence=" + m.Fence.String())
		}
		if m.Data != nil {
			fmt.Fprintf(&b, " data=%q", m.Data)
		}
		// The "ID invalid" to a heartbeat (no request) leaves the
		// server's index out (agent/ftn/server).
		if m.Req != 0 {
			fmt.Fprintf(&b, " server=%d", m.Server)
		}
		fmt.Fprintf(&b, " inc=%d", m.Inc)
		b.WriteString(" v=" + msg.VersionString(m.Version))
		return b.String()
	case msg.Release:
		if !m.Fence.IsZero() {
			return m.String() + " fence=" + m.Fence.String()
		}
	case msg.Registered:
		if m.Global != nil {
			return m.String() + " v=" + msg.VersionString(m.Global.Version)
		}
	}
	return m.String()
}

func (tl *Timeline) writeAnnotation(w io.Writer, a *Annotation, ifw int) {
	fmt.Fprintf(w, "  %s  %-*s  ** %s\n", tl.when(a.Frame, a.Time), ifw, a.Interface, describe(a))
}

// when formats the frame number, the relative and the absolute time.
func (tl *Timeline) when(frame int, t time.Time) string {
	d := t.Sub(tl.Start)
	sign := "+"
	if d < 0 {
		sign, d = "-", -d
	}
	rel := fmt.Sprintf("%s%d.%09d", sign, d/time.Second, d%time.Second)
	return fmt.Sprintf("%-7s %-13s %-30s", "#"+strconv.Itoa(frame), rel, abs(t))
}

func abs(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000000000Z") }

// path is "SENDER → RECEIVER", with the receiver's address when the file
// does not name it.
func (tl *Timeline) path(o *Observation) string {
	from := o.SenderName(tl)
	if from == "" {
		from = o.Src.String()
	}
	to := o.Receiver
	if to == "" {
		to = o.Dst.String()
	}
	return from + " → " + to
}

func txNote(o *Observation) string {
	s := "tx" + strconv.Itoa(o.Tx)
	if o.Datagram.PassID != 0 {
		s += " pass " + strconv.FormatUint(o.Datagram.PassID, 16)
	}
	if o.Retransmission > 0 {
		s += " retransmission #" + strconv.Itoa(o.Retransmission)
	}
	if o.CopyOf != nil {
		s += " " + copyNote(o)
	}
	return s
}

func copyNote(o *Observation) string {
	return fmt.Sprintf("copy, same transmission as #%d on %s (%v later)", o.CopyOf.Frame, o.CopyOf.Interface, o.Time.Sub(o.CopyOf.Time))
}

// describe renders an annotation: its kind, then its non-empty fields.
func describe(a *Annotation) string {
	if a.Err != nil {
		return fmt.Sprintf("%s (not an event: %v)", a.Raw, a.Err)
	}
	ev := a.Event
	var b strings.Builder
	b.WriteString(string(ev.Kind))
	kv := func(k, v string) {
		if v == "" {
			return
		}
		if strings.ContainsAny(v, " \t\"=") {
			v = strconv.Quote(v)
		}
		b.WriteString(" " + k + "=" + v)
	}
	if ev.Agent != "harness" {
		kv("agent", ev.Agent)
	}
	kv("peer", ev.Peer)
	kv("link", ev.Link)
	kv("reason", ev.Reason)
	kv("profile", ev.Profile)
	kv("token", ev.Token)
	if ev.Session != 0 {
		kv("session", strconv.FormatUint(ev.Session, 10))
	}
	kv("addr", ev.Addr)
	kv("detail", ev.Detail)
	if ev.Seq != 0 {
		kv("seq", strconv.FormatUint(ev.Seq, 10))
	}
	return b.String()
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}
