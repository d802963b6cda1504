package ctrbackend

import (
	"fmt"
	"testing"
	"time"

	"tokenbed/harness/runner/runnertest"
)

// A partition step in containers: the cut of A,B from C,D
// holds for its 20 s (paper time; 2 s of wall time at time scale 10) on
// every direction between the sides and on none within them, and the token
// crosses before and after but never during it, as in the simulator and
// in namespaces (harness/runner's TestPartitionCutsTheLinksBetweenGroups).
func TestRunInContainersPartition(t *testing.T) {
	requireDocker(t)
	impair := hostImpairment()
	before := dockerState(t)
	dir, _, _ := runInContainers(t, fmt.Sprintf(runnertest.PartitionExperiment, 10.0), impair)
	runnertest.CheckPartition(t, dir, 20*time.Second, 500*time.Millisecond)
	if after := dockerState(t); after != before {
		t.Errorf("Docker state changed by the run:\nbefore %s\nafter  %s", before, after)
	}
}
