package guest

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
)

// Reconciler brings the world in line with the request's object and says when to look again.
// An error is logged by the host and retried with backoff.
type Reconciler func(ctx context.Context, req Request) (Action, error)

var registered Reconciler

// Register makes r the component's `reconcile` export. Call it once, from an init function of
// the reconciler's package. It also makes slog.Default() write to the host log.
func Register(r Reconciler) {
	if registered != nil {
		panic("guest.Register called twice: a component exports one reconciler")
	}
	registered = r
	slog.SetDefault(slog.New(NewLogHandler(nil)))
}

// Registered is the reconciler passed to Register, or nil.
func Registered() Reconciler { return registered }

// Reconcile runs r on req the way the component's export does: a panic is recovered and
// returned as an error whose message starts with "panic: " and carries the stack (the host
// logs it and retries with backoff; the instance is not poisoned). Tests call it to exercise
// the reconciler exactly as the host would.
func Reconcile(ctx context.Context, r Reconciler, req Request) (action Action, err error) {
	if r == nil {
		return Action{}, fmt.Errorf("no reconciler registered: call guest.Register(yourFunc) in an init function of the reconciler's package")
	}
	defer func() {
		if recovered := recover(); recovered != nil {
			action = Action{}
			err = fmt.Errorf("panic: %v\n%s", recovered, debug.Stack())
		}
	}()
	return r(ctx, req)
}
