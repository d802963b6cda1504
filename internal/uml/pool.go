package uml

import (
	"context"
	"fmt"

	"golang.org/x/sys/unix"
)

// Pool runs up to one UML instance per host CPU at once, each pinned to its
// own CPU: a guest has a single CPU and pinned instances run about 4x
// faster than unpinned ones, so more instances than CPUs only add queueing
// inside the host scheduler. A Pool is safe for concurrent use.
type Pool struct {
	cpus []int
	free chan int
}

// NewPool makes a pool of n instances over the CPUs this process may run on
// (its affinity mask); n <= 0 means one per such CPU. It is an error to ask
// for more instances than there are CPUs.
func NewPool(n int) (*Pool, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("uml: reading this process's CPU set: %w", err)
	}
	all := cpuList(&set)
	if n <= 0 {
		n = len(all)
	}
	if n > len(all) {
		return nil, fmt.Errorf("uml: NewPool: %d instances asked, but this process may only run on %d CPUs %v", n, len(all), all)
	}
	p := &Pool{cpus: all[:n], free: make(chan int, n)}
	for _, c := range p.cpus {
		p.free <- c
	}
	return p, nil
}

// CPUs returns the host CPUs the pool pins its instances to.
func (p *Pool) CPUs() []int { return append([]int(nil), p.cpus...) }

// Run waits for a free CPU, then runs the job pinned to it (Job.CPU is
// overridden). It returns ctx's error if ctx ends while waiting.
func (p *Pool) Run(ctx context.Context, j Job) (*Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("uml: %w", err)
	}
	var cpu int
	select {
	case cpu = <-p.free:
	case <-ctx.Done():
		return nil, fmt.Errorf("uml: waiting for a free CPU: %w", ctx.Err())
	}
	defer func() { p.free <- cpu }()
	j.CPU = cpu
	return Run(ctx, j)
}

// cpuList lists the CPUs in set, in order.
func cpuList(set *unix.CPUSet) []int {
	var cpus []int
	for c := 0; c < len(set)*64 && len(cpus) < set.Count(); c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus
}
