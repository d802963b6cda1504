package experiments

import (
	"time"

	"tokenbed/internal/strictyaml"
)

// FaultMix is an experiment's optional swarm section: the faults `harness swarm` draws, per seed, on top of
// the experiment's own schedule. Each kind gives how many faults a run
// may get (uniform in 0..Count) and how long each lasts (uniform in
// [Min, Max]); a run without the section is never swarmed.
//
//	swarm:
//	  outages: {count: 3, min: 200ms, max: 5s}
//	  crashes: {count: 1, min: 1s, max: 30s}
//	  restarts: 0.8
//	  profile_changes: {count: 2, min: 1s, max: 60s}
//	  duplicate: 5
//	  reorder: 25
//	  loss: 10
type FaultMix struct {
	// Outages: 100% loss on a link (one direction or both) for a while.
	Outages FaultKind `yaml:"outages"`
	// Crashes: SIGKILL of an agent or of the holder; the length is the
	// time until its restart, if it restarts.
	Crashes FaultKind `yaml:"crashes"`
	// Restarts is the probability that a crashed agent restarts (0..1).
	Restarts float64 `yaml:"restarts"`
	// ProfileChanges: a direction's profile gets some duplication,
	// reordering and loss for a while, then its own profile back.
	ProfileChanges FaultKind `yaml:"profile_changes"`
	// Duplicate, Reorder and Loss are the largest percentages a profile
	// change adds (each drawn uniformly in 0..it).
	Duplicate float64 `yaml:"duplicate"`
	Reorder   float64 `yaml:"reorder"`
	Loss      float64 `yaml:"loss"`
}

// FaultKind is how many faults of one kind a run gets and how long each.
type FaultKind struct {
	Count int           `yaml:"count"`
	Min   time.Duration `yaml:"min"`
	Max   time.Duration `yaml:"max"`
}

// checkFaultMix validates the swarm section against the run's length.
func checkFaultMix(m *FaultMix, duration time.Duration, yf *strictyaml.File) {
	if m == nil {
		return
	}
	kind := func(name string, k FaultKind) {
		path := "$.swarm." + name
		switch {
		case k.Count < 0 || k.Count > 1000:
			yf.Errorf(path+".count", "must be in 0..1000, got %d", k.Count)
		case k.Count > 0 && (k.Min <= 0 || k.Max < k.Min):
			yf.Errorf(path, "give 0 < min ≤ max (paper time), got min %v, max %v", k.Min, k.Max)
		case k.Max >= duration:
			yf.Errorf(path+".max", "%v is not shorter than the run (%v)", k.Max, duration)
		}
	}
	kind("outages", m.Outages)
	kind("crashes", m.Crashes)
	kind("profile_changes", m.ProfileChanges)
	if m.Restarts < 0 || m.Restarts > 1 {
		yf.Errorf("$.swarm.restarts", "a probability in 0..1, got %v", m.Restarts)
	}
	for _, p := range []struct {
		name string
		v    float64
	}{{"duplicate", m.Duplicate}, {"reorder", m.Reorder}, {"loss", m.Loss}} {
		if p.v < 0 || p.v > 100 {
			yf.Errorf("$.swarm."+p.name, "a percentage in 0..100, got %v", p.v)
		}
	}
	if m.Outages.Count+m.Crashes.Count+m.ProfileChanges.Count == 0 {
		yf.Errorf("$.swarm", "draws no fault: give outages, crashes or profile_changes a count")
	}
	if m.ProfileChanges.Count > 0 && m.Duplicate+m.Reorder+m.Loss == 0 {
		yf.Errorf("$.swarm.profile_changes", "a profile change needs duplicate, reorder or loss to add")
	}
}
