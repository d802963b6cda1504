package results

import (
	"slices"
	"strings"
	"testing"
)

// Every item is in exactly one shard, in order, and the shards' sizes
// differ by at most one; the dealing depends on (total, K, N) alone.
func TestShardPartDealsEveryItemOnce(t *testing.T) {
	for total := 1; total <= 20; total++ {
		for n := 1; n <= total; n++ {
			var all []int
			lo, hi := total, 0
			for k := 1; k <= n; k++ {
				p := Shard{K: k, N: n}.Part(total)
				lo, hi = min(lo, len(p)), max(hi, len(p))
				all = append(all, p...)
				if !slices.Equal(p, Shard{K: k, N: n}.Part(total)) {
					t.Fatalf("%d/%d of %d: not a function of its arguments", k, n, total)
				}
			}
			want := make([]int, total)
			for i := range want {
				want[i] = i
			}
			if !slices.Equal(all, want) || hi-lo > 1 {
				t.Fatalf("%d shards of %d: %v (sizes %d..%d)", n, total, all, lo, hi)
			}
		}
	}
	if got := (Shard{K: 2, N: 3}).Part(16); !slices.Equal(got, []int{5, 6, 7, 8, 9}) {
		t.Errorf("2/3 of 16: %v, want 5..9", got)
	}
}

func TestParseShard(t *testing.T) {
	if s, err := ParseShard("2/4"); err != nil || s != (Shard{K: 2, N: 4}) {
		t.Errorf("2/4: %v %v", s, err)
	}
	for _, bad := range []string{"", "2", "0/4", "5/4", "a/4", "2/0", "-1/3", "1/2/3"} {
		if _, err := ParseShard(bad); err == nil || !strings.Contains(err.Error(), "K/N") {
			t.Errorf("%q: %v, want an error saying K/N", bad, err)
		}
	}
}

// A shard's run ID is a run ID (tb and six hex digits), the same for the
// same shard, and differs between the shards of a run.
func TestShardRunID(t *testing.T) {
	seen := map[string]bool{}
	for k := 1; k <= 16; k++ {
		id := Shard{K: k, N: 16}.RunID("tb000001")
		if len(id) != 8 || !strings.HasPrefix(id, "tb") || id != (Shard{K: k, N: 16}).RunID("tb000001") || seen[id] {
			t.Fatalf("shard %d/16: %q", k, id)
		}
		seen[id] = true
	}
}
