package guest

import (
	"fmt"
	"log/slog"
)

// Kind is a Kubernetes kind as written in an object's apiVersion and kind fields.
type Kind struct {
	// APIVersion is "group/version", or "version" for the core group: "v1", "apps/v1".
	APIVersion string
	// Kind is the kind's name: "ConfigMap", "Deployment".
	Kind string
}

// ObjectRef names one object.
type ObjectRef struct {
	Kind Kind
	// Namespace is empty for cluster-scoped kinds.
	Namespace string
	Name      string
}

// String is "apiVersion Kind namespace/name" (or "apiVersion Kind name").
func (r ObjectRef) String() string {
	if r.Namespace == "" {
		return fmt.Sprintf("%s %s %s", r.Kind.APIVersion, r.Kind.Kind, r.Name)
	}
	return fmt.Sprintf("%s %s %s/%s", r.Kind.APIVersion, r.Kind.Kind, r.Namespace, r.Name)
}

// PatchType is the format of a patch body.
type PatchType uint8

const (
	// MergePatch is a JSON merge patch (RFC 7386).
	MergePatch PatchType = iota
	// JSONPatch is a JSON patch (RFC 6902).
	JSONPatch
	// StrategicMergePatch is a strategic merge patch (built-in kinds only).
	StrategicMergePatch
)

// EventType says whether an Event is routine or worth a look.
type EventType uint8

const (
	// Normal: routine ("Created", "Synced").
	Normal EventType = iota
	// Warning: something failed or looks wrong.
	Warning
)

// Host is the host's imports in Go types: JSON objects as bytes, an empty namespace, selector
// or subresource for the WIT's `none`, failures as *CallError. A component uses the real host
// (the generated bindings); tests use package fake. Objects are never retained by a Host after
// a call returns.
type Host interface {
	// CacheGet is `cache.get`: the cached object, or found=false.
	CacheGet(kind Kind, namespace, name string) (object []byte, found bool, err error)
	// CacheList is `cache.list`, ordered by namespace and name.
	CacheList(kind Kind, namespace, labelSelector string) ([][]byte, error)
	// Apply is `client.apply` (server-side apply).
	Apply(object []byte, force bool, subresource string) ([]byte, error)
	// Patch is `client.patch`.
	Patch(target ObjectRef, patchType PatchType, body []byte, subresource string) ([]byte, error)
	// Create is `client.create`.
	Create(object []byte) ([]byte, error)
	// Replace is `client.replace`.
	Replace(object []byte) ([]byte, error)
	// Delete is `client.delete`.
	Delete(target ObjectRef) error
	// Get is `client.get`: the live object, or found=false.
	Get(target ObjectRef) (object []byte, found bool, err error)
	// RecordEvent is `events.record-event`.
	RecordEvent(regarding ObjectRef, eventType EventType, reason, note string) error
	// Log is `log.log`; levels below Debug are trace, above Warn error.
	Log(level slog.Level, message string)
}

// current is the host the package-level calls go to: the component's imports when built for
// wasip1 (set in host_wasip1.go), a fake in tests.
var current Host = missingHost{}

// CurrentHost is the host that calls go to now (packages client, cache and events use it).
func CurrentHost() Host { return current }

// SetHost makes calls go to h and returns a function that puts the previous host back. Tests
// use it through package fake; a component never needs it.
func SetHost(h Host) (restore func()) {
	previous := current
	current = h
	slog.SetDefault(slog.New(NewLogHandler(nil)))
	return func() { current = previous }
}

// missingHost answers every call with an error saying how to get a host.
type missingHost struct{}

const noHost = "no reconcile host: this code runs outside a component; in a test, call fake.New() first"

func (missingHost) CacheGet(Kind, string, string) ([]byte, bool, error) {
	return nil, false, Unavailable(noHost)
}
func (missingHost) CacheList(Kind, string, string) ([][]byte, error) {
	return nil, Unavailable(noHost)
}
func (missingHost) Apply([]byte, bool, string) ([]byte, error) { return nil, Unavailable(noHost) }
func (missingHost) Patch(ObjectRef, PatchType, []byte, string) ([]byte, error) {
	return nil, Unavailable(noHost)
}
func (missingHost) Create([]byte) ([]byte, error)       { return nil, Unavailable(noHost) }
func (missingHost) Replace([]byte) ([]byte, error)      { return nil, Unavailable(noHost) }
func (missingHost) Delete(ObjectRef) error              { return Unavailable(noHost) }
func (missingHost) Get(ObjectRef) ([]byte, bool, error) { return nil, false, Unavailable(noHost) }
func (missingHost) RecordEvent(ObjectRef, EventType, string, string) error {
	return Unavailable(noHost)
}
func (missingHost) Log(slog.Level, string) {}
