package reconciler

import (
	"context"
	"errors"
	"slices"
	"testing"

	"reconcile-host/guest"
	"reconcile-host/guest/fake"
)

var configMapKind = guest.Kind{APIVersion: "v1", Kind: "ConfigMap"}

func sample(annotations map[string]any) map[string]any {
	return map[string]any{
		"apiVersion": "v1",
		"kind":       "ConfigMap",
		"metadata": map[string]any{
			"name":        "settings",
			"namespace":   "default",
			"labels":      map[string]any{"{{name}}": "true"},
			"annotations": annotations,
		},
		"data": map[string]any{"a": "1"},
	}
}

// verbs are the host calls the reconciler made, in order.
func verbs(host *fake.Host) []string {
	var verbs []string
	for _, call := range host.Calls {
		verbs = append(verbs, call.Verb)
	}
	return verbs
}

func TestAnUnmarkedConfigMapIsMarkedOnceWithAnEvent(t *testing.T) {
	host := fake.New(t)
	host.Add(sample(map[string]any{}))
	action, err := guest.Reconcile(context.Background(), Reconcile, host.Request(sample(map[string]any{})))
	if err != nil || action != guest.Done() {
		t.Fatalf("reconcile: %v, %v", action, err)
	}
	stored, _ := host.Object(configMapKind, "default", "settings")
	annotations := stored["metadata"].(map[string]any)["annotations"].(map[string]any)
	if annotations[Mark] != "true" {
		t.Fatalf("not marked: %v", annotations)
	}
	if got := verbs(host); !slices.Equal(got, []string{"patch", "events.record"}) {
		t.Fatalf("calls: %v", got)
	}
	if len(host.Events) != 1 || host.Events[0].Reason != "Reconciled" || host.Events[0].Type != guest.Normal {
		t.Fatalf("events: %+v", host.Events)
	}
	// Reconciled again (the patch wakes it): nothing more to do.
	if _, err := guest.Reconcile(context.Background(), Reconcile, host.Request(stored)); err != nil {
		t.Fatal(err)
	}
	if got := verbs(host); len(got) != 2 {
		t.Fatalf("a marked ConfigMap was written again: %v", got)
	}
}

func TestADeletedObjectNeedsNothing(t *testing.T) {
	host := fake.New(t)
	ref := guest.ObjectRef{Kind: configMapKind, Namespace: "default", Name: "settings"}
	action, err := guest.Reconcile(context.Background(), Reconcile, host.Absent(ref))
	if err != nil || action != guest.Done() || len(host.Calls) != 0 {
		t.Fatalf("%v, %v, calls %+v", action, err, host.Calls)
	}
}

func TestARefusedPatchFailsTheReconcile(t *testing.T) {
	host := fake.New(t)
	host.Add(sample(map[string]any{}))
	host.Fail = func(call fake.Call) error {
		if call.Verb == "patch" {
			return guest.Denied("no grant for patch on v1 ConfigMap")
		}
		return nil
	}
	_, err := guest.Reconcile(context.Background(), Reconcile, host.Request(sample(map[string]any{})))
	if !errors.Is(err, guest.ErrDenied) {
		t.Fatalf("want a denied call, got %v", err)
	}
}
