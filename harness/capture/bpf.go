package capture

import (
	"errors"
	"fmt"

	"golang.org/x/net/bpf"
)

// UDPBPF returns a classic BPF program for Config.BPF that keeps the UDP
// datagrams from or to one of ports on an Ethernet interface: the kernel
// drops everything else before it reaches the ring, which costs less than
// a userspace Filter on a busy link. It is the program of the pcap filter
// "udp port P" (IPv4, first fragments only; IPv6 without extension
// headers), written out here because pure Go has no pcap filter compiler.
// Equivalent to: `tcpdump -dd 'udp port P'`.
func UDPBPF(ports ...uint16) ([]bpf.RawInstruction, error) {
	if len(ports) == 0 || len(ports) > 32 {
		return nil, errors.New("capture: UDPBPF: want 1 to 32 ports")
	}
	var a asm
	// Ports at off and off+2, from the IPv6 header's end (absolute) or
	// from the IPv4 header's end (X-relative).
	ports2 := func(indirect bool, off uint32) {
		for _, o := range []uint32{off, off + 2} {
			if indirect {
				a.op(bpf.LoadIndirect{Off: o, Size: 2})
			} else {
				a.op(bpf.LoadAbsolute{Off: o, Size: 2})
			}
			for _, p := range ports {
				a.jump(bpf.JumpEqual, uint32(p), "keep", "")
			}
		}
		a.ja("drop") // none matched
	}
	a.op(bpf.LoadAbsolute{Off: 12, Size: 2}) // EtherType
	a.jump(bpf.JumpEqual, 0x86dd, "", "ip4")
	a.op(bpf.LoadAbsolute{Off: 14 + 6, Size: 1}) // IPv6 next header
	a.jump(bpf.JumpEqual, 17, "", "drop")
	ports2(false, 14+40)
	a.label("ip4")
	a.jump(bpf.JumpEqual, 0x0800, "", "drop")
	a.op(bpf.LoadAbsolute{Off: 14 + 9, Size: 1}) // IPv4 protocol
	a.jump(bpf.JumpEqual, 17, "", "drop")
	a.op(bpf.LoadAbsolute{Off: 14 + 6, Size: 2}) // flags and fragment offset
	a.jump(bpf.JumpBitsSet, 0x1fff, "drop", "")  // a later fragment has no UDP header
	a.op(bpf.LoadMemShift{Off: 14})              // X = IPv4 header length
	ports2(true, 14)
	a.label("keep")
	a.op(bpf.RetConstant{Val: 0x40000}) // keep the whole packet
	a.label("drop")
	a.op(bpf.RetConstant{Val: 0})
	return a.assemble()
}

// asm is a tiny assembler with labels for forward jumps ("" = next).
type asm struct {
	prog   []bpf.Instruction
	jumps  map[int][2]string
	labels map[string]int
}

func (a *asm) op(i bpf.Instruction) { a.prog = append(a.prog, i) }

func (a *asm) jump(cond bpf.JumpTest, val uint32, ifTrue, ifFalse string) {
	if a.jumps == nil {
		a.jumps = map[int][2]string{}
	}
	a.jumps[len(a.prog)] = [2]string{ifTrue, ifFalse}
	a.prog = append(a.prog, bpf.JumpIf{Cond: cond, Val: val})
}

// ja jumps to label unconditionally.
func (a *asm) ja(label string) {
	if a.jumps == nil {
		a.jumps = map[int][2]string{}
	}
	a.jumps[len(a.prog)] = [2]string{label, ""}
	a.prog = append(a.prog, bpf.Jump{})
}

func (a *asm) label(name string) {
	if a.labels == nil {
		a.labels = map[string]int{}
	}
	a.labels[name] = len(a.prog)
}

func (a *asm) assemble() ([]bpf.RawInstruction, error) {
	for at, targets := range a.jumps {
		var skip [2]uint8
		for k, name := range targets {
			if name == "" {
				continue
			}
			to, ok := a.labels[name]
			if !ok || to <= at || to-at-1 > 255 {
				return nil, fmt.Errorf("capture: bpf: bad jump from %d to %q", at, name)
			}
			skip[k] = uint8(to - at - 1)
		}
		switch j := a.prog[at].(type) {
		case bpf.JumpIf:
			j.SkipTrue, j.SkipFalse = skip[0], skip[1]
			a.prog[at] = j
		case bpf.Jump:
			j.Skip = uint32(skip[0])
			a.prog[at] = j
		}
	}
	return bpf.Assemble(a.prog)
}
