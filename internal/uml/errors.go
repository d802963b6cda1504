package uml

import (
	"errors"
	"fmt"
	"strings"
)

// Errors Run and Available return, for errors.Is. Each returned error also
// says what happened in words, with the end of the guest console when the
// guest is what failed.
var (
	// ErrNotInstalled: linux.uml is missing or does not run.
	ErrNotInstalled = errors.New("uml: User Mode Linux kernel not available")
	// ErrNoModules: the UML kernel's module tree is missing.
	ErrNoModules = errors.New("uml: UML kernel module tree not available")
	// ErrTimeout: Job.Timeout passed before the job exited; the guest was
	// killed.
	ErrTimeout = errors.New("uml: job timed out")
	// ErrGuestPanic: the guest kernel panicked (linux.uml died of SIGABRT)
	// before the job's status was recorded.
	ErrGuestPanic = errors.New("uml: guest kernel panicked")
	// ErrNoStatus: linux.uml exited but the job's exit status file is
	// missing.
	ErrNoStatus = errors.New("uml: job exit status missing")
	// ErrSetup: the guest init failed before it could start the job.
	ErrSetup = errors.New("uml: guest setup failed")
	// ErrExec: the guest could not execute the job's program.
	ErrExec = errors.New("uml: job could not be executed in the guest")
)

// ModuleError reports a kernel module that is unknown to the UML module tree
// or failed to load in the guest.
type ModuleError struct {
	Module string // the name as given in Job.Modules
	Detail string // modprobe's message, or why it was not tried
}

func (e *ModuleError) Error() string {
	return fmt.Sprintf("uml: kernel module %q: %s", e.Module, e.Detail)
}

// consoleTail returns the last n lines of the console log, indented, for
// error messages.
func consoleTail(console string, n int) string {
	lines := strings.Split(strings.TrimRight(console, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "\n\tguest console (last lines):\n\t| " + strings.Join(lines, "\n\t| ")
}

// panicExcerpt returns the lines around the kernel's panic message: what
// led to it, the reason, and the task that was running. The stack trace
// after it is in Result.Console.
func panicExcerpt(console string) string {
	lines := strings.Split(strings.TrimRight(console, "\n"), "\n")
	at := -1
	for i, l := range lines {
		if strings.Contains(l, panicMarker) {
			at = i
			break
		}
	}
	if at < 0 {
		return consoleTail(console, 15)
	}
	from, to := max(at-8, 0), min(at+2, len(lines))
	return "\n\tguest console (around the panic; the stack trace is in Result.Console):\n\t| " + strings.Join(lines[from:to], "\n\t| ")
}
