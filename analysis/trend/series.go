// Package trend compares each figure of a night with the previous nights
// of the same job and names the night, and so the revision, from which a
// figure moved. It is a pure function of the series (Analyze); Read builds
// the series from the results database (internal/resultsdb).
//
// # Tests
//
// A figure is one of three kinds, each with the test the simulator
// against real runs already uses (analysis/crossval), from internal/stats:
//
//   - Quantile: the q-quantile of a night's samples against the pooled
//     samples of the baseline nights, by their distribution-free
//     (order-statistic) intervals (stats.QuantileTest);
//   - Distribution: a night's samples against the baseline's, by the
//     two-sample Kolmogorov–Smirnov test (stats.KSTest);
//   - Count: a night's events against the baseline's, by the exact
//     conditional binomial test of two Poisson counts over their
//     exposures (stats.CountTest; exposure 1 a night when the nights are
//     of equal length).
//
// # Change point
//
// A candidate change night c has as baseline the present nights before
// it (at most Options.Window, at least Options.MinBaseline). The change is
// at c when the present nights from c to the latest, pooled, differ from
// that baseline, night c alone and the latest alone differ too, all the
// same way (an intersection–union test: its p-value is the largest of
// the three), and
// every one of those nights lies beyond every baseline night's own value
// (which places the change at its first night, and keeps nights that
// scatter more than their sampling noise from reading as a change). The candidates are the last
// Options.Horizon present nights; the figure's p-value is the smallest
// candidate's times the number of candidates (Bonferroni), and the change
// night is the earliest candidate within the level the figure passed.
//
// # Effect
//
// A figure moved when its change is significant (below) and at least
// Options.MinEffect, relative, from the baseline to the latest night: of
// the quantile, of the events per exposure of a count, and for a
// distribution the mean distance between the two quantile functions
// (Wasserstein-1) over the baseline's mean, which a shift of the whole
// distribution moves by its size and a median flipping between two modes
// (return times of two or three visits) only by the mass that changed.
// With tens of thousands of samples a night the tests find a 0.3% shift
// certain; the effect keeps such a change, which a machine's conditions
// alone make, from being reported as moved. Significant but smaller is
// WithinEffect. The effect does not change the p-values or
// Holm's family.
//
// # Multiple comparisons
//
// Holm's step-down correction runs over every figure of one Analyze call
// at family-wise level Options.Alpha: harness trend passes one night's
// figures of every job it selects, so on a night where nothing changed
// the chance of any false flag is at most Alpha.
//
// The tests take the nights as exchangeable under no change: samples of
// one night pooled with another's. Nights that differ by more than their
// samples' noise (a loaded machine) make the Quantile and Distribution
// tests too eager; the "beyond every baseline night" rule is the guard.
package trend

import "time"

// Kind says how a figure is compared across nights.
type Kind string

// The kinds of figure.
const (
	Quantile     Kind = "quantile"     // Series.Q-quantile of Night.Samples
	Distribution Kind = "distribution" // Night.Samples as a whole
	Count        Kind = "count"        // Night.Events over Night.Exposure
)

// Series is one figure of one job, night by night, oldest first.
type Series struct {
	Job string `json:"job"`
	// Backend is set when the job's runs are on more than one backend
	// (the simulator against real processes): each backend's runs are a
	// series of their own, never pooled with the other's.
	Backend string `json:"backend,omitempty"`
	Figure  string `json:"figure"`
	Unit    string `json:"unit,omitempty"`
	Kind    Kind   `json:"kind"`
	// Q is the quantile of a Quantile figure (0.99 for a p99).
	Q float64 `json:"q,omitempty"`
	// Better is the direction a good change takes, "lower" or "higher";
	// empty: any move is a regression.
	Better string  `json:"better,omitempty"`
	Nights []Night `json:"nights"`
}

// Night is one night's value of a figure.
type Night struct {
	Night    string    `json:"night"` // the campaign, or a label
	Run      string    `json:"run,omitempty"`
	Revision string    `json:"revision"`
	Started  time.Time `json:"started,omitzero"`
	// Overrides are the campaign's overrides of the night's (first) run,
	// a JSON object path → value (resultsdb.Run.Overrides); empty: none.
	Overrides string `json:"overrides,omitempty"`
	// Missing: the job gave no value this night (it failed, or did not
	// run). A missing night is neither judged nor part of a baseline.
	Missing  bool      `json:"missing,omitempty"`
	Samples  []float64 `json:"samples,omitempty"`  // Quantile, Distribution
	Events   int       `json:"events,omitempty"`   // Count
	Exposure float64   `json:"exposure,omitempty"` // Count; 0 means 1
}

