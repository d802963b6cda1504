package pmqos

import (
	"os"
	"strings"
	"testing"
	"time"
)

func TestBoundOutOfRange(t *testing.T) {
	for _, b := range []time.Duration{-time.Microsecond, time.Hour} {
		if _, err := Hold(b); err == nil || !strings.Contains(err.Error(), "want 0 to") {
			t.Errorf("Hold(%v): %v, want a range error", b, err)
		}
	}
}

// While the request is held the kernel's bound in force is 0, and the
// request is gone once released: read back from the device.
func TestHoldIsInForce(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIP: needs root to write " + Path)
	}
	if _, err := os.Stat(Path); err != nil {
		t.Skipf("SKIP: %v", err)
	}
	before, err := Current()
	if err != nil {
		t.Fatal(err)
	}
	r, err := Hold(1500 * time.Nanosecond)
	if err != nil {
		t.Fatal(err)
	}
	if r.Bound != time.Microsecond {
		t.Errorf("bound %v, want 1µs (whole microseconds)", r.Bound)
	}
	if now, err := Current(); err != nil || now > time.Microsecond {
		t.Errorf("bound in force while held: %v (%v), want ≤ 1µs", now, err)
	}
	if err := r.Release(); err != nil {
		t.Fatal(err)
	}
	// Another package's run may hold its own request meanwhile (go test
	// runs packages side by side): the bound then returns to before only
	// once that one is released too.
	deadline := time.Now().Add(3 * time.Minute)
	for {
		now, err := Current()
		if err != nil {
			t.Fatal(err)
		}
		if now == before || now > time.Microsecond {
			break // ours is gone
		}
		if time.Now().After(deadline) {
			t.Fatalf("bound in force after release: %v, before %v", now, before)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
