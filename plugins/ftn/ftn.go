// Package ftn links the FTN lock service's plug-in (seed 001) into a
// binary: its run half (harness/protocol/ftn) and its analysis half
// (analysis/ftn), each of which registers itself from init and imports
// the declaration both share (protocols/ftn). A binary's aggregator file
// blank-imports this package, one line for the protocol.
//
// The two halves cannot link each other: the analysis half's tests start
// runs through the run half, and the run half must not reach into the
// analysis. This package, above both, holds the pair.
package ftn

import (
	_ "tokenbed/analysis/ftn"
	_ "tokenbed/harness/protocol/ftn"
)
