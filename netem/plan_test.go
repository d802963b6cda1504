package netem

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/vishvananda/netns"
)

// planTree is a tree toward host .2 behind p1 with senders .1 (p0), .3
// (p2) and .4 (p3); dup[i] makes sender i duplicate.
func planTree(dup ...bool) SourceTree {
	st := SourceTree{Link: "p1", Host: netip.MustParsePrefix("10.77.0.2/32")}
	for i, a := range []string{"10.77.0.1", "10.77.0.3", "10.77.0.4"} {
		p := Profile{Delay: 5e6}
		if i < len(dup) && dup[i] {
			p.Duplicate = 10
		}
		st.Sources = append(st.Sources, Source{Dest: Dest{Prefix: netip.PrefixFrom(netip.MustParseAddr(a), 32), Profile: p}, Via: []string{"p0", "p2", "p3"}[i]})
	}
	return st
}

func TestPlanPutsDuplicatingSendersOnTheirOwnDevice(t *testing.T) {
	st := planTree(false, true, false)
	st.Sources[2].MayDuplicate = true // a later profile step duplicates
	got := st.Plan(nil)
	want := []Placement{
		{Source: st.Sources[0].Prefix, Minor: 0x10},
		{Source: st.Sources[1].Prefix, Minor: 0x11, Own: true, Device: "p1-11"},
		{Source: st.Sources[2].Prefix, Minor: 0x12, Own: true, Device: "p1-12"},
	}
	if len(got) != len(want) {
		t.Fatalf("Plan = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("placement %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestPlanNothingDuplicatesAllLeaves(t *testing.T) {
	for i, p := range planTree().Plan(errors.New("no ifb")) {
		if p.Own || p.Err != nil {
			t.Errorf("placement %d = %+v: nothing duplicates, every sender is a leaf (and the own-device capability is not consulted)", i, p)
		}
	}
}

// A duplicating sender alone in its tree (two agents) stays a leaf: it is
// the only netem on the device, which the kernel allows.
func TestPlanLoneDuplicatingSenderStaysALeaf(t *testing.T) {
	st := planTree(true)
	st.Sources = st.Sources[:1]
	st.Sources[0].Via = ""
	if p := st.Plan(errors.New("no ifb")); p[0].Own || p[0].Err != nil {
		t.Fatalf("Plan = %+v, want a plain leaf", p)
	}
}

// What the kernel layout cannot take is said per sender, with the reason,
// and wraps ErrCannotPlace: the caller can impair that direction another
// way.
func TestPlanSaysWhatTheKernelCannotTake(t *testing.T) {
	noIFB := errors.New("ifb: operation not supported")
	for _, c := range []struct {
		name  string
		edit  func(*SourceTree)
		caps  error
		wants string
	}{
		{"no ifb", func(*SourceTree) {}, noIFB, "cannot give it a device of its own (ifb: operation not supported)"},
		{"no via", func(s *SourceTree) { s.Sources[1].Via = "" }, nil, "sources[1] (10.77.0.3/32) duplicates and shares p1 with 2 other senders, and its ingress link (Via) is not known"},
		{"no host", func(s *SourceTree) { s.Host = netip.Prefix{} }, nil, "the tree's Host is not set"},
		{"families", func(s *SourceTree) { s.Host = netip.MustParsePrefix("fd00::2/128") }, nil, "different IP families"},
	} {
		st := planTree(false, true, false)
		c.edit(&st)
		p := st.Plan(c.caps)
		if p[0].Err != nil || p[2].Err != nil || p[0].Own || p[2].Own {
			t.Errorf("%s: non-duplicating senders must stay leaves: %+v", c.name, p)
		}
		if p[1].Own || !errors.Is(p[1].Err, ErrCannotPlace) || !strings.Contains(p[1].Err.Error(), c.wants) {
			t.Errorf("%s: placement of the duplicating sender = %+v, want ErrCannotPlace saying %q", c.name, p[1], c.wants)
		}
	}
}

// The old layout (a duplicating leaf beside others) is refused before the
// kernel is asked, with the reason; no root is needed for that.
func TestApplyRefusesDuplicateBesideOthersWithoutVia(t *testing.T) {
	var dests []Dest
	for _, s := range planTree(false, true, false).Sources {
		dests = append(dests, s.Dest)
	}
	_, err := ApplySourceTree(netns.None(), "p1", dests)
	if !errors.Is(err, ErrCannotPlace) || !strings.Contains(err.Error(), "sources[1] (10.77.0.3/32) duplicates") {
		t.Fatalf("ApplySourceTree with a duplicating sender among three = %v, want ErrCannotPlace naming sources[1]", err)
	}
}

func TestOwnDeviceNamesFitTheKernelLimit(t *testing.T) {
	if n := ownDeviceName("p3", 0x10); n != "p3-10" {
		t.Errorf("name %q, want p3-10", n)
	}
	n := ownDeviceName("veth1234567abcd", 0x1ff)
	if len(n) != maxIfName || !strings.HasSuffix(n, "-1ff") || !strings.HasPrefix(n, "veth1234567") {
		t.Errorf("long prefix gives %q (%d bytes), want the prefix cut to fit 15 with -1ff kept", n, len(n))
	}
}
