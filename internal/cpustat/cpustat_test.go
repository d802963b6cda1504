package cpustat

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

func parseFile(t *testing.T, name string) (Times, error) {
	t.Helper()
	f, err := os.Open("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return Parse(f, name)
}

// A /proc/stat read off a 2-CPU Firecracker guest: the aggregate line,
// not a per-CPU one, in USER_HZ ticks.
func TestParse(t *testing.T) {
	got, err := parseFile(t, "stat-2cpu.txt")
	if err != nil {
		t.Fatal(err)
	}
	tick := 10 * time.Millisecond
	want := Times{User: 141254 * tick, Nice: 389 * tick, System: 80236 * tick, Idle: 511961 * tick,
		IOWait: 7915 * tick, IRQ: 0, SoftIRQ: 3503 * tick, Steal: 6033 * tick}
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if b := got.Busy(); b != (141254+389+80236+3503)*tick {
		t.Errorf("busy %v", b)
	}
	if f := got.StealFraction(); f < 0.0259 || f > 0.0261 { // 6033 / (225382 + 6033)
		t.Errorf("steal fraction %.4f, want 0.0260", f)
	}
}

// Bad input names the file, the line and the field.
func TestParseErrors(t *testing.T) {
	for _, c := range []struct{ file, want string }{
		{"stat-bad.txt", `stat-bad.txt:1: cpu idle "x": not a tick count`},
		{"stat-nocpu.txt", "stat-nocpu.txt: no aggregate cpu line"},
		{"stat-short.txt", "stat-short.txt:2: the cpu line has 4 fields, want at least 8 (… steal)"},
	} {
		_, err := parseFile(t, c.file)
		if err == nil || err.Error() != c.want {
			t.Errorf("%s: error %v, want %q", c.file, err, c.want)
		}
	}
}

// The watch reports the run-long sums and the worst interval, and stops
// reading at the first failure, keeping what it had.
func TestWatch(t *testing.T) {
	s := time.Second
	readings := []Times{
		{User: 10 * s, System: 5 * s, Idle: 100 * s, Steal: 1 * s},
		{User: 11 * s, System: 5 * s, Idle: 101 * s, Steal: 1 * s},                                        // quiet
		{User: 11 * s, System: 5*s + 500*time.Millisecond, Idle: 101 * s, Steal: 1500 * time.Millisecond}, // a burst: 0.5 s stolen
		{User: 12 * s, System: 6 * s, Idle: 101 * s, Steal: 1600 * time.Millisecond},
	}
	i := 0
	read := func() (Times, error) {
		if i >= len(readings) {
			return Times{}, errors.New("gone")
		}
		i++
		return readings[i-1], nil
	}
	w := &Watch{read: read}
	t0 := time.Unix(1000, 0)
	for k := range 5 {
		w.sample(t0.Add(time.Duration(k) * s))
	}
	r := w.rep
	if r.Busy != 3*s || r.Steal != 600*time.Millisecond || r.Wall != 3*s {
		t.Errorf("busy %v steal %v wall %v, want 3s 600ms 3s", r.Busy, r.Steal, r.Wall)
	}
	if r.WorstSteal != 500*time.Millisecond || !r.WorstAt.Equal(t0.Add(2*s)) {
		t.Errorf("worst %v at %v, want 500ms at +2s", r.WorstSteal, r.WorstAt.Sub(t0))
	}
	if r.Err == nil || !strings.Contains(r.Err.Error(), "gone") {
		t.Errorf("err %v, want the failed reading's", r.Err)
	}
	if f := r.StealFraction(); f < 0.1666 || f > 0.1667 {
		t.Errorf("steal fraction %.4f, want 0.6/3.6", f)
	}
}

// On this host, the watch reads the real /proc/stat.
func TestWatchHost(t *testing.T) {
	if _, err := ReadHost(); err != nil {
		t.Skipf("no %s here: %v", Path, err)
	}
	w := Start(5*time.Millisecond, ReadHost)
	time.Sleep(30 * time.Millisecond)
	r := w.Stop()
	if r.Err != nil || r.Wall < 30*time.Millisecond || r.Busy < 0 || r.Steal < 0 {
		t.Errorf("report %+v", r)
	}
}
