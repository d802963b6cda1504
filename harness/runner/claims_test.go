package runner

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An ID is claimed once; a second claim, or one whose
// results exist, is refused and leaves the first claim's entry alone; a
// claim is released once, by its owner.
func TestClaimIDIsExclusive(t *testing.T) {
	requireRoot(t)
	id := NewRunID()
	c, err := ClaimID(id, filepath.Join(t.TempDir(), id))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	if _, err := ClaimID(id, ""); !errors.Is(err, ErrRunIDTaken) {
		t.Fatalf("second claim of %s: %v, want ErrRunIDTaken", id, err)
	}
	if e, ok := Lookup(id); !ok || !e.Alive() || e.PID != os.Getpid() {
		t.Fatalf("the refused claim disturbed the entry: %+v %v", e, ok)
	}
	c.Release()
	other, err := ClaimID(id, "")
	if err != nil {
		t.Fatal(err)
	}
	c.Release() // a second release by the first owner must not remove the new claim
	if _, ok := Lookup(id); !ok {
		t.Fatal("a stale Release removed another claim's entry")
	}
	other.Release()

	// An ID whose results exist is refused, and leaves no entry.
	root := t.TempDir()
	os.Mkdir(filepath.Join(root, id), 0o755)
	if _, err := ClaimID(id, filepath.Join(root, id)); !errors.Is(err, ErrRunIDTaken) {
		t.Fatalf("claim with existing results: %v, want ErrRunIDTaken", err)
	}
	if _, ok := Lookup(id); ok {
		t.Error("a refused claim left a registry entry")
	}
}

// A run refused before it starts releases the claim it was given: the ID
// is free again, and no dead entry is left for harness clean.
func TestRefusedRunReleasesClaim(t *testing.T) {
	requireRoot(t)
	e, path := load(t, strings.Replace(plain, "defaults:", "defaults:\n  profile: \"delay 5ms\"", 1))
	id := NewRunID()
	c, err := ClaimID(id, "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	if _, err := Run(context.Background(), Options{Experiment: e, ExperimentFile: path, ResultsRoot: t.TempDir(), RunID: id, Claim: c,
		Impair: ImpairNone, AgentBin: agentBin}); err == nil {
		t.Fatal("a run without its impairment was not refused")
	}
	if _, ok := Lookup(id); ok {
		t.Error("the refused run kept its registry entry")
	}
}
