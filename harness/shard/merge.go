// Package shard splits a run into shards (harness run --shard K/N: Plan)
// and puts the shards of one run back into one results directory
// (harness merge: Merge), which analysis then reads as any run's.
//
// A shard is a results directory with a shard.json (results.ShardInfo).
// The shards of one run share its base run ID, experiment (the bytes),
// seed, revision, backend and shard count; each holds its own replicas,
// which no other holds. Merge refuses anything else, naming the shard
// directory and the field. A shard it is not given leaves its replicas
// out, named in run.json (missing_shards, missing_replicas): analysis
// then judges no check passed (analysis.Context.Judge).
//
// What the merged directory holds: every shard's per-replica files as
// they are (logs/NAME.jsonl, ca/NAME.crt), topology.json with every
// agent in replica order, one harness log and one capture interleaved
// (events.go, capture.go), run.json, and shards/K/ with each shard's own
// shard.json and run.json (its host, run ID and times). Where the shards
// ran on separate machines with their own CAs, ca/ca.rN.crt is replica
// N's CA (results.ReplicaCACert).
//
// Files: merge.go (planning, reading, checks, files), events.go (the harness log
// and the order of records), capture.go (the capture).
package shard

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"tokenbed/experiments"
	"tokenbed/internal/results"
)

// Shard is one shard directory as read.
type Shard struct {
	Dir  string
	Info results.ShardInfo
	Run  results.RunInfo
}

// Result is what Merge made.
type Result struct {
	Dir             string
	Shards          []string // merged, "K/N", in order
	MissingShards   []string // "K/N" not given
	MissingReplicas []int
}

// Read reads dir's shard.json and run.json.
func Read(dir string) (Shard, error) {
	s := Shard{Dir: dir}
	if err := results.ReadJSON(dir, results.ShardFile, &s.Info); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return s, fmt.Errorf("%s: no %s: not a shard (harness run --shard writes one)", dir, results.ShardFile)
		}
		return s, fmt.Errorf("%s: %s: %w", dir, results.ShardFile, err)
	}
	if err := results.ReadJSON(dir, results.RunFile, &s.Run); err != nil {
		return s, fmt.Errorf("%s: %s: %w", dir, results.RunFile, err)
	}
	return s, nil
}

// Check refuses shards that are not parts of one run: different runs,
// experiments, seeds, revisions, backends or shard counts, a shard given
// twice, a replica in two shards, items that are not the shard's. It
// returns the shards in shard order.
func Check(shards []Shard) ([]Shard, error) {
	if len(shards) == 0 {
		return nil, errors.New("no shard directories")
	}
	ref := shards[0]
	byItem := map[uint64]string{}
	byK := map[int]string{}
	for _, s := range shards {
		in := s.Info
		if in.Unit != results.UnitReplicas {
			return nil, fmt.Errorf("%s: %s: unit %q: only shards of a run's replicas merge", s.Dir, results.ShardFile, in.Unit)
		}
		for _, f := range []struct{ name, got, want string }{
			{"base_run_id", in.BaseRunID, ref.Info.BaseRunID},
			{"experiment", in.Experiment, ref.Info.Experiment},
			{"experiment_sha256", in.ExperimentHash, ref.Info.ExperimentHash},
			{"seed", fmt.Sprint(in.Seed), fmt.Sprint(ref.Info.Seed)},
			{"git_revision", in.GitRevision, ref.Info.GitRevision},
			{"backend", in.Backend, ref.Info.Backend},
			{"of", fmt.Sprint(in.Of), fmt.Sprint(ref.Info.Of)},
			{"total", fmt.Sprint(in.Total), fmt.Sprint(ref.Info.Total)},
			{"assignment", in.Assignment, ref.Info.Assignment},
		} {
			if f.got != f.want {
				return nil, fmt.Errorf("%s: %s: %s %q, but %s has %q: not shards of one run", s.Dir, results.ShardFile, f.name, f.got, ref.Dir, f.want)
			}
		}
		if in.Assignment != results.AssignContiguous {
			return nil, fmt.Errorf("%s: %s: assignment %q: want %q", s.Dir, results.ShardFile, in.Assignment, results.AssignContiguous)
		}
		sh := results.Shard{K: in.Shard, N: in.Of}
		if in.Shard < 1 || in.Shard > in.Of {
			return nil, fmt.Errorf("%s: %s: shard %d of %d: want 1 ≤ shard ≤ of", s.Dir, results.ShardFile, in.Shard, in.Of)
		}
		if other, dup := byK[in.Shard]; dup {
			return nil, fmt.Errorf("%s: %s: shard %s is also %s: a duplicate shard", s.Dir, results.ShardFile, sh, other)
		}
		byK[in.Shard] = s.Dir
		for _, it := range in.Items {
			if other, dup := byItem[it]; dup {
				return nil, fmt.Errorf("%s: %s: items: replica %d is also in %s: overlapping shards", s.Dir, results.ShardFile, it, other)
			}
			byItem[it] = s.Dir
		}
		var want []uint64
		for _, r := range sh.Part(in.Total) {
			want = append(want, uint64(r))
		}
		if !slices.Equal(in.Items, want) {
			return nil, fmt.Errorf("%s: %s: items %v: shard %s of %d replicas holds %v (contiguous)", s.Dir, results.ShardFile, in.Items, sh, in.Total, want)
		}
	}
	out := slices.Clone(shards)
	sort.Slice(out, func(i, j int) bool { return out[i].Info.Shard < out[j].Info.Shard })
	return out, nil
}

