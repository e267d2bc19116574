// Package broken is the broken-go test guest: a reconciler whose package forgets to call
// guest.Register, the mistake a newcomer makes first. `reconcile-host check` must fail on it
// and show the SDK's message naming guest.Register.
package broken

import (
	"context"

	"reconcile-host/guest"
)

// reconcile would answer done, but nothing registers it (no init function calls
// guest.Register(reconcile)).
func reconcile(_ context.Context, _ guest.Request) (guest.Action, error) {
	return guest.Done(), nil
}

var _ guest.Reconciler = reconcile
