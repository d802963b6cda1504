package slurmcluster

import (
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestPinBlocks(t *testing.T) {
	for _, c := range []struct {
		cpus       []int
		nodes, per int
		want       []string
		err        string
	}{
		{cpus: []int{0, 1}, nodes: 2, per: 1, want: []string{"0", "1"}},
		{cpus: []int{0, 1, 2, 3}, nodes: 2, per: 2, want: []string{"0,1", "2,3"}},
		// An affinity mask with holes: the blocks follow the mask.
		{cpus: []int{1, 3, 4, 7}, nodes: 2, per: 2, want: []string{"1,3", "4,7"}},
		{cpus: []int{0, 1, 2}, nodes: 1, per: 2, want: []string{"0,1"}},
		{cpus: []int{0, 1}, nodes: 3, per: 1, err: "3 nodes of 1 CPUs need 3 CPUs, this process may use 2"},
		{cpus: []int{0, 1}, nodes: 2, per: 2, err: "need 4 CPUs"},
	} {
		got, err := pinBlocks(c.cpus, c.nodes, c.per)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("pinBlocks(%v, %d, %d): error %v, want one with %q", c.cpus, c.nodes, c.per, err, c.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("pinBlocks(%v, %d, %d) = %q, %v; want %q", c.cpus, c.nodes, c.per, got, err, c.want)
		}
	}
}

func TestCPUsOf(t *testing.T) {
	var set unix.CPUSet
	for _, c := range []int{0, 5, 64, 70} {
		set.Set(c)
	}
	if got, want := cpusOf(&set), []int{0, 5, 64, 70}; !slices.Equal(got, want) {
		t.Errorf("cpusOf = %v, want %v", got, want)
	}
}