// Merge merges the shard directories dirs into out (default: beside the
// first, named for the run's base ID), which must not exist.
func Merge(dirs []string, out string) (Result, error) {
	var shards []Shard
	for _, d := range dirs {
		s, err := Read(d)
		if err != nil {
			return Result{}, err
		}
		shards = append(shards, s)
	}
	shards, err := Check(shards)
	if err != nil {
		return Result{}, err
	}
	ref := shards[0].Info
	if out == "" {
		out = filepath.Join(filepath.Dir(filepath.Clean(shards[0].Dir)), ref.BaseRunID)
	}
	res := Result{Dir: out}
	have := map[int]bool{}
	for _, s := range shards {
		have[s.Info.Shard] = true
		res.Shards = append(res.Shards, results.Shard{K: s.Info.Shard, N: s.Info.Of}.String())
	}
	for k := 1; k <= ref.Of; k++ {
		if !have[k] {
			sh := results.Shard{K: k, N: ref.Of}
			res.MissingShards = append(res.MissingShards, sh.String())
			res.MissingReplicas = append(res.MissingReplicas, sh.Part(ref.Total)...)
		}
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return res, err
	}
	if err := os.Mkdir(out, 0o755); err != nil {
		return res, fmt.Errorf("-o %s: %w (a merge writes a new directory)", out, err)
	}
	steps := []func([]Shard, string) error{copyExperiment, copyCA, copyLogs, writeTopology, mergeHarnessLog, mergeCapture, keepShardFiles}
	for _, step := range steps {
		if err := step(shards, out); err != nil {
			return res, err
		}
	}
	return res, writeRun(shards, out, res)
}

func copyExperiment(shards []Shard, out string) error {
	b, err := os.ReadFile(filepath.Join(shards[0].Dir, results.ExperimentFile))
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(out, results.ExperimentFile), b, 0o644)
}

// copyCA copies every certificate. The shards of a simulated run share
// their CA (it derives from the seed); shards run apart each made their
// own, and a replica whose CA is not the first shard's gets its own
// (ca/ca.rN.crt).
func copyCA(shards []Shard, out string) error {
	dst := filepath.Join(out, results.CADir)
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	var first []byte
	for _, s := range shards {
		src := filepath.Join(s.Dir, results.CADir)
		caCert, err := os.ReadFile(filepath.Join(src, results.CACertFile))
		if err != nil {
			return err
		}
		if first == nil {
			first = caCert
		} else if !bytes.Equal(first, caCert) {
			for _, it := range s.Info.Items {
				if err := os.WriteFile(filepath.Join(dst, results.ReplicaCACert(int(it))), caCert, 0o644); err != nil {
					return err
				}
			}
		}
		if err := copyTree(src, dst, map[string]bool{results.CACertFile: true}, s.Dir); err != nil {
			return err
		}
	}
	return os.WriteFile(filepath.Join(dst, results.CACertFile), first, 0o644)
}

// copyLogs copies every process's log; the harness's is merged.
func copyLogs(shards []Shard, out string) error {
	dst := filepath.Join(out, results.LogsDir)
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	for _, s := range shards {
		if err := copyTree(filepath.Join(s.Dir, results.LogsDir), dst, map[string]bool{results.HarnessLog: true}, s.Dir); err != nil {
			return err
		}
	}
	return nil
}

