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
	// ErrHostCPU: this UML kernel cannot run user processes on this host's
	// CPU. UML 6.1 (Debian bookworm's user-mode-linux) restores a guest
	// process's FPU state with PTRACE_SETREGSET and a fixed-size XSAVE
	// buffer; the host kernel refuses any size but its own (EFAULT), and
	// on a CPU with AMX (cpu flag amx_tile) the host's XSAVE area is
	// larger than UML's buffer. The guest's init dies of SIGSEGV before
	// it runs. Errors of this kind also match ErrGuestPanic.
	ErrHostCPU = errors.New("uml: this User Mode Linux kernel cannot run processes on this host CPU")
)

// fpRegsMarker is what UML prints when the host refuses a process's FPU
// state (arch/um/kernel/skas: "userspace - ptrace set fp regs failed").
const fpRegsMarker = "ptrace set fp regs failed"

// panicError is the error of a guest that panicked: ErrHostCPU as well
// when the console shows the FPU state refused, ErrGuestPanic alone
// otherwise.
func panicError(how, console string) error {
	if strings.Contains(console, fpRegsMarker) {
		return fmt.Errorf("%w (%s): %w: the host's XSAVE area is larger than this UML kernel's FPU buffer (CPU with AMX?); a newer user-mode-linux is needed%s", ErrGuestPanic, how, ErrHostCPU, panicExcerpt(console))
	}
	return fmt.Errorf("%w (%s)%s", ErrGuestPanic, how, panicExcerpt(console))
}

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
