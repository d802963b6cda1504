package wandering

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ClaimsFile holds the report's claims, beside report.md: what the
// study binary reads to pass or fail.
const ClaimsFile = "claims.json"

// Claim is one figure of a paper beside ours, with its tolerance and the
// verdict computed from the runs.
type Claim struct {
	Figure    string `json:"figure"` // "003 Fig. 2"
	Run       string `json:"run"`    // the scenario measured
	What      string `json:"what"`
	Paper     string `json:"paper"`
	Ours      string `json:"ours"`
	Tolerance string `json:"tolerance"`
	OK        bool   `json:"ok"`
	// Matches: the study's documentation says this figure matches its
	// paper; one that leaves its tolerance fails the study. A figure that
	// does not match carries its explanation in Why, and its ✗ fails
	// nothing.
	Matches bool   `json:"matches"`
	Why     string `json:"why,omitempty"`
}

// Mark is the claim's verdict as the report prints it.
func (c Claim) Mark() string {
	switch {
	case c.OK && c.Matches:
		return "✓"
	case c.OK:
		return "✓ (documented as not matching: update the docs)"
	case c.Matches:
		return "✗ FAILS: documented as matching"
	}
	return "✗ (expected)"
}

// Broken returns the claims documented as matching that left their
// tolerance.
func Broken(cs []Claim) []Claim {
	var out []Claim
	for _, c := range cs {
		if c.Matches && !c.OK {
			out = append(out, c)
		}
	}
	return out
}

// ReadClaims reads dir's claims file, written by Report.
func ReadClaims(dir string) ([]Claim, error) {
	b, err := os.ReadFile(filepath.Join(dir, ClaimsFile))
	if err != nil {
		return nil, err
	}
	var cs []Claim
	if err := json.Unmarshal(b, &cs); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, ClaimsFile), err)
	}
	return cs, nil
}

func writeClaims(dir string, cs []Claim) error {
	b, err := json.MarshalIndent(cs, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, ClaimsFile), append(b, '\n'), 0o644)
}

// claimTable writes the claims as a table: paper, ours, tolerance,
// verdict, and why a figure that does not match does not.
func (rp *report) claimTable(title string, cs []Claim) {
	if len(cs) == 0 {
		return
	}
	rp.w("## %s\n\n", title)
	rp.w("Each figure of the paper's text beside ours, with its tolerance; the verdict is computed. `make wandering` fails when a figure marked as matching leaves its tolerance; the ✗ expected are explained in the last column (and in docs/studies/wandering.md).\n\n")
	rp.w("| figure | run | what | paper | ours | tolerance | verdict | why not |\n|---|---|---|---|---|---|---|---|\n")
	for _, c := range cs {
		rp.w("| %s | %s | %s | %s | %s | %s | %s | %s |\n", c.Figure, c.Run, c.What, c.Paper, c.Ours, c.Tolerance, c.Mark(), strings.ReplaceAll(c.Why, "|", "/"))
	}
	rp.w("\n")
}
