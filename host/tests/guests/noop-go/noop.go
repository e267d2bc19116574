// Package noop is the noop-go test guest: like the other languages' noop guests it reads the
// request (the object's JSON text, not parsed) and answers done, for comparing the host's
// dispatch cost across guest languages. An object whose text names `panic` or `decode` is
// decoded: a ConfigMap with the data key `panic` panics, to show that a Go panic is a reconcile
// error, not a trap; one with the data key `decode` is decoded and answered done, to make the
// Go heap work.
package noop

import (
	"bytes"
	"context"

	"reconcile-host/guest"
)

func init() { guest.Register(reconcile) }

var (
	panicKey  = []byte(`"panic"`)
	decodeKey = []byte(`"decode"`)
)

func reconcile(_ context.Context, req guest.Request) (guest.Action, error) {
	if !bytes.Contains(req.Object, panicKey) && !bytes.Contains(req.Object, decodeKey) {
		return guest.Done(), nil
	}
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
