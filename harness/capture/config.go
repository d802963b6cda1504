package capture

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/vishvananda/netns"
	"golang.org/x/net/bpf"

	"tokenbed/internal/capturefile"
)

// Defaults of Config.
const (
	DefaultSnapLen       = capturefile.SnapLen
	DefaultFlushInterval = 100 * time.Millisecond
	// Many small blocks rather than a few big ones: the kernel hands a
	// block over when it is full or blockTimeout after its first packet,
	// so at token-passing rates each block holds a handful of packets and
	// the ring rides out a reader stall of about RingBlocks×blockTimeout
	// (640 ms; 8 blocks, 80 ms, dropped packets on a loaded 2-CPU host).
	DefaultRingBlockSize  = 64 << 10
	DefaultRingBlocks     = 64
	DefaultAnnotationName = capturefile.AnnotationName
	DefaultMaxPending     = 64 << 20
)

// Interface is one interface to capture.
type Interface struct {
	// Name is the pcapng interface name, conventionally "AGENT/LINK" (e.g.
	// "A/eth0"). Default: the namespace's base name and Device joined by
	// "/" when NetNSPath is set, else Device.
	Name string
	// Description is written, with where the interface was captured, into
	// the pcapng if_description.
	Description string
	// Device is the link's name inside its namespace, e.g. "eth0".
	Device string
	// NetNSPath is the network namespace, as a path: /run/netns/NAME,
	// /proc/PID/ns/net. Empty: see NetNS.
	NetNSPath string
	// NetNS is an open namespace handle, used when NetNSPath is empty; the
	// caller keeps ownership. 0 and -1 mean unset: capture in the namespace
	// of the thread that calls Start or Add.
	NetNS netns.NsHandle
}

// Config says what to capture.
type Config struct {
	Interfaces []Interface
	// Filter keeps packets in user space (nil: keep all). The kernel still
	// copies every packet into the ring; see BPF.
	Filter Filter
	// BPF is an optional classic BPF program attached to every socket, run
	// by the kernel before a packet reaches the ring (SO_ATTACH_FILTER).
	// A packet can slip into the ring between the socket's creation and the
	// filter's attachment: combine with Filter when that matters.
	BPF []bpf.RawInstruction
	// SnapLen is the most bytes kept per packet; DefaultSnapLen if zero.
	SnapLen int
	// FlushInterval bounds the time a record waits in memory before it is
	// written to the file (held FlushInterval/2 to be put in time order,
	// written every FlushInterval/4); DefaultFlushInterval if zero.
	FlushInterval time.Duration
	// RingBlockSize and RingBlocks size each socket's TPACKET_V3 ring
	// (RingBlockSize × RingBlocks bytes, RingBlockSize a multiple of the
	// page size); DefaultRingBlockSize and DefaultRingBlocks if zero.
	RingBlockSize int
	RingBlocks    int
	// MaxPending bounds the packet bytes held in memory waiting for the
	// file (DefaultMaxPending if zero). When the file cannot keep up, the
	// readers wait, the kernel rings fill, and the kernel drops and counts
	// packets (InterfaceStats.KernelDrops) instead of memory growing.
	MaxPending int
	// Comment is the pcapng section comment, e.g. the experiment and run ID.
	Comment string
	// AnnotationName names the annotation interface; DefaultAnnotationName
	// if empty.
	AnnotationName string
}

func (cfg Config) withDefaults() (Config, error) {
	if cfg.SnapLen == 0 {
		cfg.SnapLen = DefaultSnapLen
	}
	if cfg.FlushInterval == 0 {
		cfg.FlushInterval = DefaultFlushInterval
	}
	if cfg.RingBlockSize == 0 {
		cfg.RingBlockSize = DefaultRingBlockSize
	}
	if cfg.RingBlocks == 0 {
		cfg.RingBlocks = DefaultRingBlocks
	}
	if cfg.AnnotationName == "" {
		cfg.AnnotationName = DefaultAnnotationName
	}
	if cfg.MaxPending == 0 {
		cfg.MaxPending = DefaultMaxPending
	}
	switch {
	case cfg.SnapLen < 0:
		return cfg, fmt.Errorf("capture: snap length %d: must be positive", cfg.SnapLen)
	case cfg.FlushInterval < 0:
		return cfg, fmt.Errorf("capture: flush interval %v: must be positive", cfg.FlushInterval)
	case cfg.RingBlockSize <= 0 || cfg.RingBlockSize%os.Getpagesize() != 0:
		return cfg, fmt.Errorf("capture: ring block size %d: must be a positive multiple of the page size %d", cfg.RingBlockSize, os.Getpagesize())
	case cfg.RingBlocks <= 0:
		return cfg, fmt.Errorf("capture: ring blocks %d: must be positive", cfg.RingBlocks)
	case cfg.MaxPending < 0:
		return cfg, fmt.Errorf("capture: max pending %d: must be positive", cfg.MaxPending)
	}
	ifcs := make([]Interface, len(cfg.Interfaces))
	seen := map[string]bool{cfg.AnnotationName: true}
	for i, ifc := range cfg.Interfaces {
		ifc, err := ifc.withDefaults()
		if err != nil {
			return cfg, fmt.Errorf("capture: interfaces[%d]: %w", i, err)
		}
		if seen[ifc.Name] {
			return cfg, fmt.Errorf("capture: interfaces[%d]: name %q used twice (or by the annotation interface)", i, ifc.Name)
		}
		seen[ifc.Name] = true
		ifcs[i] = ifc
	}
	cfg.Interfaces = ifcs
	return cfg, nil
}

func (ifc Interface) withDefaults() (Interface, error) {
	if ifc.Device == "" {
		return ifc, errors.New("device: empty")
	}
	if ifc.NetNSPath != "" && ifc.NetNS > 0 {
		return ifc, errors.New("netns: both NetNSPath and NetNS set")
	}
	if ifc.Name == "" {
		ifc.Name = ifc.Device
		if ifc.NetNSPath != "" {
			ifc.Name = filepath.Base(ifc.NetNSPath) + "/" + ifc.Device
		}
	}
	return ifc, nil
}
