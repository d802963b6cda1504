// Package pmqos holds a request on the kernel's PM QoS CPU latency
// (/dev/cpu_dma_latency, Documentation/power/pm_qos_interface.rst): while
// it is held, no CPU enters an idle state whose exit latency is above the
// bound, and with a bound of 0 idle CPUs poll instead of halting.
//
// A run on real processes holds it because on a virtual machine a halted
// CPU is a descheduled vCPU: waking it takes the hypervisor, and a datagram
// waits meanwhile, in a way no steal counter shows
// (docs/studies/endurance.md). This is what cyclictest(8) does by default.
// The kernel drops the request when the file is closed, so a harness that
// crashes leaves the host's idle states as they were.
package pmqos

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"time"
)

// Path is the PM QoS CPU latency device.
const Path = "/dev/cpu_dma_latency"

// Request is a held bound.
type Request struct {
	f     *os.File
	Bound time.Duration
}

// Hold asks that no CPU take longer than bound (whole microseconds, at
// most ~35 minutes) to leave idle, until Release. It fails, saying why,
// where the device is missing or not writable (not root).
func Hold(bound time.Duration) (*Request, error) {
	us := bound.Microseconds()
	if bound < 0 || us > 1<<31-1 {
		return nil, fmt.Errorf("pmqos: bound %v: want 0 to %v", bound, time.Duration(1<<31-1)*time.Microsecond)
	}
	f, err := os.OpenFile(Path, os.O_WRONLY, 0)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("pmqos: %s: the kernel has no PM QoS CPU latency device (CONFIG_CPU_IDLE / PM QoS): %w", Path, err)
		}
		return nil, fmt.Errorf("pmqos: %w", err)
	}
	// The device takes a native-endian s32 in microseconds (or its
	// value in hexadecimal text); every architecture the harness runs on
	// is little-endian.
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], uint32(us))
	if _, err := f.Write(b[:]); err != nil {
		f.Close()
		return nil, fmt.Errorf("pmqos: %s: %w", Path, err)
	}
	return &Request{f: f, Bound: time.Duration(us) * time.Microsecond}, nil
}

// Release drops the request.
func (r *Request) Release() error { return r.f.Close() }

// Current is the bound in force: the least of every request held on the
// host (the kernel's default, 2000 s, when none is).
func Current() (time.Duration, error) {
	b, err := os.ReadFile(Path)
	if err != nil {
		return 0, fmt.Errorf("pmqos: %w", err)
	}
	if len(b) != 4 {
		return 0, fmt.Errorf("pmqos: %s: read %d bytes, want a 4-byte value", Path, len(b))
	}
	return time.Duration(int32(binary.LittleEndian.Uint32(b))) * time.Microsecond, nil
}
