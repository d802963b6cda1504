// Package policies links every circulation policy into a binary: importing
// it registers them all with package circulation. The agent binary and the
// token passing plug-in of the harness (which validates experiments'
// roles and runs agents in the simulator) import it, so both know the
// same roles. A new policy adds its blank import here.
package policies

import (
	_ "tokenbed/agent/circulation/randomwalk" // 002 §3.2, the default role
	_ "tokenbed/agent/circulation/wandering"  // seed 003, Fig. 1
)