// Options are the trend's levels and windows.
type Options struct {
	// Alpha is the family-wise level over the figures of one call
	// (default 0.01).
	Alpha float64
	// Window is the most baseline nights before a change (default 7).
	Window int
	// MinBaseline is the fewest (default 1: the tests are exact or
	// asymptotic in the samples, not in the nights, so two nights can be
	// compared; more nights make the "beyond every baseline night" rule
	// stricter).
	MinBaseline int
	// Horizon is how many of the latest present nights are candidate
	// change nights (default 7).
	Horizon int
	// MinEffect is the smallest relative change baseline → latest that
	// is reported as moved (default 0.05; negative: none, every
	// significant change moves). With tens of thousands of samples a
	// night, a change of 0.3% is significant yet practically nil.
	MinEffect float64
}

func (o Options) withDefaults() Options {
	if o.Alpha == 0 {
		o.Alpha = 0.01
	}
	if o.Window == 0 {
		o.Window = 7
	}
	if o.MinBaseline == 0 {
		o.MinBaseline = 1
	}
	if o.Horizon == 0 {
		o.Horizon = 7
	}
	if o.MinEffect == 0 {
		o.MinEffect = 0.05
	}
	return o
}

// Finding is the verdict on one series at its latest night.
type Finding struct {
	Job     string `json:"job"`
	Backend string `json:"backend,omitempty"` // Series.Backend
	Figure  string `json:"figure"`
	Unit    string `json:"unit,omitempty"`
	Kind    Kind   `json:"kind"`
	// Test names the test: "quantile intervals", "Kolmogorov–Smirnov",
	// "conditional binomial".
	Test string `json:"test"`
	// Night and Revision are the latest night's.
	Night    string `json:"night"`
	Revision string `json:"revision"`
	// Judged is false when the series cannot be tested (Note says why).
	Judged bool   `json:"judged"`
	Note   string `json:"note,omitempty"`
	// Moved: the figure changed, at family-wise level Alpha (Holm).
	// Regression: it moved the wrong way (or Series.Better is empty).
	// WithinEffect: significant at that level, but no candidate change
	// reaches Options.MinEffect; not Moved.
	Moved        bool `json:"moved"`
	Regression   bool `json:"regression"`
	WithinEffect bool `json:"within_effect,omitempty"`
	// Direction is +1 when the figure went up, −1 down (0 unmoved).
	Direction int `json:"direction"`
	// Since names the change: the first night that differs, its revision
	// (the first revision with the change), and the night and revision
	// before it (the last without it): the culprit lies between the two.
	Since          string `json:"since,omitempty"`
	SinceRevision  string `json:"since_revision,omitempty"`
	Before         string `json:"before,omitempty"`
	BeforeRevision string `json:"before_revision,omitempty"`
	NightsMoved    int    `json:"nights_moved,omitempty"`
	// Baseline and Latest are the figure's value over the baseline nights
	// (pooled) and on the latest night: the quantile, the median of a
	// distribution, the events per exposure of a count.
	Baseline float64 `json:"baseline"`
	Latest   float64 `json:"latest"`
	// BaselineFirst and BaselineLast are the first and last nights pooled
	// in Baseline, BaselineRevision the last one's revision.
	BaselineFirst    string `json:"baseline_first,omitempty"`
	BaselineLast     string `json:"baseline_last,omitempty"`
	BaselineRevision string `json:"baseline_revision,omitempty"`
	// Effect is the relative change (Latest − Baseline)/|Baseline|
	// (±Inf from a zero baseline), for a distribution its quantile
	// functions' mean distance over the baseline's mean (shiftEffect):
	// the size MinEffect bounds.
	Effect float64 `json:"effect"`
	// OverridesDiffer lists the campaign overrides in which the latest
	// night differs from the last baseline night ("path: old → new"),
	// when they differ: an override, not a revision, may have moved the
	// figure.
	OverridesDiffer []string `json:"overrides_differ,omitempty"`
	// P is the figure's p-value (Bonferroni over its candidate change
	// nights); PAdjusted is Holm's over the figures of the call.
	P         float64 `json:"p"`
	PAdjusted float64 `json:"p_adjusted"`
	// Candidates is the number of candidate change nights tested.
	Candidates int `json:"candidates"`
}

// Regressions are the findings that moved the wrong way.
func Regressions(fs []Finding) []Finding {
	var out []Finding
	for _, f := range fs {
		if f.Regression {
			out = append(out, f)
		}
	}
	return out
}
