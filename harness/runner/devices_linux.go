package runner

import (
	"errors"
	"fmt"
	"os"

	"github.com/vishvananda/netlink"

	"tokenbed/harness/backend"
	"tokenbed/netem"
)

// hostDevices names the own devices (netem.SourceTree) that the trees
// will create in the harness's own network namespace: those of receivers
// whose port is there (the container backend's bridge ports). The run
// registers them before creating them, so harness clean can remove them
// after a kill -9; devices in a namespace of the run go with it.
func hostDevices(order []string, trees map[string]netem.SourceTree, ports map[string]backend.Port) []string {
	self, err := os.Stat("/proc/self/ns/net")
	if err != nil {
		return nil
	}
	var devs []string
	for _, inst := range order {
		ns, err := os.Stat(ports[inst].NSPath)
		if err != nil || !os.SameFile(ns, self) {
			continue
		}
		for _, p := range trees[inst].Plan(nil) {
			if p.Own {
				devs = append(devs, p.Device)
			}
		}
	}
	return devs
}

// removeIFB removes the IFB device name from the caller's namespace if it
// is there. A link of another type by that name is not the run's: it is
// left alone, with an error.
func removeIFB(name string) (removed bool, err error) {
	l, err := netlink.LinkByName(name)
	var nf netlink.LinkNotFoundError
	if errors.As(err, &nf) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("device %s: %w", name, err)
	}
	if l.Type() != "ifb" {
		return false, fmt.Errorf("device %s is a %s, not the run's IFB device: left alone", name, l.Type())
	}
	if err := netlink.LinkDel(l); err != nil {
		return false, fmt.Errorf("device %s: %w", name, err)
	}
	return true, nil
}
