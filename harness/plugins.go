package main

// The protocol plug-ins this binary runs and analyses, each registered
// from its own packages' init: its run half (harness/protocol.Register)
// and its analysis half (analysis.Register), which import its declaration
// (protocols/NAME). Nothing else in the harness lists them: a new
// protocol is linked in by its two lines here.
import (
	_ "tokenbed/analysis/ftn"
	_ "tokenbed/harness/protocol/ftn"

	_ "tokenbed/analysis/tokenpassing"
	_ "tokenbed/harness/protocol/tokenpassing"
)
