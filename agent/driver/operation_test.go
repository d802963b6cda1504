package driver

import (
	"slices"
	"testing"

	"tokenbed/agent/eventlog"
	"tokenbed/agent/resource"
)

// recordingOp records what the driver asked of the operation.
type recordingOp struct{ calls []string }

var _ resource.Operation = (*recordingOp)(nil)

func (o *recordingOp) Kind() string        { return "recording" }
func (o *recordingOp) Start(token string)  { o.calls = append(o.calls, "start "+token) }
func (o *recordingOp) Finish(token string) { o.calls = append(o.calls, "finish "+token) }
func (o *recordingOp) Close()              { o.calls = append(o.calls, "close") }

// The driver starts the operation on op_started and ends it on
// op_finished, by token, and ignores every other event (the node's batch
// is fed as it would come out of Ready).
func TestOperationFollowsOpEvents(t *testing.T) {
	op := &recordingOp{}
	d := &Driver{Op: op}
	d.operate([]eventlog.Event{
		{Kind: eventlog.TokenAcquired, Token: "1@A"},
		{Kind: eventlog.OpStarted, Token: "1@A"},
	})
	d.operate([]eventlog.Event{{Kind: eventlog.PassStarted, Token: "1@A"}})
	d.operate([]eventlog.Event{
		{Kind: eventlog.OpStarted, Token: "2@B"},
		{Kind: eventlog.OpFinished, Token: "1@A"},
		{Kind: eventlog.TokenReleased, Token: "1@A"},
		{Kind: eventlog.OpFinished, Token: "2@B"},
	})
	want := []string{"start 1@A", "start 2@B", "finish 1@A", "finish 2@B"}
	if !slices.Equal(op.calls, want) {
		t.Errorf("operation calls %q, want %q", op.calls, want)
	}
	(&Driver{}).operate([]eventlog.Event{{Kind: eventlog.OpStarted, Token: "1@A"}}) // no operation: nothing to do
}
