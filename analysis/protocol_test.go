package analysis

import (
	"encoding/json"
	"fmt"
	"sort"

	"tokenbed/agent/eventlog"
)

// A second protocol's checker, registered as its own package would
// register it: it reads the run only through Context's accessors (its
// events come with their own fields in Extra), and package analysis knows
// nothing of it. It judges mutual exclusion of a lock service's clients
// (seed 001): no two clients hold one lock at once.
const lockProtocol = "locktest"

func init() {
	Register(Plugin{Protocol: lockProtocol, Checkers: []NamedChecker{{"exclusion", CheckerFunc(func(c *Context) Requirement {
		type span struct {
			from, to int64
			who      string
		}
		open := map[string]int64{} // client → granted at
		var spans []span
		err := c.Events(func(e eventlog.Event) error {
			var lock string
			if raw, ok := e.Extra["lock"]; ok {
				if err := json.Unmarshal(raw, &lock); err != nil {
					return fmt.Errorf("%s seq %d: lock: %v", e.Agent, e.Seq, err)
				}
			}
			switch e.Kind {
			case "lock_granted":
				open[e.Agent] = e.MonoNS
			case "lock_released":
				spans = append(spans, span{open[e.Agent], e.MonoNS, e.Agent})
				delete(open, e.Agent)
			}
			return nil
		})
		if err != nil {
			return Unjudged(err.Error())
		}
		if len(spans) == 0 {
			return Unjudged("no lock was granted")
		}
		sort.Slice(spans, func(i, j int) bool { return spans[i].from < spans[j].from })
		for i := 1; i < len(spans); i++ {
			if spans[i].from < spans[i-1].to {
				c.Note("exclusion: %s and %s held the lock at once", spans[i-1].who, spans[i].who)
				r := VerdictOf(false)
				r.Value = fmt.Sprintf("%s granted while %s held it", spans[i].who, spans[i-1].who)
				return r
			}
		}
		r := VerdictOf(true)
		r.Value = fmt.Sprintf("%d critical sections, none overlapping", len(spans))
		return r
	})}}})
}
