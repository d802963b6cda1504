// Package netlinkdump retries netlink dumps that the kernel interrupted.
//
// A dump (a list of links, addresses, routes or filters) is read in several
// messages; if the table changes between them, the kernel marks the reply
// NLM_F_DUMP_INTR and vishvananda/netlink returns its partial result with
// ErrDumpInterrupted. On a host where other runs create and delete links at
// the same time (parallel test packages, concurrent runs of the harness),
// that happens, and the answer is to ask again.
package netlinkdump

import (
	"errors"

	"github.com/vishvananda/netlink"
)

// Attempts bounds the retries: a table that changes on every one of them
// is reported rather than spun on.
const Attempts = 10

// Retry calls list until its dump was not interrupted, at most Attempts
// times, and returns the last result and error.
func Retry[T any](list func() (T, error)) (T, error) {
	var v T
	var err error
	for i := 0; i < Attempts; i++ {
		v, err = list()
		if !errors.Is(err, netlink.ErrDumpInterrupted) {
			return v, err
		}
	}
	return v, err
}
