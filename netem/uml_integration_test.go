package netem

import (
	"testing"

	"tokenbed/internal/uml/umltest"
)

// reexecInUML returns false when the test body should run here: inside
// the User Mode Linux guest, or on a host whose kernel has netem.
// Otherwise it runs this one test in a guest with real sch_netem, reports
// its output and result, and returns true (the caller returns at once).
func reexecInUML(t *testing.T, modules []string) bool {
	t.Helper()
	needRoot(t)
	return umltest.Reexec(t, umltest.Options{Modules: modules, RunOnHost: hostHasNetem})
}
