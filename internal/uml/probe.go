package uml

import (
	"context"
	"sync"
	"time"
)

var (
	probeOnce sync.Once
	probeErr  error
)

// Probe boots one guest that runs true(1), once per process, and returns
// its error: nil when this machine runs UML guests. Available checks what
// is installed; Probe finds what only a boot shows, such as ErrHostCPU.
func Probe() error {
	probeOnce.Do(func() {
		if probeErr = Available(); probeErr != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		_, probeErr = Run(ctx, Job{Argv: []string{"true"}, CPU: -1, Timeout: 2 * time.Minute})
	})
	return probeErr
}
