package trend

import "math"

// Values are the series' value on each night, the one its test compares
// (the quantile, the median of a distribution, the events per exposure
// of a count), NaN on a night without one: for a reader that draws the
// series (harness serve's figure page).
func (s Series) Values() ([]float64, error) {
	t, err := testerFor(s)
	if err != nil {
		return nil, err
	}
	vs := make([]float64, len(s.Nights))
	for i, n := range s.Nights {
		vs[i] = math.NaN()
		if has(s.Kind, n) {
			vs[i] = t.prepare(n).value
		}
	}
	return vs, nil
}
