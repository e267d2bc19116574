package guest_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"reconcile-host/guest"
	"reconcile-host/guest/client"
	"reconcile-host/guest/fake"
)

func TestCallErrorsMatchTheirSentinelsAndCarryTheAPIStatus(t *testing.T) {
	err := fmt.Errorf("failed to apply the Deployment: %w", guest.API(409, "AlreadyExists", "exists"))
	if !errors.Is(err, guest.ErrConflict) || !errors.Is(err, guest.ErrAlreadyExists) || errors.Is(err, guest.ErrNotFound) {
		t.Fatalf("409 AlreadyExists matched wrongly: %v", err)
	}
	var status *guest.APIStatus
	if !errors.As(err, &status) || status.Code != 409 || status.Reason != "AlreadyExists" {
		t.Fatalf("errors.As gave %+v", status)
	}
	denied := guest.Denied("no grant to patch")
	if !errors.Is(denied, guest.ErrDenied) || errors.Is(denied, guest.ErrConflict) {
		t.Fatalf("denied matched wrongly: %v", denied)
	}
	if !errors.Is(guest.API(404, "NotFound", "x"), guest.ErrNotFound) {
		t.Fatal("404 is not ErrNotFound")
	}
}

func TestRequeueAfterIsWholeMillisecondsRoundedUpAndClamped(t *testing.T) {
	cases := map[time.Duration]uint32{
		time.Minute: 60000, 1500 * time.Microsecond: 2, -time.Second: 0, 2000 * time.Hour: 1<<32 - 1,
	}
	for d, want := range cases {
		if got := guest.RequeueAfter(d).Millis(); got != want {
			t.Errorf("RequeueAfter(%v).Millis() = %d, want %d", d, got, want)
		}
	}
	if guest.Done() != (guest.Action{}) {
		t.Error("the zero Action is not Done")
	}
}

func TestAPanicIsAReconcileErrorWithItsValueAndStack(t *testing.T) {
	fake.New(t)
	panicking := func(context.Context, guest.Request) (guest.Action, error) {
		var m map[string]int
		m["boom"] = 1
		return guest.Done(), nil
	}
	_, err := guest.Reconcile(context.Background(), panicking, guest.Request{})
	if err == nil || !strings.HasPrefix(err.Error(), "panic: assignment to entry in nil map") ||
		!strings.Contains(err.Error(), "guest_test.go") {
		t.Fatalf("err %v", err)
	}
}

func TestSlogWritesOneLineWithAttributesToTheHostLog(t *testing.T) {
	host := fake.New(t)
	slog.Debug("applied the Deployment", "replicas", 2)
	if len(host.Logs) != 1 || host.Logs[0].Level != slog.LevelDebug ||
		host.Logs[0].Message != "applied the Deployment replicas=2" {
		t.Fatalf("logs %+v", host.Logs)
	}
}

func TestSpanAttributeLogsTheLineTheHostReadsAsAnAttribute(t *testing.T) {
	host := fake.New(t)
	guest.SpanAttribute("shard", "3")
	if len(host.Logs) != 1 || host.Logs[0].Level != slog.LevelDebug ||
		host.Logs[0].Message != "span.attribute shard=3" {
		t.Fatalf("logs %+v", host.Logs)
	}
}

func TestApplyDropsTheEmptyObjectsGoWritesButKeepsMeaningfulOnes(t *testing.T) {
	host := fake.New(t)
	type spec struct {
		Strategy struct{} `json:"strategy"`
		Selector struct{} `json:"selector"`
		Volumes  []any    `json:"volumes"`
		Status   *string  `json:"status"`
	}
	object := map[string]any{
		"apiVersion": "v1", "kind": "Thing", "metadata": map[string]any{"name": "a"},
		"spec": spec{Volumes: []any{map[string]any{"emptyDir": map[string]any{}}, map[string]any{}}},
	}
	if _, err := client.Apply(object); err != nil {
		t.Fatal(err)
	}
	if got := string(host.Calls[0].Body); got != `{"apiVersion":"v1","kind":"Thing","metadata":{"name":"a"},"spec":{"selector":{},"volumes":[{"emptyDir":{}},{}]}}` {
		t.Fatalf("applied %s", got)
	}
}

func TestFinalizerIsAddedThenCleanupRunsOnDeletionAndRemovesIt(t *testing.T) {
	host := fake.New(t)
	object := map[string]any{"apiVersion": "example.com/v1", "kind": "Thing",
		"metadata": map[string]any{"name": "a", "namespace": "default", "resourceVersion": "7"}}
	ref := host.Add(object)
	var applied, cleaned int
	apply := func(guest.Request) (guest.Action, error) { applied++; return guest.Done(), nil }
	cleanup := func(guest.Request) (guest.Action, error) { cleaned++; return guest.Done(), nil }

	if _, err := guest.Finalizer(host.Request(object), "example.com/cleanup", apply, cleanup); err != nil {
		t.Fatal(err)
	}
	stored, _ := host.Object(ref.Kind, ref.Namespace, ref.Name)
	if fmt.Sprint(stored["metadata"].(map[string]any)["finalizers"]) != "[example.com/cleanup]" || applied != 1 {
		t.Fatalf("after the first call: %v, applied %d", stored, applied)
	}
	stored["metadata"].(map[string]any)["deletionTimestamp"] = "2026-01-01T00:00:00Z"
	if _, err := guest.Finalizer(host.Request(stored), "example.com/cleanup", apply, cleanup); err != nil {
		t.Fatal(err)
	}
	stored, _ = host.Object(ref.Kind, ref.Namespace, ref.Name)
	if fmt.Sprint(stored["metadata"].(map[string]any)["finalizers"]) != "[]" || cleaned != 1 {
		t.Fatalf("after deletion: %v, cleaned %d", stored, cleaned)
	}
}

func TestCallsOutsideAComponentOrTestSayHowToGetAHost(t *testing.T) {
	_, err := client.Apply(map[string]any{})
	if !errors.Is(err, guest.ErrUnavailable) || !strings.Contains(err.Error(), "fake.New") {
		t.Fatalf("err %v", err)
	}
}
