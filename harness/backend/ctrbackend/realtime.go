package ctrbackend

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/moby/moby/client"
	"golang.org/x/sys/unix"

	"tokenbed/harness/backend"
)

// Real-time scheduling of the agents in containers.
//
// The netns backend's agents run SCHED_FIFO (harness run --rt-priority,
// default 5, below the userspace engine's relay at 10): dozens of agents
// share two cores where the paper's each had a machine (002 §3.3), and at
// normal priority a busy neighbour adds milliseconds to a pass's tail. An
// agent in a container asks for the same (agent --rt-priority) and needs
// two grants for it:
//
//   - CAP_SYS_NICE, its only capability (--cap-add SYS_NICE). An
//     unprivileged process could take SCHED_FIFO up to its RLIMIT_RTPRIO
//     instead, but raising that limit needs CAP_SYS_RESOURCE in the
//     runtime, which some hosts (this one) withhold from Docker: runc then
//     fails to start the container;
//   - where the kernel schedules real-time tasks per cgroup
//     (CONFIG_RT_GROUP_SCHED, cgroup v1 cpu.rt_runtime_us), a real-time
//     budget for the container's cpu cgroup: without one the request fails
//     with EPERM, and Docker's own parent (/docker) has none. The run gets a
//     parent cgroup of its own, /tokenbed-RUNID, with a budget, and each
//     agent container a share of it (--cgroup-parent, --cpu-rt-runtime).
//     The share also bounds what a real-time agent can take from the
//     machine.
//
// Without them the agents of a container run would be the only ones at
// normal priority, and a pass's tail would move with the machine's load:
// BenchmarkPassLatency splits the cost.
//
// Equivalent to, for a run of N agents:
//
//	mkdir /sys/fs/cgroup/cpu/tokenbed-RUNID
//	echo $(((N+1)*SHARE)) > /sys/fs/cgroup/cpu/tokenbed-RUNID/cpu.rt_runtime_us
//	docker run ... --cgroup-parent /tokenbed-RUNID --cpu-rt-runtime SHARE --cap-add SYS_NICE ...

// rtShare is the real-time budget each agent container asks for, per
// period of its cgroup (1 s, the kernel's default): the CPU time it may
// use at SCHED_FIFO in that second. An agent that used it up would stop
// until the period ends, so it is several times what the busiest agent of
// the endurance run used (BenchmarkPassLatency reports it). The run takes
// less when the machine has less free (rtMinShare at the least).
const (
	rtShare    = 30 * time.Millisecond
	rtMinShare = 10 * time.Millisecond
)

// rtPlan is how the run's agents get real-time scheduling.
type rtPlan struct {
	parent string // the run's cgroup parent ("/tokenbed-RUNID"), "" if none
	share  int64  // µs per period of each agent container
	note   string // why the agents may not get it ("" if they may)
}

// cgroupName is the run's parent cgroup, in every hierarchy.
func cgroupName(runID string) string { return "tokenbed-" + runID }

// cgroupMounts returns the mount points of the cgroup hierarchies, v1
// and v2, and which of them holds the v1 cpu controller ("" if none).
func cgroupMounts() (all []string, cpu string, err error) {
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, "", err
	}
	for _, line := range strings.Split(string(mi), "\n") {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTS
		pre, post, ok := strings.Cut(line, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(g) < 3 || (g[0] != "cgroup" && g[0] != "cgroup2") {
			continue
		}
		all = append(all, f[4])
		for _, o := range strings.Split(g[2], ",") {
			if g[0] == "cgroup" && o == "cpu" {
				cpu = f[4]
			}
		}
	}
	return all, cpu, nil
}

func readInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// freeRTRuntime is the real-time runtime (µs per period) of the cpu
// hierarchy's root not yet given to one of its groups.
func freeRTRuntime(cpu string) (int64, error) {
	free, err := readInt(filepath.Join(cpu, "cpu.rt_runtime_us"))
	if err != nil {
		return 0, err
	}
	ents, err := os.ReadDir(cpu)
	if err != nil {
		return 0, err
	}
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		n, err := readInt(filepath.Join(cpu, e.Name(), "cpu.rt_runtime_us"))
		if err != nil {
			return 0, err
		}
		free -= n
	}
	return free, nil
}

