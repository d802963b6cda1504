package tokenpassing

import (
	"testing"

	"tokenbed/analysis"
)

// A token lost in transit by a lose-token step (the holder's
// token_released "lost_in_transit") is one loss, lost-in-transit,
// explained: requirement (i) passes, and the regenerated token's
// circulation afterwards is judged as usual.
func TestLiteralLostInTransitIsAnExplainedLoss(t *testing.T) {
	s, _ := judgeFile(t, "lost-in-transit.jsonl", literal{exp: "experiment.yaml"})
	if len(s.Losses) != 1 || s.Losses[0].Cause != "lost-in-transit" || !s.Losses[0].Explain || s.Losses[0].Token != "1@A" || s.Losses[0].Agent != "A" {
		t.Errorf("losses %+v: want one lost-in-transit of 1@A at A, explained", s.Losses)
	}
	wantVerdicts(t, s, map[string]analysis.Verdict{"loss": analysis.VerdictPass, "duplication": analysis.VerdictPass})
}
