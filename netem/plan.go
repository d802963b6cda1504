package netem

import (
	"errors"
	"fmt"
	"net/netip"
)

// Dest is one destination of a per-destination tree: packets whose
// destination address is in Prefix get Profile.
type Dest struct {
	Prefix  netip.Prefix
	Profile Profile
}

// Source is one sender of a SourceTree: packets from Prefix toward the
// tree's host get Profile.
type Source struct {
	Dest
	// Via is the link, in the tree's namespace, whose ingress sees this
	// sender's packets (its port on the bridge). It is needed only when
	// the sender's profile duplicates (see SourceTree).
	Via string
	// MayDuplicate says that a later Tree.Change may give this sender a
	// duplicating profile: it is placed as if Profile duplicated, since
	// the placement cannot change under running traffic.
	MayDuplicate bool
}

func (s Source) duplicates() bool { return s.MayDuplicate || s.Profile.Duplicate > 0 }

// SourceTree is per-sender impairment on the queue toward one host: an
// HTB tree on Link with a netem leaf per sender, keyed by source address
// (see ApplySourceTree), except for senders whose profile duplicates.
//
// Since Linux commit ec8e0e3d7ade ("net/sched: Restrict conditions for
// adding duplicating netems to qdisc tree", 6.16, backported to the 6.1,
// 6.6 and 6.12 stable series; 6.1.176 in the UML guest has it) netem's
// change checks every netem on the device (check_netem_in_tree: the root
// and every qdisc in the device's qdisc hash) and refuses with "netem:
// cannot mix duplicating netems with other netems in tree" when the new
// netem or any other one on the device duplicates. So a duplicating netem
// must be the only netem on its device. A duplicating sender therefore
// gets a device of its own: an IFB device whose root is that sender's
// netem, fed by a u32 filter on the ingress of Via (the sender's port)
// that redirects the packets toward Host there. IFB hands them back to
// Via's receive path after netem, so they cross the bridge and reach the
// host's queue, where no leaf matches them any more. The impairment still
// happens after the packet left the sender's own interface, so a capture
// there sees every packet before impairment, as with a leaf in the tree.
type SourceTree struct {
	// Link is the interface whose egress leads to the host.
	Link string
	// Host is the host's address behind Link: own-device filters match
	// it as destination.
	Host netip.Prefix
	// Devices prefixes the names of own devices (IFB); "" means Link.
	// Names are PREFIX-N with N the sender's class minor in hex, cut to
	// the kernel's 15 characters.
	Devices string
	Sources []Source
}

// Placement says where a SourceTree puts one sender's netem.
type Placement struct {
	Source netip.Prefix
	// Own: on a device of its own (Device), not a leaf of the tree.
	Own    bool
	Device string
	// Minor is the sender's class (tree leaf) or the number in its own
	// device's name.
	Minor uint16
	// Err, when set, says why the kernel layout cannot take this sender:
	// ApplySourceTree refuses the tree, and the caller may impair this
	// direction another way (the userspace engine). It wraps
	// ErrCannotPlace.
	Err error
}

// ErrCannotPlace is matched (errors.Is) by a Placement.Err.
var ErrCannotPlace = errors.New("the kernel cannot take this duplicating netem")

// ErrSharedDuplicate is matched (errors.Is) by the error of Add,
// Qdisc.Change and Tree.Change when the kernel refuses a duplicating
// netem beside other netems on one device (see SourceTree). Kernels
// without that check, or with it reverted, accept such a tree; a
// SourceTree never builds one. For a SourceTree sender whose profile will
// duplicate later, set MayDuplicate.
var ErrSharedDuplicate = errors.New("this kernel refuses a duplicating netem beside other netems on one device")

// Plan says where Apply puts each sender, in order, and which senders the
// kernel layout cannot take and why. ownDevices says whether this kernel
// can give a sender a device of its own (CheckOwnDevice); it is not
// consulted unless a sender needs one. Plan does no I/O.
func (t SourceTree) Plan(ownDevices error) []Placement {
	out := make([]Placement, len(t.Sources))
	others := fmt.Sprintf("%d other senders", len(t.Sources)-1)
	if len(t.Sources) == 2 {
		others = "another sender"
	}
	for i, s := range t.Sources {
		p := Placement{Source: s.Prefix, Minor: uint16(treeFirstMinor + i)}
		switch {
		case !s.duplicates():
		case len(t.Sources) == 1:
			// Alone in the tree, hence alone on the device: allowed.
		case s.Via == "":
			p.Err = fmt.Errorf("sources[%d] (%s) duplicates and shares %s with %s, and its ingress link (Via) is not known: %w", i, s.Prefix, t.Link, others, ErrCannotPlace)
		case !t.Host.IsValid():
			p.Err = fmt.Errorf("sources[%d] (%s) duplicates and needs its own device, but the tree's Host is not set: %w", i, s.Prefix, ErrCannotPlace)
		case t.Host.Addr().Is4() != s.Prefix.Addr().Is4():
			p.Err = fmt.Errorf("sources[%d] (%s) and Host %s are of different IP families: %w", i, s.Prefix, t.Host, ErrCannotPlace)
		case ownDevices != nil:
			p.Err = fmt.Errorf("sources[%d] (%s) duplicates and shares %s with %s, and this kernel cannot give it a device of its own (%v): %w", i, s.Prefix, t.Link, others, ownDevices, ErrCannotPlace)
		default:
			p.Own = true
			p.Device = ownDeviceName(t.devices(), p.Minor)
		}
		out[i] = p
	}
	return out
}

func (t SourceTree) devices() string {
	if t.Devices != "" {
		return t.Devices
	}
	return t.Link
}

// maxIfName is the longest interface name Linux takes (IFNAMSIZ-1).
const maxIfName = 15

func ownDeviceName(prefix string, minor uint16) string {
	suffix := fmt.Sprintf("-%x", minor)
	if len(prefix)+len(suffix) > maxIfName {
		prefix = prefix[:maxIfName-len(suffix)]
	}
	return prefix + suffix
}
