package index

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"tokenbed/internal/resultsdb"
)

// envelope is summary.json's frame (analysis.Summary): read for the
// run's identity and checks, not flattened into figures.
var envelope = map[string]bool{
	"schema_version": true, "run_id": true, "experiment": true, "seed": true, "git_revision": true,
	"kernel": true, "backend": true, "impairment": true, "time_scale": true, "network_time_scale": true,
	"replicas": true, "status": true, "partial": true, "paper_seconds": true, "wall_seconds": true,
	"requirements": true, "check_names": true, "notes": true,
	// The host's CPU time is a fact of the machine, not a figure of the
	// job: a noisy neighbour is not the job's regression.
	"host_cpu": true, "engine": true,
}

// keyFields name the field that names an element of a list of objects
// in a figure's path ("directions.A>B.latency.p99_s"), by the list's
// name; any list whose elements all have distinct "name"s is keyed by
// them. An element's other fields (a token loss's agent) do not name it:
// two losses by one agent would collide.
var keyFields = map[string]string{"directions": "link", "agents": "agent"}

// fromSummary adds summary.json's checks and figures to x, and its
// identity where run.json did not give it. The file is read as JSON
// objects, not as analysis.Summary, so that a summary of another schema
// version gives what it has.
func fromSummary(x *resultsdb.Indexed, sum map[string]json.RawMessage) error {
	var errs []string
	str := func(k string, dst *string) {
		if *dst == "" && sum[k] != nil {
			json.Unmarshal(sum[k], dst)
		}
	}
	r := &x.Run
	str("run_id", &r.ID)
	str("experiment", &r.Experiment)
	str("backend", &r.Backend)
	str("kernel", &r.Kernel)
	if r.Revision == "" {
		var rev string
		str("git_revision", &rev)
		r.Revision, r.Dirty = strings.CutSuffix(rev, "-dirty")
	}
	if r.Seed == 0 && sum["seed"] != nil {
		json.Unmarshal(sum["seed"], &r.Seed)
	}
	if r.Status == "" {
		var st string
		str("status", &st)
		r.Status = statusOf(st)
	}

	var reqs map[string]struct {
		Verdict string `json:"verdict"`
		Pass    *bool  `json:"pass"`
		Value   string `json:"value"`
		Detail  string `json:"detail"`
	}
	if raw := sum["requirements"]; raw != nil {
		if err := json.Unmarshal(raw, &reqs); err != nil {
			errs = append(errs, fmt.Sprintf("requirements: %v", err))
		}
	}
	failed := false
	for _, name := range slices.Sorted(maps.Keys(reqs)) {
		q := reqs[name]
		v := q.Verdict
		if v == "" && q.Pass != nil { // schema 1: pass only
			v = map[bool]string{true: "pass", false: "fail"}[*q.Pass]
		}
		v = strings.ReplaceAll(v, " ", "_") // "not judged" → not_judged, as SQL prefers
		failed = failed || v == "fail"
		x.Checks = append(x.Checks, resultsdb.Check{Run: r.ID, Name: name, Verdict: v, Value: q.Value, Detail: q.Detail})
	}
	if failed && r.Status == resultsdb.RunPass {
		r.Status = resultsdb.RunFail
	}

	var wall, paper float64
	json.Unmarshal(sum["wall_seconds"], &wall)
	json.Unmarshal(sum["paper_seconds"], &paper)
	if wall > 0 {
		x.Figures = append(x.Figures, resultsdb.Figure{Name: "wall_seconds", Value: resultsdb.Val(wall), Unit: "s"})
		if paper > 0 {
			// The simulator's speed (and a real run's compression).
			x.Figures = append(x.Figures, resultsdb.Figure{Name: "paper_s_per_wall_s", Value: resultsdb.Val(paper / wall), Unit: "1"})
		}
	}
	for _, k := range slices.Sorted(maps.Keys(sum)) {
		if envelope[k] {
			continue
		}
		var v any
		if err := json.Unmarshal(sum[k], &v); err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", k, err))
			continue
		}
		flatten(&x.Figures, k, v, 0)
	}
	for i := range x.Figures {
		x.Figures[i].Run = r.ID
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// flatten adds every number under v as a figure named by its path. A
// statistics object ({"n": …, "p99_s": …}) gives its siblings their n;
// every list gives its length (path.count), and a list of objects named
// by a key field (listKey) one path per element. Token passing's direction
// objects carry the experiment's latency figures as "Paper" (nanoseconds),
// which become the paper column of the rescaled figures they are judged
// against.
func flatten(out *[]resultsdb.Figure, path string, v any, n int) {
	switch v := v.(type) {
	case float64:
		*out = append(*out, resultsdb.Figure{Name: path, Value: resultsdb.Val(v), Unit: unitOf(path), N: n})
	case bool:
		// Verdict-like flags are checks' business, not figures.
	case map[string]any:
		if c, ok := v["n"].(float64); ok {
			n = int(c)
		}
		paper, _ := v["Paper"].(map[string]any)
		for _, k := range slices.Sorted(maps.Keys(v)) {
			if k == "Paper" {
				continue
			}
			before := len(*out)
			flatten(out, path+"."+k, v[k], n)
			if paper != nil && len(*out) == before+1 {
				if p, ok := paperOf(paper, k); ok {
					(*out)[before].Paper = resultsdb.Val(p)
				}
			}
		}
	case []any:
		*out = append(*out, resultsdb.Figure{Name: path + ".count", Value: resultsdb.Val(float64(len(v)))})
		key := listKey(path, v)
		if key == "" {
			return
		}
		for _, e := range v {
			m := e.(map[string]any)
			name := m[key].(string)
			rest := maps.Clone(m)
			delete(rest, key)
			flatten(out, path+"."+name, rest, n)
		}
	}
}

// listKey is the key field naming every element of the list at path, ""
// when there is none (or an element is not an object, or two share a
// name).
func listKey(path string, list []any) string {
	if len(list) == 0 {
		return ""
	}
	cands := []string{"name"}
	if k, ok := keyFields[path[strings.LastIndex(path, ".")+1:]]; ok {
		cands = []string{k, "name"}
	}
	for _, k := range cands {
		seen := map[string]bool{}
		ok := true
		for _, e := range list {
			m, isObj := e.(map[string]any)
			if !isObj {
				return ""
			}
			s, isStr := m[k].(string)
			if !isStr || s == "" || seen[s] {
				ok = false
				break
			}
			seen[s] = true
		}
		if ok {
			return k
		}
	}
	return ""
}

// paperOf is the paper's value for the figure named k ("rescaled_p99_s"
// against "P99"), in seconds.
func paperOf(paper map[string]any, k string) (float64, bool) {
	stat, ok := strings.CutPrefix(k, "rescaled_")
	if !ok {
		return 0, false
	}
	stat, ok = strings.CutSuffix(stat, "_s")
	if !ok {
		return 0, false
	}
	ns, ok := paper[strings.ToUpper(stat[:1])+stat[1:]].(float64)
	if !ok || ns == 0 {
		return 0, false
	}
	return ns / 1e9, true
}

// volumeUnits are the whole numbers that measure how much work a closed
// loop of clients did in a wall-clock window (FTN's performance and the
// holds its checks read), not events that happen independently of the
// machine: they are given a unit so that harness trend does not judge
// them as Poisson counts (analysis/trend), which they are not. Two quiet
// runs of ftn-perf-throughput on one machine, one after the other, the
// same revision and seed, completed 10,001 and 16,831 operations in their
// 9.3 and 9.4 s windows (docs/studies/nightly.md): a conditional binomial test
// sees p 0 in a spread that is the machine's. The rate beside each
// (performance.ops_per_s) is one measured value a run, as wall_seconds.
var volumeUnits = map[string]string{
	"performance.ops_ok":  "operations",
	"performance.pairs":   "pairs",
	"performance.clients": "clients",
	"views.history_holds": "holds",
	"views.capture_holds": "holds",
}

// unitOf reads a figure's unit from its name's suffix.
func unitOf(path string) string {
	if u, ok := volumeUnits[path]; ok {
		return u
	}
	last := path[strings.LastIndex(path, ".")+1:]
	switch {
	case strings.HasSuffix(last, "_per_paper_s"), strings.HasSuffix(last, "_per_s"):
		return "1/s"
	case strings.HasSuffix(last, "_ms"):
		return "ms"
	case strings.HasSuffix(last, "_s"):
		return "s"
	case strings.HasSuffix(last, "_ns"):
		return "ns"
	}
	return ""
}
