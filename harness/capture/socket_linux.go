package capture

import (
	"errors"
	"fmt"
	"reflect"
	"syscall"
	"time"

	"github.com/gopacket/gopacket/afpacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"tokenbed/internal/nsenter"
)

// linkInfo is what the kernel says about a device.
type linkInfo struct {
	index  int    // kernel ifindex in its namespace
	mtu    int    //
	arphrd uint16 // ARPHRD_* device type
}

// open opens an AF_PACKET socket on ic.Device inside ic's namespace.
func open(ic Interface, cfg Config) (*iface, error) {
	wrap := func(err error) error { return fmt.Errorf("capture: interface %s: %w", ic.Name, err) }
	ns := netns.None()
	where := "the caller's network namespace"
	switch {
	case ic.NetNSPath != "":
		h, err := netns.GetFromPath(ic.NetNSPath)
		if err != nil {
			return nil, wrap(fmt.Errorf("netns %s: %w", ic.NetNSPath, err))
		}
		defer h.Close()
		ns, where = h, "netns "+ic.NetNSPath
	case ic.NetNS > 0:
		ns, where = ic.NetNS, fmt.Sprintf("netns handle %d", int(ic.NetNS))
	}

	var (
		tp   *afpacket.TPacket
		info linkInfo
		err  error
	)
	if ns.IsOpen() {
		// The socket stays bound to ns after the thread switches back.
		err = nsenter.Do(ns, func() (err error) {
			tp, info, err = openHere(ic.Device, cfg)
			return err
		})
		if err != nil && tp != nil {
			tp.Close() // opened, but the thread could not switch back
		}
	} else {
		tp, info, err = openHere(ic.Device, cfg)
	}
	if err != nil {
		return nil, wrap(err)
	}
	lt, err := linkType(info.arphrd)
	if err != nil {
		tp.Close()
		return nil, wrap(fmt.Errorf("device %s: %w", ic.Device, err))
	}
	desc := fmt.Sprintf("device %s (ifindex %d, mtu %d) in %s", ic.Device, info.index, info.mtu, where)
	if ic.Description != "" {
		desc = ic.Description + "; " + desc
	}
	return &iface{cfg: ic, lt: lt, desc: desc, tp: tp, start: time.Now()}, nil
}

// openHere opens the socket in the calling thread's namespace. Equivalent
// to what `tcpdump -i DEV` does: socket(AF_PACKET, SOCK_RAW, ETH_P_ALL),
// bind to the device, a TPACKET_V3 ring.
func openHere(dev string, cfg Config) (*afpacket.TPacket, linkInfo, error) {
	info, err := link(dev)
	if err != nil {
		return nil, info, err
	}
	// afpacket opens its socket without SOCK_CLOEXEC: every process the
	// harness starts afterwards would inherit every capture socket (at
	// 150 agents, 151 sockets in each agent; quadratic in the agents).
	// Held under ForkLock, as the standard library's own sockets
	// are, no fork can slip in before the flag is set.
	syscall.ForkLock.RLock()
	tp, err := afpacket.NewTPacket(
		afpacket.OptInterface(dev),
		afpacket.TPacketVersion3,
		afpacket.OptBlockSize(cfg.RingBlockSize),
		afpacket.OptNumBlocks(cfg.RingBlocks),
		afpacket.OptBlockTimeout(blockTimeout),
		afpacket.OptPollTimeout(pollTimeout),
	)
	if err == nil {
		err = closeOnExec(tp)
		if err != nil {
			tp.Close()
		}
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		return nil, info, fmt.Errorf("AF_PACKET socket on %s: %w", dev, err)
	}
	if len(cfg.BPF) > 0 {
		if err := tp.SetBPF(cfg.BPF); err != nil {
			tp.Close()
			return nil, info, fmt.Errorf("attaching the BPF filter on %s: %w", dev, err)
		}
	}
	return tp, info, nil
}

// link reads a device's index, MTU and type with ioctls. Equivalent to:
// `ip link show DEV`.
func link(dev string) (linkInfo, error) {
	var info linkInfo
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return info, err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq(dev)
	if err != nil {
		return info, fmt.Errorf("device %q: %w", dev, err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFINDEX, ifr); err != nil {
		return info, fmt.Errorf("device %q: %w", dev, err)
	}
	info.index = int(ifr.Uint32())
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFMTU, ifr); err != nil {
		return info, fmt.Errorf("device %q: mtu: %w", dev, err)
	}
	info.mtu = int(ifr.Uint32())
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFHWADDR, ifr); err != nil {
		return info, fmt.Errorf("device %q: type: %w", dev, err)
	}
	info.arphrd = ifr.Uint16() // sa_family of ifr_hwaddr
	return info, nil
}

// linkType maps a device type to the pcap link type of what a SOCK_RAW
// packet socket reads on it.
func linkType(arphrd uint16) (layers.LinkType, error) {
	switch arphrd {
	case unix.ARPHRD_ETHER, unix.ARPHRD_LOOPBACK:
		return layers.LinkTypeEthernet, nil
	case unix.ARPHRD_NONE: // TUN: the frame starts at the IP header
		return layers.LinkTypeRaw, nil
	}
	return 0, errors.New("device type ARPHRD " + fmt.Sprint(arphrd) + " not supported (want Ethernet, loopback or TUN)")
}

// closeOnExec sets FD_CLOEXEC on tp's socket. afpacket does not export
// the descriptor; reflection reads its unexported fd field (reading is
// allowed; a changed field name is an error, not a silent leak).
func closeOnExec(tp *afpacket.TPacket) error {
	f := reflect.ValueOf(tp).Elem().FieldByName("fd")
	if !f.IsValid() || f.Kind() != reflect.Int {
		return fmt.Errorf("afpacket.TPacket has no fd field: cannot set close-on-exec on the capture socket")
	}
	fd := int(f.Int())
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC); err != nil {
		return fmt.Errorf("close-on-exec on the capture socket: %w", err)
	}
	return nil
}

// socketFD returns tp's descriptor (tests).
func socketFD(tp *afpacket.TPacket) int {
	return int(reflect.ValueOf(tp).Elem().FieldByName("fd").Int())
}
