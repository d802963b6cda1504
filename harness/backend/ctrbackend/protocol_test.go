package ctrbackend

// runner.Run needs a protocol plug-in registered: token passing.
import _ "tokenbed/harness/protocol/tokenpassing"
