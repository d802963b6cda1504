package clock

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

var origin = time.Date(2009, 5, 26, 0, 0, 0, 0, time.UTC)

// TestLocal checks the transform local = origin + offset + (1+drift)·(ref
// − origin) at hand-computed points.
func TestLocal(t *testing.T) {
	for _, tc := range []struct {
		skew  Skew
		after time.Duration // ref − origin
		want  time.Duration // local − origin
	}{
		{Skew{}, time.Hour, time.Hour},
		{Skew{Offset: 1500 * time.Millisecond}, 0, 1500 * time.Millisecond},
		{Skew{Offset: 1500 * time.Millisecond}, time.Hour, time.Hour + 1500*time.Millisecond},
		{Skew{Offset: -2 * time.Second}, 10 * time.Second, 8 * time.Second},
		// 100 ppm fast: 10^4 s later it is 1 s ahead.
		{Skew{Drift: 1e-4}, 10_000 * time.Second, 10_001 * time.Second},
		{Skew{Offset: time.Second, Drift: -1e-4}, 10_000 * time.Second, 10_000 * time.Second},
	} {
		if got := tc.skew.At(origin).Local(origin.Add(tc.after)).Sub(origin); got != tc.want {
			t.Errorf("%+v at origin+%v: local origin+%v, want origin+%v", tc.skew, tc.after, got, tc.want)
		}
	}
}

// TestRef checks that Ref is Local's least inverse: at Ref(l) the local
// clock reads l or later, one nanosecond before it reads earlier than l.
func TestRef(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	for range 2000 {
		s := Skew{Offset: time.Duration(r.NormFloat64() * float64(time.Minute)), Drift: (r.Float64()*2 - 1) * 0.099}
		c := s.At(origin)
		l := origin.Add(time.Duration(r.Int64N(int64(100_000 * time.Second))))
		ref := c.Ref(l)
		if c.Local(ref).Before(l) || !c.Local(ref.Add(-1)).Before(l) {
			t.Fatalf("%+v: Ref(%v) = %v reads %v, and 1 ns before %v", s, l, ref, c.Local(ref), c.Local(ref.Add(-1)))
		}
	}
}

func TestValidate(t *testing.T) {
	for _, d := range []float64{0.1, -0.1, 0.5} {
		err := Skew{Drift: d}.Validate()
		if err == nil || !strings.HasPrefix(err.Error(), "drift: ") {
			t.Errorf("drift %v: %v, want an error naming drift", d, err)
		}
	}
	if err := (Skew{Offset: -time.Hour, Drift: -0.0999}).Validate(); err != nil {
		t.Error(err)
	}
}
