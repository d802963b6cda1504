package main

// The protocol plug-in this study runs and reads: token passing, both
// halves (the analysis half for the samples reader, analysis.ReadSamples).
import _ "tokenbed/plugins/tokenpassing"