// copyTree copies the files of src (one level) into dst, but skip; a
// file already there is an overlap between shards, named with shard.
func copyTree(src, dst string, skip map[string]bool, shard string) error {
	ents, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if skip[e.Name()] || e.IsDir() {
			continue
		}
		to := filepath.Join(dst, e.Name())
		if _, err := os.Stat(to); err == nil {
			return fmt.Errorf("%s: %s: another shard has this file too: overlapping shards", shard, filepath.Join(filepath.Base(src), e.Name()))
		}
		if err := copyFile(filepath.Join(src, e.Name()), to); err != nil {
			return err
		}
	}
	return nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	o, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(o, in); err != nil {
		o.Close()
		return err
	}
	return o.Close()
}

// writeTopology is every shard's agents, in shard order, which is
// replica order (contiguous shards), as the whole run lists them.
func writeTopology(shards []Shard, out string) error {
	var t results.Topology
	for i, s := range shards {
		var st results.Topology
		if err := results.ReadJSON(s.Dir, results.TopologyFile, &st); err != nil {
			return fmt.Errorf("%s: %s: %w", s.Dir, results.TopologyFile, err)
		}
		if i == 0 {
			t.Port, t.Directions = st.Port, st.Directions
		}
		t.Agents = append(t.Agents, st.Agents...)
	}
	return results.WriteJSON(out, results.TopologyFile, t)
}

// keepShardFiles keeps each shard's shard.json and run.json under
// shards/K/: where and when each part ran.
func keepShardFiles(shards []Shard, out string) error {
	for _, s := range shards {
		d := filepath.Join(out, "shards", fmt.Sprint(s.Info.Shard))
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		for _, f := range []string{results.ShardFile, results.RunFile} {
			if err := copyFile(filepath.Join(s.Dir, f), filepath.Join(d, f)); err != nil {
				return err
			}
		}
	}
	return nil
}

// writeRun writes run.json: the run's, under its base ID, begun when the
// first shard began and finished when the last finished; its status the
// first shard's that is not ok, naming it.
func writeRun(shards []Shard, out string, res Result) error {
	info := shards[0].Run
	info.RunID, info.Replicas = shards[0].Info.BaseRunID, shards[0].Info.Total
	info.Status, info.Error = "ok", ""
	var errs []string
	starts := make([]int64, info.Replicas)
	apart := false
	for _, s := range shards {
		r := s.Run
		if r.Started.Before(info.Started) {
			info.Started = r.Started
		}
		if r.Finished.After(info.Finished) {
			info.Finished = r.Finished
		}
		if r.AgentsStartNS != shards[0].Run.AgentsStartNS {
			apart = true
		}
		if r.AgentsStartNS != 0 && r.AgentsStartNS < info.AgentsStartNS {
			info.AgentsStartNS = r.AgentsStartNS
		}
		for _, it := range s.Info.Items {
			starts[it] = r.AgentsStartNS
		}
		if r.Status != "ok" {
			if info.Status == "ok" {
				info.Status = r.Status
			}
			errs = append(errs, fmt.Sprintf("shard %d/%d (%s): %s %s", s.Info.Shard, s.Info.Of, s.Dir, r.Status, r.Error))
		}
	}
	if apart {
		info.ReplicaStartNS = starts
	}
	info.Error = strings.Join(errs, "; ")
	info.MissingShards, info.MissingReplicas = res.MissingShards, res.MissingReplicas
	return results.WriteJSON(out, results.RunFile, info)
}

// Plan is shard s of the run base of experiment e on backend: its
// replicas (Shard.Part of e.Replicas) and its shard.json, with this
// host and revision. The run runs under info.RunID.
func Plan(base string, s results.Shard, e *experiments.Experiment, backend, revision string) (*results.ShardInfo, error) {
	if s.N > e.Replicas {
		return nil, fmt.Errorf("--shard %s: %d shards of %d replicas: a shard would hold none (give --replicas)", s, s.N, e.Replicas)
	}
	host, _ := os.Hostname()
	info := &results.ShardInfo{BaseRunID: base, RunID: s.RunID(base), Shard: s.K, Of: s.N, Assignment: results.AssignContiguous,
		Unit: results.UnitReplicas, Total: e.Replicas, Experiment: e.Name, ExperimentHash: results.HashBytes(e.Raw), Seed: e.Seed,
		GitRevision: revision, Backend: backend, Host: host}
	for _, r := range s.Part(e.Replicas) {
		info.Items = append(info.Items, uint64(r))
	}
	return info, nil
}
