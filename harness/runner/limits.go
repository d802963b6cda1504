package runner

import (
	"fmt"

	"golang.org/x/sys/unix"

	"tokenbed/harness/capture"
)

// filesPerAgent is what the harness holds open per agent, measured at
// 150 agents (766 descriptors): its namespace, the engine's TUN device,
// the capture socket, the log's tailer, the process's pipes and pidfd;
// with a margin.
const filesPerAgent = 8

// ensureFiles checks, before anything is built, that the harness may
// open the descriptors n agents need, raising its soft RLIMIT_NOFILE
// toward the hard one if it must (the Go runtime already raises it at
// start; a harness run under a lowered hard limit fails here, by name,
// rather than halfway through the namespaces with EMFILE).
func ensureFiles(n int) error {
	need := uint64(filesPerAgent*n + 64)
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return err
	}
	if lim.Cur >= need {
		return nil
	}
	if lim.Max < need {
		return fmt.Errorf("%d agents need about %d open files, and the hard limit (RLIMIT_NOFILE) is %d: raise it (ulimit -Hn) or run fewer agents", n, need, lim.Max)
	}
	lim.Cur = need
	return unix.Setrlimit(unix.RLIMIT_NOFILE, &lim)
}

// captureRingBlocks sizes each interface's capture ring for n interfaces:
// the default (64 blocks of 64 KiB, 4 MiB) up to 48 interfaces, the 16
// replicas of make endurance, then smaller, down to 16 blocks (1 MiB) from
// 192 on. Each ring is locked kernel memory mapped into the harness: 4 MiB
// each made its resident memory 734 MB at 150 agents, and would be 1.4 GB
// at 360, where each interface carries only its own agent's few passes.
func captureRingBlocks(n int) int {
	if n <= 48 {
		return capture.DefaultRingBlocks
	}
	return max(16, capture.DefaultRingBlocks*48/n)
}
