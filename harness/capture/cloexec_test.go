package capture

import (
	"testing"

	"golang.org/x/sys/unix"

	"tokenbed/internal/testenv"
)

// A capture socket must not leak into the processes the harness starts:
// afpacket opens it without close-on-exec, so every agent would hold every
// earlier agent's capture socket.
func TestCaptureSocketIsCloseOnExec(t *testing.T) {
	testenv.RequireRoot(t, "opens an AF_PACKET socket")
	tp, _, err := openHere("lo", Config{RingBlockSize: DefaultRingBlockSize, RingBlocks: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer tp.Close()
	flags, err := unix.FcntlInt(uintptr(socketFD(tp)), unix.F_GETFD, 0)
	if err != nil {
		t.Fatal(err)
	}
	if flags&unix.FD_CLOEXEC == 0 {
		t.Error("the capture socket is inherited by every process the harness starts (no FD_CLOEXEC)")
	}
}
