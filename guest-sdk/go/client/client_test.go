package client_test

import (
	"encoding/json"
	"errors"
	"testing"

	"reconcile-host/guest"
	"reconcile-host/guest/client"
	"reconcile-host/guest/fake"
)

var configMap = guest.Kind{APIVersion: "v1", Kind: "ConfigMap"}

func stored(t *testing.T, host *fake.Host, data string) {
	t.Helper()
	object, _ := host.Object(configMap, "default", "a")
	if got := object["data"].(map[string]any)["k"]; got != data {
		t.Fatalf("the stored data is %v, want %s", got, data)
	}
}

func TestApplyAtVersionWritesOnlyWhileTheObjectIsAtThatVersion(t *testing.T) {
	host := fake.New(t)
	host.Add(map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "a", "namespace": "default", "resourceVersion": "5"},
		"data":     map[string]any{"k": "read"}})
	type configMapValue struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Metadata   map[string]string `json:"metadata"`
		Data       map[string]string `json:"data"`
		Spec       struct{}          `json:"spec"`
	}
	object := configMapValue{APIVersion: "v1", Kind: "ConfigMap",
		Metadata: map[string]string{"name": "a", "namespace": "default"},
		Data:     map[string]string{"k": "written"}}
	var into configMapValue
	if _, err := client.ApplyAtVersion(object, "5", &into); err != nil {
		t.Fatal(err)
	}
	// The version is in what was sent, Go's empty `spec: {}` is dropped as Apply drops it, and
	// the caller's object is left as it was.
	if got, want := string(host.Calls[0].Body), `{"apiVersion":"v1","data":{"k":"written"},"kind":"ConfigMap",`+
		`"metadata":{"name":"a","namespace":"default","resourceVersion":"5"}}`; got != want {
		t.Fatalf("applied\n%s, want\n%s", got, want)
	}
	if !host.Calls[0].Force || host.Calls[0].Subresource != "" {
		t.Fatalf("applied with %+v, want force and no subresource", host.Calls[0])
	}
	if _, ok := object.Metadata["resourceVersion"]; ok || into.Data["k"] != "written" {
		t.Fatalf("the object became %+v, the stored one decoded as %+v", object, into)
	}
	stored(t, host, "written")

	// Another writer took the object to version 6: a write made from the read at 5 changes nothing.
	host.Add(map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "a", "namespace": "default", "resourceVersion": "6"},
		"data":     map[string]any{"k": "theirs"}})
	object.Data["k"] = "stale"
	_, err := client.ApplyAtVersion(object, "5")
	var status *guest.APIStatus
	if !errors.Is(err, guest.ErrConflict) || !errors.As(err, &status) || status.Reason != "Conflict" {
		t.Fatalf("a write at a stale version: err %v, want a 409 Conflict", err)
	}
	stored(t, host, "theirs")
}

func TestMergePatchAtVersionWritesOnlyWhileTheObjectIsAtThatVersion(t *testing.T) {
	host := fake.New(t)
	ref := host.Add(map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "a", "namespace": "default", "resourceVersion": "5"},
		"data":     map[string]any{"k": "read"}})
	patch := map[string]any{"data": map[string]any{"k": "patched"}}
	if _, err := client.MergePatchAtVersion(ref, patch, "5"); err != nil {
		t.Fatal(err)
	}
	call := host.Calls[0]
	if got, want := string(call.Body), `{"data":{"k":"patched"},"metadata":{"resourceVersion":"5"}}`; got != want ||
		call.Verb != "patch" || call.Target != ref || call.Subresource != "" {
		t.Fatalf("patched %+v with %s, want a merge patch of %v with %s", call, got, ref, want)
	}
	if _, ok := patch["metadata"]; ok {
		t.Fatalf("the caller's patch became %v", patch)
	}
	stored(t, host, "patched")

	_, err := client.MergePatchAtVersion(ref, json.RawMessage(`{"data":{"k":"stale"}}`), "4")
	if !errors.Is(err, guest.ErrConflict) {
		t.Fatalf("a patch at a stale version: err %v, want a 409 Conflict", err)
	}
	stored(t, host, "patched")
}

func TestWritesAtAVersionRefuseWhatCannotCarryOneWithoutACall(t *testing.T) {
	host := fake.New(t)
	ref := guest.ObjectRef{Kind: configMap, Namespace: "default", Name: "a"}
	refusals := map[string]func() error{
		"an empty version": func() error {
			_, err := client.ApplyAtVersion(map[string]any{"metadata": map[string]any{"name": "a"}}, "")
			return err
		},
		"an array": func() error {
			_, err := client.MergePatchAtVersion(ref, []map[string]any{{"op": "add"}}, "7")
			return err
		},
		"a string": func() error {
			_, err := client.ApplyAtVersion("text", "7")
			return err
		},
		"metadata that is not an object": func() error {
			_, err := client.MergePatchAtVersion(ref, []byte(`{"metadata":3}`), "7")
			return err
		},
	}
	for what, write := range refusals {
		if err := write(); err == nil {
			t.Errorf("%s was written", what)
		}
	}
	if len(host.Calls) != 0 {
		t.Fatalf("refused writes called the host: %+v", host.Calls)
	}
}
