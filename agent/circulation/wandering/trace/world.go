package trace

import (
	"container/heap"
	"fmt"
	"math/rand/v2"
	"time"

	"tokenbed/agent/circulation"
	"tokenbed/agent/wire"
)

// World runs one circulation policy per agent in virtual time, as seed
// 003 §3's simulator does: a pass is instantaneous ("we do not simulate
// variable durations of the token passing operation"), a generated token
// is acquired at once, and the protected operations are what the
// policies say (OpStart, OpEnd). A loss, when due, makes the next pass
// lose its token in transit. It is the policies' own code on an ideal
// network, for tests of their figures; harness/sim runs the whole agent.
type World struct {
	pols  []circulation.Policy
	names []string
	index map[string]int
	q     wakes
	seq   int
	gen   int64
	open  map[[2]string]time.Time // (agent, token) → start of its A
	// Ops are the protected operations run, in paper seconds from T0.
	Ops []Interval
	// Generated counts the tokens generated (Generate actions), Lost
	// those lost in transit.
	Generated, Lost int
	nextLoss        time.Time
	lossEvery       time.Duration
}

// Interval is one execution of A, in seconds from T0.
type Interval struct{ From, To float64 }

// NewWorld starts pols as agents a0, a1, ... at T0, each with its own
// random source split from seed.
func NewWorld(pols []circulation.Policy, seed uint64) *World {
	w := &World{pols: pols, index: map[string]int{}, open: map[[2]string]time.Time{}}
	for i := range pols {
		w.names = append(w.names, fmt.Sprint("a", i))
		w.index[w.names[i]] = i
	}
	r := rand.New(rand.NewPCG(seed, 3))
	for i, p := range pols {
		var peers []string
		for j, nm := range w.names {
			if j != i {
				peers = append(peers, nm)
			}
		}
		h := &Host{Name: w.names[i], Members: peers, R: rand.New(rand.NewPCG(r.Uint64(), uint64(i)))}
		w.act(i, T0, p.Start(h, T0))
	}
	return w
}

// Generate has agent i generate a token now (the start of the system).
func (w *World) Generate(i int, now time.Time) {
	w.act(i, now, []circulation.Action{{Kind: circulation.Generate, Reason: "start"}})
}

// LoseEvery loses the token of the first pass at or after every multiple
// of d (003 §3: "we injected token loss events every 10^4 seconds").
func (w *World) LoseEvery(d time.Duration) { w.lossEvery, w.nextLoss = d, T0.Add(d) }

// Run runs the agents' timers until end.
func (w *World) Run(end time.Time) {
	for w.q.Len() > 0 {
		k := heap.Pop(&w.q).(wake)
		if k.at.After(end) {
			heap.Push(&w.q, k)
			return
		}
		if d, ok := w.pols[k.agent].Deadline(); !ok || d.After(k.at) {
			continue // stale wake-up
		}
		w.act(k.agent, k.at, w.pols[k.agent].Tick(k.at))
	}
}

func (w *World) schedule(i int) {
	if d, ok := w.pols[i].Deadline(); ok {
		w.seq++
		heap.Push(&w.q, wake{d, i, w.seq})
	}
}

func (w *World) act(i int, now time.Time, acts []circulation.Action) {
	for _, a := range acts {
		switch a.Kind {
		case circulation.Generate:
			w.gen++
			w.Generated++
			tok := wire.TokenID{Gen: now.UnixNano() + w.gen, Origin: w.names[i]}
			w.act(i, now, w.pols[i].Acquired(now, tok, circulation.ByGeneration, a.Reason))
		case circulation.Pass:
			w.act(i, now, w.pols[i].Passed(now, a.Token, a.Peer))
			if w.lossEvery > 0 && !now.Before(w.nextLoss) {
				w.nextLoss = w.nextLoss.Add(w.lossEvery)
				w.Lost++
				continue
			}
			j := w.index[a.Peer]
			w.act(j, now, w.pols[j].Acquired(now, a.Token, circulation.ByPass, ""))
		case circulation.OpStart:
			w.open[[2]string{w.names[i], a.Token.String()}] = now
		case circulation.OpEnd:
			k := [2]string{w.names[i], a.Token.String()}
			if s, ok := w.open[k]; ok {
				w.Ops = append(w.Ops, Interval{s.Sub(T0).Seconds(), now.Sub(T0).Seconds()})
				delete(w.open, k)
			}
		}
	}
	w.schedule(i)
}

// Close ends the operations still running at end.
func (w *World) Close(end time.Time) {
	for k, s := range w.open {
		w.Ops = append(w.Ops, Interval{s.Sub(T0).Seconds(), end.Sub(T0).Seconds()})
		delete(w.open, k)
	}
}

type wake struct {
	at    time.Time
	agent int
	seq   int
}

type wakes []wake

func (w wakes) Len() int { return len(w) }
func (w wakes) Less(i, j int) bool {
	if !w[i].at.Equal(w[j].at) {
		return w[i].at.Before(w[j].at)
	}
	return w[i].seq < w[j].seq
}
func (w wakes) Swap(i, j int) { w[i], w[j] = w[j], w[i] }
func (w *wakes) Push(x any)   { *w = append(*w, x.(wake)) }
func (w *wakes) Pop() any {
	o := *w
	x := o[len(o)-1]
	*w = o[:len(o)-1]
	return x
}
