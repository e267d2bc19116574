package guest

import (
	"encoding/json"
	"fmt"
)

// Request is one reconcile (the WIT `request`): which object to look at and the object as the
// host's cache holds it now. Reconcilers are level-based: it never says what changed.
type Request struct {
	// Target is the kind, namespace and name of the object to reconcile (the `for` kind).
	Target ObjectRef
	// Object is the cached object as JSON; nil when it is not in the plugin's cache (deleted,
	// or no longer matching the manifest's labelSelector or namespace).
	Object []byte
	// Requeues counts the retries in a row of this key (after an error or Requeue).
	Requeues uint32
}

// Name of the object to reconcile.
func (r Request) Name() string { return r.Target.Name }

// Namespace of the object to reconcile; empty for cluster-scoped kinds.
func (r Request) Namespace() string { return r.Target.Namespace }

// Exists says whether the cache holds the object; false means clean up what was made for it.
func (r Request) Exists() bool { return r.Object != nil }

// Decode parses the object into v (any type encoding/json fills: a k8s.io/api type such as
// *appsv1.Deployment, your own struct, a *map[string]any). found is false, and v untouched,
// when the object is absent.
func (r Request) Decode(v any) (found bool, err error) {
	if r.Object == nil {
		return false, nil
	}
	if err := json.Unmarshal(r.Object, v); err != nil {
		return true, fmt.Errorf("cannot decode %s into %T: %w", r.Target, v, err)
	}
	return true, nil
}

// Unstructured is the object as a JSON map (nil when absent).
func (r Request) Unstructured() (map[string]any, error) {
	if r.Object == nil {
		return nil, nil
	}
	var object map[string]any
	_, err := r.Decode(&object)
	return object, err
}

// Object decodes the request's object into a new T; nil when it is absent.
//
//	deployment, err := guest.Object[appsv1.Deployment](req)
func Object[T any](r Request) (*T, error) {
	if r.Object == nil {
		return nil, nil
	}
	value := new(T)
	if _, err := r.Decode(value); err != nil {
		return nil, err
	}
	return value, nil
}
