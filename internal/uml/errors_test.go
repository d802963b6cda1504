package uml

import (
	"errors"
	"strings"
	"testing"
)

// The console of a guest on a host CPU with AMX, booting Debian bookworm's
// UML 6.1 (seen on a Sapphire Rapids host, kernel 6.18): the error says
// so, and still matches ErrGuestPanic.
const amxConsole = `[    0.200000] VFS: Mounted root (hostfs filesystem) on device 0:15.
[    0.200000] devtmpfs: mounted
[    0.200000] Run /tmp/tokenbed-uml-430530603/init as init process
[    0.200000] userspace - ptrace set fp regs failed, errno = 14
[    0.200000] Kernel panic - not syncing: Attempted to kill init! exitcode=0x0000000b
[    0.200000] CPU: 0 PID: 1 Comm: init Not tainted 6.1.176 #1
`

func TestPanicErrorNamesTheHostCPU(t *testing.T) {
	err := panicError("the guest's PID 1 exited", amxConsole)
	if !errors.Is(err, ErrHostCPU) || !errors.Is(err, ErrGuestPanic) || !strings.Contains(err.Error(), "errno = 14") {
		t.Errorf("AMX console: %v; want ErrHostCPU and ErrGuestPanic with the console's line", err)
	}
	other := strings.Replace(amxConsole, "userspace - ptrace set fp regs failed, errno = 14\n", "", 1)
	if err := panicError("the guest's PID 1 exited", other); errors.Is(err, ErrHostCPU) || !errors.Is(err, ErrGuestPanic) {
		t.Errorf("another panic: %v; want ErrGuestPanic only", err)
	}
}
