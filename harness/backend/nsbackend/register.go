package nsbackend

import "tokenbed/harness/backend"

var _ backend.Backend = (*Backend)(nil)

func init() {
	backend.Register("netns", "network namespaces joined by veth pairs and a bridge (the default)",
		func(backend.Options) backend.Backend { return New() })
}
