package netlinkdump

import (
	"errors"
	"fmt"
	"testing"

	"github.com/vishvananda/netlink"
)

func TestRetryAsksAgainOnlyWhenInterrupted(t *testing.T) {
	calls := 0
	v, err := Retry(func() (int, error) {
		calls++
		if calls < 3 {
			return -1, fmt.Errorf("link list: %w", netlink.ErrDumpInterrupted)
		}
		return 7, nil
	})
	if err != nil || v != 7 || calls != 3 {
		t.Fatalf("got %d, %v after %d calls; want 7, nil after 3", v, err, calls)
	}

	other := errors.New("permission denied")
	calls = 0
	if _, err := Retry(func() (int, error) { calls++; return 0, other }); err != other || calls != 1 {
		t.Fatalf("other error: got %v after %d calls; want it returned after 1", err, calls)
	}

	calls = 0
	_, err = Retry(func() (int, error) { calls++; return 0, netlink.ErrDumpInterrupted })
	if !errors.Is(err, netlink.ErrDumpInterrupted) || calls != Attempts {
		t.Fatalf("always interrupted: got %v after %d calls; want ErrDumpInterrupted after %d", err, calls, Attempts)
	}
}
