// Package noop is the noop-go test guest: it reads the request and answers done, for comparing
// the host's dispatch cost across guest languages. A ConfigMap with the data key `panic`
// panics instead, to show that a Go panic is a reconcile error, not a trap.
package noop

import (
	"context"

	"reconcile-host/guest"
)

func init() { guest.Register(reconcile) }

func reconcile(_ context.Context, req guest.Request) (guest.Action, error) {
	var object struct {
		Data map[string]string `json:"data"`
	}
	if _, err := req.Decode(&object); err != nil {
		return guest.Action{}, err
	}
	if message, ok := object.Data["panic"]; ok {
		panic(message)
	}
	return guest.Done(), nil
}
