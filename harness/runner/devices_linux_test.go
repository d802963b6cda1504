package runner

import (
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"

	"tokenbed/harness/backend"
	"tokenbed/netem"
)

// A tree toward a receiver whose port is in the harness's namespace (the
// container backend's bridge) registers its own devices; one whose port
// is in a namespace of the run (netns backend: the hub) does not, since
// the namespace takes its links with it.
func TestHostDevicesAreThoseInTheHarnessNamespace(t *testing.T) {
	tree := func(dev string) netem.SourceTree {
		st := netem.SourceTree{Link: "p1", Host: netip.MustParsePrefix("10.77.0.2/32"), Devices: dev}
		for i, a := range []string{"10.77.0.1", "10.77.0.3"} {
			p := netem.Profile{Delay: 5e6}
			if i == 1 {
				p.Duplicate = 10
			}
			st.Sources = append(st.Sources, netem.Source{Dest: netem.Dest{Prefix: netip.PrefixFrom(netip.MustParseAddr(a), 32), Profile: p},
				Via: []string{"p0", "p2"}[i]})
		}
		return st
	}
	trees := map[string]netem.SourceTree{"A": tree("tbfeed010"), "B": tree("tbfeed011")}
	ports := map[string]backend.Port{"A": {NSPath: "/proc/self/ns/net"}, "B": {NSPath: "/proc/1/ns/does-not-exist"}}
	got := hostDevices([]string{"A", "B"}, trees, ports)
	if len(got) != 1 || !strings.HasPrefix(got[0], "tbfeed010") {
		t.Errorf("hostDevices = %v, want A's one own device (tbfeed010-…)", got)
	}
}

// After a kill -9, harness clean removes the IFB devices
// a dead run registered in the harness's namespace, and nothing else: not
// another run's device, not a link of another type under a registered name.
func TestCleanDeadRemovesRegisteredDevices(t *testing.T) {
	requireRoot(t)
	id := NewRunID()
	mine, decoy, notIFB := id+"0-11", "tbdec0de0-11", id+"1-11"
	for _, l := range []netlink.Link{
		&netlink.Ifb{LinkAttrs: netlink.LinkAttrs{Name: mine}},
		&netlink.Ifb{LinkAttrs: netlink.LinkAttrs{Name: decoy}},
		&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: notIFB}},
	} {
		if err := netlink.LinkAdd(l); err != nil {
			t.Skipf("cannot add %s link %s here: %v", l.Type(), l.Attrs().Name, err)
		}
		name := l.Attrs().Name
		t.Cleanup(func() {
			if l, err := netlink.LinkByName(name); err == nil {
				netlink.LinkDel(l)
			}
		})
	}
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	var said []string
	err := CleanDead(Entry{RunID: id, PID: dead.Process.Pid, Devices: []string{mine, notIFB}}, func(s string) { said = append(said, s) })
	if err == nil || !strings.Contains(err.Error(), notIFB+" is a bridge") {
		t.Errorf("CleanDead: %v, want an error naming the bridge it left alone", err)
	}
	if _, err := netlink.LinkByName(mine); err == nil {
		t.Errorf("the dead run's device %s is still there", mine)
	}
	for _, keep := range []string{decoy, notIFB} {
		if _, err := netlink.LinkByName(keep); err != nil {
			t.Errorf("%s was removed: %v", keep, err)
		}
	}
	if !slices.Contains(said, "removed device "+mine) {
		t.Errorf("clean said %q, want it to name %s", said, mine)
	}
}
