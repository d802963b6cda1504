package ctrbackend

// Teardown: every object of the run, found by label and by record.

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Teardown implements backend.Backend: it removes every container (agents
// and pod holders: docker rm -f kills what still runs), the networks and
// the image of the run, found by label as well as by what was recorded,
// so that a half-finished Setup leaves nothing either.
func (b *Backend) Teardown(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	b.mu.Lock()
	procs := b.procs
	b.procs = nil
	pods := b.pods
	b.pods = map[string]*pod{}
	b.nets = nil
	b.mu.Unlock()
	var errs []error
	if b.cli != nil {
		var err error
		if _, err = clean(ctx, b.cli, b.spec.RunID); err != nil {
			errs = append(errs, err)
		}
	}
	for _, p := range procs {
		select {
		case <-p.done:
		case <-ctx.Done():
			errs = append(errs, fmt.Errorf("ctrbackend: %s did not end", p.name))
		}
	}
	for _, p := range pods {
		if p.ns >= 0 {
			p.ns.Close()
		}
	}
	if b.hostNS >= 0 {
		b.hostNS.Close()
		b.hostNS = -1
	}
	if b.prov != nil {
		b.prov.Close()
	}
	return errors.Join(errs...)
}
