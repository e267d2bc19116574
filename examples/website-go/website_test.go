package website

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"reconcile-host/guest"
	"reconcile-host/guest/fake"
)

var (
	deploymentKind = guest.Kind{APIVersion: "apps/v1", Kind: "Deployment"}
	serviceKind    = guest.Kind{APIVersion: "v1", Kind: "Service"}
	websiteKind    = guest.Kind{APIVersion: APIVersion, Kind: Kind}
)

func website() map[string]any {
	return map[string]any{
		"apiVersion": APIVersion,
		"kind":       Kind,
		"metadata":   map[string]any{"name": "hello", "namespace": "default", "uid": "u-1", "generation": 2},
		"spec":       map[string]any{"image": "nginx:1.27", "replicas": 2},
	}
}

// jsonOf is v through JSON, for comparing with literal JSON.
func jsonOf(t *testing.T, v any) any {
	t.Helper()
	bytes, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(bytes, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func parse(t *testing.T, text string) any {
	t.Helper()
	var out any
	if err := json.Unmarshal([]byte(text), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestDeploymentRunsTheImageWithTheReplicasAndIsOwnedByTheWebsite(t *testing.T) {
	host := fake.New(t)
	host.Add(website())
	action, err := guest.Reconcile(context.Background(), Reconcile, host.Request(website()))
	if err != nil {
		t.Fatal(err)
	}
	if action != guest.RequeueAfter(recheck) || action.Millis() != 60000 {
		t.Fatalf("action %v, want requeue-after 60000ms", action)
	}
	deployment, ok := host.Object(deploymentKind, "default", "hello")
	if !ok {
		t.Fatalf("no Deployment; calls %+v", host.Calls)
	}
	want := parse(t, `{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": {"name": "hello", "namespace": "default", "uid": "uid-hello",
			"labels": {"app.kubernetes.io/name": "hello"},
			"ownerReferences": [{"apiVersion": "go.example.com/v1", "kind": "Website", "name": "hello",
				"uid": "u-1", "controller": true, "blockOwnerDeletion": true}]},
		"spec": {"replicas": 2,
			"selector": {"matchLabels": {"app.kubernetes.io/name": "hello"}},
			"template": {"metadata": {"labels": {"app.kubernetes.io/name": "hello"}},
				"spec": {"containers": [{"name": "web", "image": "nginx:1.27",
					"ports": [{"name": "http", "containerPort": 80}]}]}}}}`)
	if got := jsonOf(t, deployment); !reflect.DeepEqual(got, want) {
		t.Fatalf("Deployment\n got %v\nwant %v", got, want)
	}
}

func TestServiceSelectsThePodsOnPort80(t *testing.T) {
	host := fake.New(t)
	host.Add(website())
	if _, err := guest.Reconcile(context.Background(), Reconcile, host.Request(website())); err != nil {
		t.Fatal(err)
	}
	service, _ := host.Object(serviceKind, "default", "hello")
	spec := jsonOf(t, service["spec"])
	want := parse(t, `{"selector": {"app.kubernetes.io/name": "hello"},
		"ports": [{"name": "http", "port": 80, "targetPort": 80}]}`)
	if !reflect.DeepEqual(spec, want) {
		t.Fatalf("Service spec\n got %v\nwant %v", spec, want)
	}
}

func TestTheStatusSaysWhatWasApplied(t *testing.T) {
	host := fake.New(t)
	host.Add(website())
	if _, err := guest.Reconcile(context.Background(), Reconcile, host.Request(website())); err != nil {
		t.Fatal(err)
	}
	stored, _ := host.Object(websiteKind, "default", "hello")
	want := parse(t, `{"observedGeneration": 2, "image": "nginx:1.27", "replicas": 2,
		"deployment": "hello", "service": "hello"}`)
	if got := jsonOf(t, stored["status"]); !reflect.DeepEqual(got, want) {
		t.Fatalf("status\n got %v\nwant %v", got, want)
	}
	last := host.Calls[len(host.Calls)-1]
	if last.Verb != "apply" || last.Subresource != "status" || !last.Force {
		t.Fatalf("the last call is %+v, want a forced status apply", last)
	}
	if len(host.Logs) != 1 || !strings.Contains(host.Logs[0].Message, "serves nginx:1.27 with 2 replicas") {
		t.Fatalf("logs %+v", host.Logs)
	}
}

func TestADeletedWebsiteIsDoneWithoutCalls(t *testing.T) {
	host := fake.New(t)
	ref := guest.ObjectRef{Kind: websiteKind, Namespace: "default", Name: "gone"}
	action, err := guest.Reconcile(context.Background(), Reconcile, host.Absent(ref))
	if err != nil || action != guest.Done() || len(host.Calls) != 0 {
		t.Fatalf("action %v, err %v, calls %+v", action, err, host.Calls)
	}
}

func TestADeniedStatusWriteIsAnErrorNamingTheStatusAndTheGrant(t *testing.T) {
	host := fake.New(t)
	host.Add(website())
	host.Fail = func(call fake.Call) error {
		if call.Subresource == "status" {
			return guest.Denied("plugin `website-go` has no grant to `patch` go.example.com/v1 Website/status")
		}
		return nil
	}
	_, err := guest.Reconcile(context.Background(), Reconcile, host.Request(website()))
	if !errors.Is(err, guest.ErrDenied) {
		t.Fatalf("err %v, want ErrDenied", err)
	}
	if !strings.HasPrefix(err.Error(), "failed to apply the Website's status: the plugin may not make the call") {
		t.Fatalf("err %q", err)
	}
}

func TestAWebsiteWithoutUIDCannotOwnChildren(t *testing.T) {
	fake.New(t)
	object := website()
	delete(object["metadata"].(map[string]any), "uid")
	host := fake.New(t)
	_, err := guest.Reconcile(context.Background(), Reconcile, host.Request(object))
	if err == nil || err.Error() != "the Website has no uid" {
		t.Fatalf("err %v", err)
	}
}
