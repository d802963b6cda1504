package results

import (
	"fmt"
	"strconv"
	"strings"
)

// Instance names process name of replica r: the name itself in replica 0,
// NAME.rN in replica N > 0 ("A.r3"). It is the member name the process
// signs as, its log's file name and its namespace's suffix, so the harness
// and analysis must agree on it: this is the only place it is spelled.
func Instance(name string, replica int) string {
	if replica == 0 {
		return name
	}
	return fmt.Sprintf("%s.r%d", name, replica)
}

// ParseInstance undoes Instance: "A.r3" is A of replica 3, "A" is A of
// replica 0. A name whose suffix is not .rN with N > 0 is a replica-0 name.
func ParseInstance(inst string) (name string, replica int) {
	i := strings.LastIndex(inst, ".r")
	if i <= 0 {
		return inst, 0
	}
	n, err := strconv.Atoi(inst[i+2:])
	if err != nil || n <= 0 || strconv.Itoa(n) != inst[i+2:] {
		return inst, 0
	}
	return inst[:i], n
}
