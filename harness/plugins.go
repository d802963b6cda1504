package main

// The protocol plug-ins this binary runs and analyses, one line each:
// plugins/NAME links a protocol's run half and its analysis half, which
// register themselves from init. Nothing else in the harness lists them:
// a new protocol is linked in by its line here.
import (
	_ "tokenbed/plugins/ftn"
	_ "tokenbed/plugins/tokenpassing"
)
