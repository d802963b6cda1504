package ctrbackend

import "tokenbed/harness/backend"

var _ backend.Backend = (*Backend)(nil)

func init() {
	backend.Register("container", "Docker containers (images built FROM scratch), one per agent",
		func(o backend.Options) backend.Backend { return New(Options{AgentBin: o.AgentBin, Log: o.Log}) })
}