// rtBudget divides free µs of real-time runtime per period among n
// agents: each agent's share (rtShare, or less when free is short, but
// not under rtMinShare: 0 then) and what the run's group takes. The group
// holds one share more than the agents: a restarted agent's container
// may be created before its predecessor's group is gone.
func rtBudget(free int64, n int) (share, total int64) {
	share = min(rtShare.Microseconds(), free/int64(n+1))
	if share < rtMinShare.Microseconds() {
		return 0, 0
	}
	return share, share * int64(n+1)
}

// planRealtime gives the run a real-time budget where the kernel needs
// one (see the top of this file). Not getting one is not an error: the
// agents then run at normal priority, as the note (logged) says.
func (b *Backend) planRealtime(ctx context.Context) (rtPlan, error) {
	info, err := b.cli.Info(ctx, client.InfoOptions{})
	if err != nil {
		return rtPlan{}, fmt.Errorf("ctrbackend: docker info: %w", err)
	}
	_, cpu, err := cgroupMounts()
	if err != nil {
		return rtPlan{}, err
	}
	if cpu == "" {
		// No v1 cpu controller: no real-time group scheduling to satisfy.
		return rtPlan{}, nil
	}
	if _, err := os.Stat(filepath.Join(cpu, "cpu.rt_runtime_us")); err != nil {
		return rtPlan{}, nil // the kernel schedules real-time tasks globally
	}
	if d := info.Info.CgroupDriver; d != "cgroupfs" {
		return rtPlan{note: fmt.Sprintf("the Docker engine's cgroup driver is %q, not cgroupfs: the run cannot give its containers a real-time budget", d)}, nil
	}
	n := 0
	for _, agents := range b.spec.Replicas {
		n += len(agents)
	}
	free, err := freeRTRuntime(cpu)
	if err != nil {
		return rtPlan{}, fmt.Errorf("ctrbackend: real-time budget in %s: %w", cpu, err)
	}
	share, total := rtBudget(free, n)
	if share == 0 {
		return rtPlan{note: fmt.Sprintf("%d µs of real-time runtime per second left in %s, %d agents need at least %v each", free, cpu, n, rtMinShare)}, nil
	}
	name := cgroupName(b.spec.RunID)
	dir := filepath.Join(cpu, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return rtPlan{}, fmt.Errorf("ctrbackend: cgroup of the run: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cpu.rt_runtime_us"), []byte(strconv.FormatInt(total, 10)), 0); err != nil {
		// Another run took the budget since it was read.
		return rtPlan{parent: "/" + name, note: fmt.Sprintf("real-time budget of %s: %v", dir, err)}, nil
	}
	return rtPlan{parent: "/" + name, share: share}, nil
}

// removeCgroups removes the run's parent cgroup from every hierarchy once
// its containers' groups are gone (the runtime removes them as each
// container is removed, which may take a moment).
//
// Equivalent to: `rmdir /sys/fs/cgroup/*/tokenbed-RUNID`.
func removeCgroups(ctx context.Context, runID string) error {
	if !backend.ValidRunID(runID) {
		return nil
	}
	mounts, _, err := cgroupMounts()
	if err != nil {
		return err
	}
	deadline := time.Now().Add(10 * time.Second)
	var errs []error
	for _, m := range mounts {
		dir := filepath.Join(m, cgroupName(runID))
		for {
			err := os.Remove(dir)
			if err == nil || errors.Is(err, os.ErrNotExist) {
				break
			}
			if !errors.Is(err, unix.EBUSY) || ctx.Err() != nil || time.Now().After(deadline) {
				errs = append(errs, fmt.Errorf("ctrbackend: remove cgroup %s: %w", dir, err))
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return errors.Join(errs...)
}

// leftoverCgroups lists the runs (runID, or every run when empty) whose
// parent cgroup is in some hierarchy.
func leftoverCgroups(runID string) ([]Object, error) {
	mounts, _, err := cgroupMounts()
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var objs []Object
	for _, m := range mounts {
		ents, err := os.ReadDir(m)
		if err != nil {
			return nil, err
		}
		for _, e := range ents {
			id, ok := strings.CutPrefix(e.Name(), "tokenbed-")
			if !ok || !e.IsDir() || !backend.ValidRunID(id) || (runID != "" && id != runID) || seen[id] {
				continue
			}
			seen[id] = true
			objs = append(objs, Object{Kind: "cgroup", ID: e.Name(), Name: e.Name(), RunID: id})
		}
	}
	return objs, nil
}
