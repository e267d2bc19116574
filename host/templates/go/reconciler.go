// Package reconciler is {{name}}: it marks each ConfigMap labelled `{{name}}=true` as reconciled
// and says so in an Event.
package reconciler

import (
	"context"
	"fmt"
	"log/slog"

	"reconcile-host/guest"
	"reconcile-host/guest/client"
	"reconcile-host/guest/events"
)

// Mark is the annotation written on each object reconciled.
const Mark = "{{name}}.reconcile-host.dev/reconciled"

// configMap is the part of a ConfigMap this reconciler reads (a k8s.io/api type works too).
type configMap struct {
	Metadata struct {
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
}

// Reconcile marks the request's ConfigMap once.
func Reconcile(ctx context.Context, req guest.Request) (guest.Action, error) {
	var object configMap
	found, err := req.Decode(&object)
	if err != nil || !found {
		return guest.Done(), err // deleted: nothing to clean up
	}
	if object.Metadata.Annotations[Mark] == "true" {
		return guest.Done(), nil // marked already: writing again would only wake this reconcile again
	}
	patch := map[string]any{"metadata": map[string]any{"annotations": map[string]string{Mark: "true"}}}
	if _, err := client.Patch(req.Target, guest.MergePatch, patch, ""); err != nil {
		return guest.Action{}, fmt.Errorf("cannot mark %s: %w", req.Target, err)
	}
	if err := events.Record(req.Target, guest.Normal, "Reconciled", "marked by {{name}}"); err != nil {
		return guest.Action{}, err
	}
	slog.Info("marked " + req.Target.String())
	return guest.Done(), nil
}

func init() { guest.Register(Reconcile) }
