package runner

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// Issue 11 item 5: an ID is claimed once; a second claim, or one whose
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
