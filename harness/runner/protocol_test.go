package runner

// The runner knows no protocol: its tests run token passing, the plug-in
// the harness registers.
import _ "tokenbed/harness/protocol/tokenpassing"
