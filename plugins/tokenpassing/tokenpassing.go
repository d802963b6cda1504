// Package tokenpassing links token passing's plug-in (seed 002) into a
// binary: its run half (harness/protocol/tokenpassing) and its analysis
// half (analysis/tokenpassing), each of which registers itself from init
// and imports the declaration both share (protocols/tokenpassing). A
// binary's aggregator file blank-imports this package, one line for the
// protocol.
//
// The two halves cannot link each other: the analysis half's tests start
// runs through the run half, and the run half must not reach into the
// analysis. This package, above both, holds the pair.
package tokenpassing

import (
	_ "tokenbed/analysis/tokenpassing"
	_ "tokenbed/harness/protocol/tokenpassing"
)
