package slurmcluster

import (
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// cpusOf lists the CPUs in set, in increasing order.
func cpusOf(set *unix.CPUSet) []int {
	var out []int
	for i := 0; i < len(set)*64; i++ {
		if set.IsSet(i) {
			out = append(out, i)
		}
	}
	return out
}

// pinBlocks splits cpus into nodes blocks of per CPUs each, in order, as
// taskset -c lists: node i gets cpus[i*per : (i+1)*per]. It refuses a
// cluster that needs more CPUs than there are: two nodes bound to one CPU
// would share it, which is what pinning is meant to rule out.
func pinBlocks(cpus []int, nodes, per int) ([]string, error) {
	if nodes*per > len(cpus) {
		return nil, fmt.Errorf("slurm cluster: pin: %d nodes of %d CPUs need %d CPUs, this process may use %d (%v)", nodes, per, nodes*per, len(cpus), cpus)
	}
	out := make([]string, nodes)
	for i := range out {
		var b strings.Builder
		for j, c := range cpus[i*per : (i+1)*per] {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Itoa(c))
		}
		out[i] = b.String()
	}
	return out, nil
}
