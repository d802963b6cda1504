package main

// The protocol plug-ins this study runs and reads: token passing's run
// half, and its analysis half for the samples reader (analysis.ReadSamples).
import (
	_ "tokenbed/analysis/tokenpassing"
	_ "tokenbed/harness/protocol/tokenpassing"
)
