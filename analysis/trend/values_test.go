package trend

import (
	"math"
	"testing"
)

// TestValues: a night's value is what its kind's test compares, NaN on a
// missing night; an unknown kind is an error.
func TestValues(t *testing.T) {
	for _, c := range []struct {
		s    Series
		want []float64
	}{
		{Series{Kind: Quantile, Q: 0.5, Nights: []Night{{Samples: []float64{3, 1, 2}}, {Missing: true}, {Samples: []float64{5, 4}}}},
			[]float64{2, math.NaN(), 4}},
		{Series{Kind: Distribution, Nights: []Night{{Samples: []float64{9, 7, 8}}}}, []float64{8}},
		{Series{Kind: Count, Nights: []Night{{Events: 6, Exposure: 2}, {Events: 3}, {Missing: true}}}, []float64{3, 3, math.NaN()}},
	} {
		got, err := c.s.Values()
		if err != nil {
			t.Fatal(err)
		}
		for i := range c.want {
			if got[i] != c.want[i] && !(math.IsNaN(got[i]) && math.IsNaN(c.want[i])) {
				t.Errorf("%s: values %v, want %v", c.s.Kind, got, c.want)
				break
			}
		}
	}
	if _, err := (Series{Kind: "mean"}).Values(); err == nil {
		t.Error("an unknown kind gives values")
	}
}
