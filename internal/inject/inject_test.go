package inject

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"tokenbed/internal/nsenter"
	"tokenbed/internal/testenv"
)

// udpPacket is an IPv4 UDP packet from src to dst carrying payload, with
// the given UDP checksum (not computed: the test sets it).
func udpPacket(src, dst netip.AddrPort, payload []byte, sum uint16) []byte {
	p := make([]byte, 28+len(payload))
	p[0], p[8], p[9] = 0x45, 64, syscall.IPPROTO_UDP
	binary.BigEndian.PutUint16(p[2:], uint16(len(p)))
	s, d := src.Addr().As4(), dst.Addr().As4()
	copy(p[12:], s[:])
	copy(p[16:], d[:])
	binary.BigEndian.PutUint16(p[20:], src.Port())
	binary.BigEndian.PutUint16(p[22:], dst.Port())
	binary.BigEndian.PutUint16(p[24:], uint16(8+len(payload)))
	binary.BigEndian.PutUint16(p[26:], sum)
	copy(p[28:], payload)
	return p
}

// TestUDPNoChecksum: the copy has a zero checksum and is otherwise the
// packet; fragments and non-UDP packets are refused.
func TestUDPNoChecksum(t *testing.T) {
	src, dst := netip.MustParseAddrPort("10.0.0.2:7400"), netip.MustParseAddrPort("10.0.0.1:7400")
	p := udpPacket(src, dst, []byte("FTxyz"), 0xbeef)
	q, ok := UDPNoChecksum(p)
	if !ok || q[26] != 0 || q[27] != 0 || string(q[28:]) != "FTxyz" || p[26] != 0xbe {
		t.Fatalf("UDPNoChecksum(%x) = %x, %v; want the checksum zeroed in a copy", p, q, ok)
	}
	frag := append([]byte(nil), p...)
	frag[6] = 0x20 // more fragments
	tcp := append([]byte(nil), p...)
	tcp[9] = syscall.IPPROTO_TCP
	for name, b := range map[string][]byte{"fragment": frag, "tcp": tcp, "short": p[:20]} {
		if _, ok := UDPNoChecksum(b); ok {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestSendSpoofsSourceIntoNamespace: a packet sent into a namespace of
// the test's own reaches a socket there with the source it carries, an
// address that namespace does not have.
func TestSendSpoofsSourceIntoNamespace(t *testing.T) {
	testenv.RequireRoot(t, "creates a network namespace and a raw socket in it")
	var b [4]byte
	rand.Read(b[:])
	name := fmt.Sprintf("tbinject-%x", b)
	h, err := nsenter.NewNamed(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		h.Close()
		if err := netns.DeleteNamed(name); err != nil {
			t.Errorf("removing namespace %s: %v", name, err)
		}
		if _, err := os.Stat("/run/netns/" + name); !os.IsNotExist(err) {
			t.Errorf("namespace %s left behind", name)
		}
	})
	var conn *net.UDPConn
	err = nsenter.Do(h, func() error {
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		if err := netlink.LinkSetUp(lo); err != nil {
			return err
		}
		conn, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	in, err := Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	dst := conn.LocalAddr().(*net.UDPAddr).AddrPort()
	src := netip.MustParseAddrPort("10.99.0.7:7400")
	pkt, ok := UDPNoChecksum(udpPacket(src, dst, []byte("replayed"), 0x1234))
	if !ok {
		t.Fatal("UDPNoChecksum refused the test's packet")
	}
	if err := in.Send(pkt); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 64)
	n, from, err := conn.ReadFromUDPAddrPort(buf)
	if err != nil {
		t.Fatalf("nothing received: %v", err)
	}
	if from.Addr().Unmap() != src.Addr() || from.Port() != src.Port() || string(buf[:n]) != "replayed" {
		t.Fatalf("received %q from %v; want %q from %v", buf[:n], from, "replayed", src)
	}
	if err := in.Send([]byte{0x60, 0, 0}); err == nil {
		t.Errorf("Send of a non-IPv4 packet: no error")
	}
}
