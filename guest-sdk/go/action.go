package guest

import (
	"fmt"
	"math"
	"time"
)

// ActionKind says what the host does with the key after a successful reconcile.
type ActionKind uint8

const (
	// ActionDone: nothing until the object or an owned object changes (or the resync period).
	ActionDone ActionKind = iota
	// ActionRequeue: reconcile again after the key's rate-limiter backoff.
	ActionRequeue
	// ActionRequeueAfter: reconcile again after Action.After.
	ActionRequeueAfter
)

// Action is the answer of a successful reconcile (the WIT `action`). The zero value is Done.
type Action struct {
	Kind ActionKind
	// After is the delay of ActionRequeueAfter, carried as whole milliseconds (at most
	// math.MaxUint32 ms, about 49 days); the host raises it to the plugin's minRequeueAfter.
	After time.Duration
}

// Done: look again only when the object or an owned object changes.
func Done() Action { return Action{Kind: ActionDone} }

// Requeue: look again soon, after the rate limiter's backoff for the key.
func Requeue() Action { return Action{Kind: ActionRequeue} }

// RequeueAfter: look again after d (rounded up to a millisecond; negative is 0).
func RequeueAfter(d time.Duration) Action { return Action{Kind: ActionRequeueAfter, After: d} }

// Millis is the delay in the WIT's unit: milliseconds, rounded up, clamped to a u32.
func (a Action) Millis() uint32 {
	if a.After <= 0 {
		return 0
	}
	ms := (a.After + time.Millisecond - 1) / time.Millisecond
	if ms > math.MaxUint32 {
		return math.MaxUint32
	}
	return uint32(ms)
}

// String is the action as the host's `reconcile` command prints it.
func (a Action) String() string {
	switch a.Kind {
	case ActionRequeue:
		return "requeue"
	case ActionRequeueAfter:
		return fmt.Sprintf("requeue-after %dms", a.Millis())
	default:
		return "done"
	}
}
