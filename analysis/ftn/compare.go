package ftn

import (
	"fmt"
	"strings"

	"tokenbed/agent/ftn/ftnlog"
	"tokenbed/agent/ftn/msg"
	"tokenbed/analysis"
)

// Views is the clients' histories and the capture side by side, with
// what they disagree on. The two are independent: neither reads the
// other, and a disagreement is a fact about the run to explain (a grant
// lost on the wire, a client killed before it logged, the capture's own
// losses), or a bug in one of them.
type Views struct {
	History *Report
	Capture *CaptureReport // nil: no capture
	// Disagreements, each a sentence with its evidence.
	Disagreements []string
}

type viewKey struct {
	id, name string
	fence    msg.Fence
}

func keyOf(h Hold) viewKey { return viewKey{h.Op.ID, h.Op.Name, h.Op.Fence} }

// maxListed bounds each kind of disagreement listed one by one.
const maxListed = 10

// Compare lines the views up: the verdicts of the checks both make, the
// holds (by client ID, name and fence) and the overlaps each found.
func Compare(h *Report, c *CaptureReport) *Views {
	v := &Views{History: h, Capture: c}
	if c == nil {
		return v
	}
	for i, n := range []string{"mutual-exclusion", "fencing"} {
		hq, cq := h.Requirement(n), c.Requirement(CaptureNames[i])
		if hq.Verdict != cq.Verdict {
			v.Disagreements = append(v.Disagreements, fmt.Sprintf("%s: the histories say %s (%s), the capture %s (%s)",
				n, hq.Verdict, hq.Value, cq.Verdict, cq.Value))
		}
	}
	inHist := map[viewKey]Hold{}
	for _, hd := range h.Holds {
		inHist[keyOf(hd)] = hd
	}
	onWire := map[viewKey]Hold{}
	for _, hd := range c.Holds {
		onWire[keyOf(hd)] = hd
	}
	notArrived := map[viewKey]bool{}
	for _, hd := range c.NotArrived {
		notArrived[keyOf(hd)] = true
	}
	ops := map[[2]string]*Op{} // (ID, req) → the history's acquire
	for _, o := range h.Ops {
		if o.Kind == msg.Acquire {
			ops[[2]string{o.ID, fmt.Sprint(o.Req)}] = o
		}
	}
	var only []string
	for _, hd := range c.Holds {
		if _, ok := inHist[keyOf(hd)]; ok {
			continue
		}
		why := "no acquire of it in the client's history: the client was killed, or the run ended, before it logged the grant"
		if o := ops[[2]string{hd.Op.ID, fmt.Sprint(hd.Op.Req)}]; o != nil {
			switch {
			case o.Result == ftnlog.OK:
				why = fmt.Sprintf("the client's acquire completed with fence %s", o.Fence)
			case o.Done < 0:
				why = "the client's acquire never completed (the client stopped first)"
			default:
				why = fmt.Sprintf("the client's acquire ended %s at %s: it gave up or discarded the grant", o.Result, ms(o.Done))
			}
		}
		if notArrived[keyOf(hd)] {
			why = "never seen arriving at the client (lost on the wire, or missed by the capture); " + why
		}
		only = append(only, fmt.Sprintf("%s: %s(%s) granted fence %s at %s: %s", hd.Op.Name, hd.Op.Client, hd.Op.ID, hd.Op.Fence, ms(hd.Start), why))
	}
	v.Disagreements = append(v.Disagreements, listed("grants on the wire that no client history holds", only)...)
	only = nil
	for _, hd := range h.Holds {
		if _, ok := onWire[keyOf(hd)]; !ok {
			why := "no grant of it in the capture"
			if c.Drops > 0 || c.Truncated != "" || !c.Complete {
				why += " (the capture lost packets or is incomplete: see its facts)"
			}
			only = append(only, fmt.Sprintf("%s: %s(%s) fence %s from %s: %s", hd.Op.Name, hd.Op.Client, hd.Op.ID, hd.Op.Fence, ms(hd.Start), why))
		}
	}
	v.Disagreements = append(v.Disagreements, listed("holds in the histories with no grant on the wire", only)...)
	// One key more than once: a client answered with a fence it had
	// held and released before (the server still listed it as holder).
	// Each view must count it alike.
	count := map[viewKey][2]int{}
	for _, hd := range h.Holds {
		c := count[keyOf(hd)]
		c[0]++
		count[keyOf(hd)] = c
	}
	for _, hd := range c.Holds {
		c := count[keyOf(hd)]
		c[1]++
		count[keyOf(hd)] = c
	}
	only = nil
	for _, hd := range h.Holds {
		if n := count[keyOf(hd)]; n[0] > 1 && n[0] != n[1] {
			only = append(only, fmt.Sprintf("%s: %s(%s) held %d times with fence %s in the histories, %d on the wire, from %s",
				hd.Op.Name, hd.Op.Client, hd.Op.ID, n[0], hd.Op.Fence, n[1], ms(hd.Start)))
			count[keyOf(hd)] = [2]int{}
		}
	}
	for _, hd := range c.Holds {
		if n := count[keyOf(hd)]; n[1] > 1 && n[0] != n[1] {
			only = append(only, fmt.Sprintf("%s: %s(%s) held %d times with fence %s on the wire, %d in the histories, from %s",
				hd.Op.Name, hd.Op.Client, hd.Op.ID, n[1], hd.Op.Fence, n[0], ms(hd.Start)))
			count[keyOf(hd)] = [2]int{}
		}
	}
	v.Disagreements = append(v.Disagreements, listed("one fence held more than once, counted differently", only)...)
	type ovKey struct {
		name string
		a, b viewKey
	}
	ovs := func(os []Overlap) map[ovKey]Overlap {
		m := map[ovKey]Overlap{}
		for _, o := range os {
			m[ovKey{o.Name, keyOf(o.A), keyOf(o.B)}] = o
		}
		return m
	}
	ho, co := ovs(h.Overlaps), ovs(c.Overlaps)
	only = nil
	for _, o := range h.Overlaps {
		if co, ok := co[ovKey{o.Name, keyOf(o.A), keyOf(o.B)}]; !ok || co.Admitted != o.Admitted {
			only = append(only, o.String())
		}
	}
	v.Disagreements = append(v.Disagreements, listed("overlaps in the histories that the capture does not show alike", only)...)
	only = nil
	for _, o := range c.Overlaps {
		if ho, ok := ho[ovKey{o.Name, keyOf(o.A), keyOf(o.B)}]; !ok || ho.Admitted != o.Admitted {
			only = append(only, o.String())
		}
	}
	v.Disagreements = append(v.Disagreements, listed("overlaps on the wire that the histories do not show alike", only)...)
	return v
}

