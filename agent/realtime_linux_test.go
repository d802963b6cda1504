package main

import (
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"tokenbed/internal/testenv"
)

// --rt-priority puts every thread of the agent under SCHED_FIFO, and
// threads started afterwards inherit it.
func TestRealtimeAllThreads(t *testing.T) {
	testenv.RequireRoot(t, "CAP_SYS_NICE to set SCHED_FIFO")
	if err := realtime(100); err == nil {
		t.Error("priority 100 accepted")
	}
	if err := realtime(3); err != nil {
		t.Fatal(err)
	}
	defer func() {
		tasks, _ := os.ReadDir("/proc/self/task")
		for _, task := range tasks {
			var tid int
			for _, c := range task.Name() {
				tid = tid*10 + int(c-'0')
			}
			unix.SchedSetAttr(tid, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: 0}, 0) // back to SCHED_OTHER
		}
	}()
	// Make the runtime start more threads: blocking system calls from
	// many goroutines at once.
	done := make(chan bool)
	for i := 0; i < 8; i++ {
		go func() {
			var ts unix.Timespec
			ts.Nsec = 20e6
			unix.Nanosleep(&ts, nil)
			done <- true
		}()
	}
	for i := 0; i < 8; i++ {
		<-done
	}
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + task.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		// Fields after "(comm)": state is field 3; policy is field 41.
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		if policy := f[41-3]; policy != "1" {
			t.Errorf("thread %s: policy %s, want 1 (SCHED_FIFO)", task.Name(), policy)
		}
	}
	t.Logf("%d threads, all SCHED_FIFO", len(tasks))
}
