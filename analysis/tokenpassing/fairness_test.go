package tokenpassing

import (
	"math"
	"strings"
	"testing"

	"tokenbed/analysis"
)

// binomialTail is P(X <= k) for Binomial(n, p), summed term by term in
// logs: the test's own reckoning, independent of gonum's incomplete beta.
func binomialTail(n, k int, p float64) float64 {
	sum := 0.0
	for i := 0; i <= k; i++ {
		ln, _ := math.Lgamma(float64(n + 1))
		li, _ := math.Lgamma(float64(i + 1))
		lr, _ := math.Lgamma(float64(n - i + 1))
		sum += math.Exp(ln - li - lr + float64(i)*math.Log(p) + float64(n-i)*math.Log1p(-p))
	}
	return sum
}

// The bounds are the tightest the two-sided alpha allows: one count
// further in, and the tail would hold more than alpha/2.
func TestBinomialBoundsAreTheTightest(t *testing.T) {
	for _, c := range []struct {
		n int
		p float64
	}{{114, 1.0 / 3}, {417, 1.0 / 3}, {57, 0.5}, {1000, 0.25}, {3718, 1.0 / 3}} {
		lo, hi := binomialBounds(c.n, c.p, fairnessAlpha)
		below := 0.0
		if lo > 0 {
			below = binomialTail(c.n, lo-1, c.p)
		}
		if below >= fairnessAlpha/2 || binomialTail(c.n, lo, c.p) < fairnessAlpha/2 {
			t.Errorf("n=%d p=%.3f: lo %d: P(X<lo)=%.3g, P(X<=lo)=%.3g, want them either side of %.0e", c.n, c.p, lo, below, binomialTail(c.n, lo, c.p), fairnessAlpha/2)
		}
		above := 1 - binomialTail(c.n, hi, c.p)
		if above >= fairnessAlpha/2 || 1-binomialTail(c.n, hi-1, c.p) < fairnessAlpha/2 {
			t.Errorf("n=%d p=%.3f: hi %d: P(X>hi)=%.3g, P(X>=hi)=%.3g, want them either side of %.0e", c.n, c.p, hi, above, 1-binomialTail(c.n, hi-1, c.p), fairnessAlpha/2)
		}
	}
}

// 002 §3.3's endurance run passes: A was hit 61,206 times in 1,792,498 s
// of three agents holding 10 s and passing in 0.009 s (to B) or 0.121 s
// (to C), about 178,000 visits; and the starved agent of a run with
// max_clock_skew 1h on it (0 acquisitions, against 209 and 208) fails.
func TestFairBoundsPaperAndStarved(t *testing.T) {
	visits := int(math.Floor(1792498 / (10 + (0.009+0.121)/2)))
	lo, hi := fairBounds(visits, 3)
	if 61206 < lo || 61206 > hi {
		t.Errorf("the paper's A: 61,206 of %d visits outside [%d, %d]", visits, lo, hi)
	}
	lo, hi = fairBounds(417, 3)
	if lo <= 0 || 209 < lo || 209 > hi || 208 < lo || 208 > hi {
		t.Errorf("417 acquisitions among 3: bounds [%d, %d], want 0 outside and 208, 209 inside", lo, hi)
	}
}

// A starved agent: C is up the whole run and never gets the token while A
// and B pass it between them. Every other check passes; fairness fails,
// naming C, its count and its bound.
func TestLiteralStarvedAgentFailsFairness(t *testing.T) {
	s, _ := judgeFile(t, "starved.jsonl", literal{exp: "experiment-3.yaml"})
	for k, v := range allPass {
		if r := s.Requirements[k]; r.Verdict != v {
			t.Errorf("%s: %s, want %s (the starvation is fairness's to find): %s", k, r.Verdict, v, r.Detail)
		}
	}
	r := s.Requirements["fairness"]
	if r.Verdict != analysis.VerdictFail || !strings.Contains(r.Detail, "C got 0 of the 114 acquisitions in replica 0") || !strings.Contains(r.Detail, "outside [") {
		t.Errorf("fairness %+v, want a failure naming C with 0 of 114 and its bound", r)
	}
	if strings.Contains(r.Detail, "A got") || strings.Contains(r.Detail, "B got") {
		t.Errorf("fairness names A or B, want C only: %s", r.Detail)
	}
}

// A fair run: the token walks uniformly among A, B and C (40, 39, 35 of
// 114 acquisitions): every check passes, fairness judged.
func TestLiteralFairThreePasses(t *testing.T) {
	s, _ := judgeFile(t, "fair-three.jsonl", literal{exp: "experiment-3.yaml"})
	wantVerdicts(t, s, allPass)
	if r := s.Requirements["fairness"]; r.Verdict != analysis.VerdictPass || r.Value != "1 phases fair" {
		t.Errorf("fairness %+v, want one phase judged and passed", r)
	}
	if len(s.Failed()) != 0 || len(s.NotJudged()) != 0 {
		t.Errorf("failed %v, not judged %v", s.Failed(), s.NotJudged())
	}
}

// A phase too short to judge is said so, not passed: circulation stops at
// 9.5 s of 60, 9 acquisitions between two agents.
func TestFairnessTooShortIsNotJudged(t *testing.T) {
	s, _ := judgeFile(t, "stalled.jsonl", literal{exp: "experiment.yaml"})
	r := s.Requirements["fairness"]
	if r.Verdict != analysis.VerdictNotJudged || !strings.Contains(r.Detail, "too short") {
		t.Errorf("fairness %+v, want not judged, too short", r)
	}
}
