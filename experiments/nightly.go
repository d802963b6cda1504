package experiments

import _ "embed"

// Nightly is experiments/nightly.yaml, the default night that harness
// campaign run runs without a file (its format: experiments/campaign).
//
//go:embed nightly.yaml
var Nightly []byte
