package results

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
)

// ShardFile is the file that makes a results directory a shard: which
// part of a run it holds (ShardInfo).
const ShardFile = "shard.json"

// Shard is shard K of N (1-based K).
type Shard struct {
	K, N int
}

func (s Shard) String() string { return fmt.Sprintf("%d/%d", s.K, s.N) }

// ParseShard reads "K/N": 1 ≤ K ≤ N.
func ParseShard(text string) (Shard, error) {
	k, n, ok := strings.Cut(text, "/")
	if !ok {
		return Shard{}, fmt.Errorf("%q: want K/N, e.g. 2/4 (shard K of N, 1-based)", text)
	}
	ki, err1 := strconv.Atoi(k)
	ni, err2 := strconv.Atoi(n)
	if err1 != nil || err2 != nil || ni < 1 || ki < 1 || ki > ni {
		return Shard{}, fmt.Errorf("%q: want K/N with 1 ≤ K ≤ N, e.g. 2/4", text)
	}
	return Shard{K: ki, N: ni}, nil
}

// Part is the contiguous block of 0..total-1 that shard s holds:
// [⌊(K-1)·total/N⌋, ⌊K·total/N⌋). Contiguous, not round robin: a shard's
// replicas are then one stretch of the paper timeline, and its seeds one
// range, which a person reads off shard.json at a glance. It is a pure
// function of (total, K, N); every item is in exactly one shard, and the
// shards' sizes differ by at most one.
func (s Shard) Part(total int) []int {
	lo, hi := (s.K-1)*total/s.N, s.K*total/s.N
	out := make([]int, 0, hi-lo)
	for i := lo; i < hi; i++ {
		out = append(out, i)
	}
	return out
}

// RunID is the run ID of shard s of the run base: "tb" and six hex
// digits, as every run ID (it names namespaces), derived from base and
// the shard so that shards run on one host never share an ID, and the
// same shard always gets the same one. The shard's shard.json names base,
// which is how a merge finds its siblings.
func (s Shard) RunID(base string) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "tokenbed shard %s %d %d", base, s.K, s.N))
	return "tb" + hex.EncodeToString(sum[:3])
}

// ShardInfo is shard.json: what part of a run a results directory holds,
// and what must agree between the shards of one run for them to merge.
type ShardInfo struct {
	// BaseRunID is the run's ID: the merged results directory's, and
	// what every shard of the run shares.
	BaseRunID string `json:"base_run_id"`
	RunID     string `json:"run_id"` // this shard's own run ID (its directory, namespaces, claim)
	Shard     int    `json:"shard"`  // K, 1-based
	Of        int    `json:"of"`     // N
	// Assignment names how items were dealt: "contiguous" (Shard.Part).
	Assignment string `json:"assignment"`
	// Unit is what was dealt: "replicas" (harness run) or "seeds"
	// (harness swarm); Items are this shard's, of Total.
	Unit  string   `json:"unit"`
	Items []uint64 `json:"items"`
	Total int      `json:"total"`
	// What the shards of one run must share.
	Experiment     string `json:"experiment"`
	ExperimentHash string `json:"experiment_sha256"` // of experiment.yaml's bytes
	Seed           uint64 `json:"seed"`
	GitRevision    string `json:"git_revision"`
	Backend        string `json:"backend"`
	// Host is the machine that ran the shard (os.Hostname).
	Host string `json:"host"`
}

// Assignment and units of ShardInfo.
const (
	AssignContiguous = "contiguous"
	UnitReplicas     = "replicas"
	UnitSeeds        = "seeds"
)

// HashBytes is the hex SHA-256 of b (ShardInfo.ExperimentHash).
func HashBytes(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
