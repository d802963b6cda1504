package main

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// realtime puts every thread of the process under SCHED_FIFO at prio.
// Threads the Go runtime starts later are cloned from these and inherit
// it. A testbed packs many agents on few cores where the paper gave each
// its own machine: at real-time priority an agent that wakes takes a core
// at once instead of queueing behind batch work (a test build, say).
func realtime(prio int) error {
	if prio < 1 || prio > 99 {
		return fmt.Errorf("priority %d: want 1-99", prio)
	}
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return err
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: uint32(prio)}
		if err := unix.SchedSetAttr(tid, &attr, 0); err != nil {
			return fmt.Errorf("thread %d: %w", tid, err)
		}
	}
	return nil
}
