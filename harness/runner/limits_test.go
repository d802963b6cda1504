package runner

import (
	"testing"

	"tokenbed/harness/capture"
)

// Small runs keep the capture's default ring; large ones shrink it, never
// below 16 blocks, and never growing with the number of interfaces.
func TestCaptureRingBlocks(t *testing.T) {
	if got := captureRingBlocks(3); got != capture.DefaultRingBlocks {
		t.Errorf("3 interfaces: %d blocks, want the default %d", got, capture.DefaultRingBlocks)
	}
	if got := captureRingBlocks(48); got != capture.DefaultRingBlocks {
		t.Errorf("48 interfaces: %d blocks, want the default %d", got, capture.DefaultRingBlocks)
	}
	prev := captureRingBlocks(49)
	for n := 50; n <= 1000; n++ {
		b := captureRingBlocks(n)
		if b > prev || b < 16 {
			t.Fatalf("%d interfaces: %d blocks (previous %d): want non-increasing, at least 16", n, b, prev)
		}
		prev = b
	}
	if got := captureRingBlocks(360); got*capture.DefaultRingBlockSize*360 > 400<<20 {
		t.Errorf("360 interfaces: %d blocks each, %d MiB in all", got, got*capture.DefaultRingBlockSize*360>>20)
	}
}