// listed is one disagreement per item, at most maxListed, then a count.
func listed(what string, items []string) []string {
	var out []string
	for i, s := range items {
		if i == maxListed {
			out = append(out, fmt.Sprintf("%s: %d more", what, len(items)-maxListed))
			break
		}
		out = append(out, what+": "+s)
	}
	return out
}

// Markdown is the report's section: both views' verdicts side by side,
// the disagreements, and what the capture cannot see.
func (v *Views) Markdown() string {
	var b strings.Builder
	b.WriteString("## Two views: the clients' histories and the capture\n\n")
	if v.Capture == nil {
		b.WriteString("No capture in the results: the capture's view is not judged.\n")
		return b.String()
	}
	h, c := v.History, v.Capture
	b.WriteString("| | clients' histories | capture |\n|---|---|---|\n")
	fmt.Fprintf(&b, "| holds | %d | %d |\n", len(h.Holds), len(c.Holds))
	cell := func(q analysis.Requirement) string { return fmt.Sprintf("%s (%s)", q.Verdict, q.Value) }
	fmt.Fprintf(&b, "| mutual exclusion | %s | %s |\n", cell(h.MutualExclusion), cell(c.MutualExclusion))
	fmt.Fprintf(&b, "| fencing | %s | %s |\n", cell(h.Fencing), cell(c.Fencing))
	fmt.Fprintf(&b, "| clients dropped from the list | %d | %d |\n\n", len(h.Dropped), len(c.Dropped))
	fmt.Fprintf(&b, "The capture: %s.\n\n", c.facts())
	if len(v.Disagreements) == 0 {
		b.WriteString("The views agree: the same holds (client ID, name, fence), the same overlaps, the same verdicts.\n\n")
	} else {
		fmt.Fprintf(&b, "**%d disagreements:**\n\n", len(v.Disagreements))
		for _, d := range v.Disagreements {
			fmt.Fprintf(&b, "- %s\n", d)
		}
		b.WriteString("\n")
	}
	b.WriteString("On the wire a hold runs from the grant leaving its server to the release leaving its client " +
		"(early at the start, late at the end against the client's own view; a correct server's next grant still leaves after it). " +
		"The capture cannot see whether a client acted on a grant: it applies the client's rules to what reached it " +
		"(a grant from a server incarnation its global state lists as DOWN is discarded as late, a second answer ignored), " +
		"and cannot tell a crash from a cut-off but by what the client still sends (one silent once dropped is taken to have stopped then).\n")
	return b.String()
}
