package analysis

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"tokenbed/internal/results"
)

// Samples are the raw figures behind summary.json's statistics, read from
// a results directory as Analyze reads it: for comparing two runs'
// distributions (analysis/crossval: the simulator against real
// processes). Analyze writes the value samples to samples.json
// (writeSamples).
type Samples struct {
	Info results.RunInfo `json:"info"`
	// Latency is every completed pass's latency per direction ("A>B",
	// logical names: replicas pooled), in seconds, in the order of the
	// shared clock.
	Latency map[string][]float64 `json:"latency_s"`
	// Return is every return time per agent (logical name), in paper
	// seconds: the time between two successive hits of one instance.
	Return map[string][]float64 `json:"return_time_s"`
	// Acquisitions counts token_acquired events (every reason).
	Acquisitions int `json:"acquisitions"`
	// Intervals are the paper seconds between successive acquisitions
	// within one replica (any agent, any token): a visit, the hold and
	// the pass that ends it.
	Intervals []float64 `json:"intervals_s"`
	// Failures are the network failures tolerated (passes that failed at
	// the sender and kept the token), as Summary counts them.
	Failures []FailureSample `json:"failures"`
	// Losses are the causes of the token losses (Summary.Losses).
	Losses []string `json:"token_losses"`
}

// FailureSample is one tolerated network failure.
type FailureSample struct {
	PaperS     float64 `json:"paper_s"`
	Link       string  `json:"link"` // "A>C": from the sender to the receiver, logical names
	DetectedBy string  `json:"detected_by"`
}

// SamplesReader reads a run's samples for its protocol (token passing's:
// analysis/tokenpassing), from c.Dir().
type SamplesReader func(c *Context) (*Samples, error)

// ReadSamples reads the samples of the run in dir, by its protocol's
// reader (linked in as its analysis is: a blank import).
func ReadSamples(dir string) (*Samples, error) {
	info, topo, err := readRun(dir)
	if err != nil {
		return nil, err
	}
	c := NewContext(info, topo, nil, nil, nil)
	c.dir = dir
	r := plugin(c.protocol()).Samples
	if r == nil {
		return nil, fmt.Errorf("%s: protocol %q: no samples reader registered (link its plug-in, plugins/NAME, in by the binary's aggregator file, as harness/plugins.go does)", results.RunFile, c.protocol())
	}
	return r(c)
}

// writeSamples writes samples.json beside summary.json: the values behind
// the figures, by name ("latency_s.A>B", "return_time_s.A",
// "intervals_s"), so that nights can be compared as distributions
// (internal/resultsdb's samples) without reading the logs again. A
// protocol without a samples reader writes none.
func writeSamples(c *Context) error {
	r := plugin(c.protocol()).Samples
	if r == nil {
		return nil
	}
	s, err := r(c)
	if err != nil {
		return err
	}
	out := map[string][]float64{}
	for k, v := range s.Latency {
		out["latency_s."+k] = v
	}
	for k, v := range s.Return {
		out["return_time_s."+k] = v
	}
	if len(s.Intervals) > 0 {
		out["intervals_s"] = s.Intervals
	}
	// Compact: one value a line would triple the file.
	b, err := json.Marshal(out)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(c.dir, results.SamplesFile), append(b, '\n'), 0o644)
}
