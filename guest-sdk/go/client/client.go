// Package client writes to (and reads live from) the API server through the host's `client`
// import. Every call is checked against the plugin manifest's grants first; failures are
// *guest.CallError values (errors.Is with guest.ErrDenied, guest.ErrNotFound, ...).
//
// Objects are anything encoding/json marshals: a k8s.io/api type (set its TypeMeta: apiVersion
// and kind are not filled in by Go's types), a map[string]any, or JSON bytes (json.RawMessage
// or []byte are sent as they are).
//
// Apply (and ApplyNoForce, ApplyStatus, ApplyAtVersion) of a Go value drops the `null` members and the empty
// objects `{}` that encoding/json writes for the non-pointer struct fields of k8s.io/api types
// (`strategy: {}`, `resources: {}`, `status: {}`): under server-side apply every field sent is
// a field owned, so they would claim fields the reconciler never set. Empty objects that mean
// something are kept: members named in KeepEmpty (`emptyDir`, label selectors) and elements of
// lists (a NetworkPolicy's `ingress: [{}]`). Send []byte or json.RawMessage to apply exactly
// what you wrote.
package client

import (
	"encoding/json"
	"fmt"
	"strings"

	"reconcile-host/guest"
)

// encode turns an object into JSON bytes; []byte and json.RawMessage pass through.
func encode(object any) ([]byte, error) {
	switch raw := object.(type) {
	case []byte:
		return raw, nil
	case json.RawMessage:
		return raw, nil
	}
	bytes, err := json.Marshal(object)
	if err != nil {
		return nil, fmt.Errorf("cannot encode %T as JSON: %w", object, err)
	}
	return bytes, nil
}

// decode fills into (when not nil) from the object the host returned.
func decode(stored []byte, into []any) ([]byte, error) {
	for _, target := range into {
		if err := json.Unmarshal(stored, target); err != nil {
			return stored, fmt.Errorf("cannot decode the stored object into %T: %w", target, err)
		}
	}
	return stored, nil
}

// Apply is server-side apply of object with force (the plugin's name is the field manager;
// fields other managers own are taken over, what controllers usually want). The stored object
// is returned as JSON and, if into is given, decoded into it.
func Apply(object any, into ...any) ([]byte, error) {
	return apply(object, true, "", into)
}

// ApplyNoForce is server-side apply that fails with a 409 conflict on fields other managers own.
func ApplyNoForce(object any, into ...any) ([]byte, error) {
	return apply(object, false, "", into)
}

// ApplyStatus applies only the status of object (grant: patch on <kind>/status).
func ApplyStatus(object any, into ...any) ([]byte, error) {
	return apply(object, true, "status", into)
}

// ApplyAtVersion is Apply (with force) only if the object is still at resourceVersion: the API
// server refuses the write with 409 (guest.ErrConflict) when anyone wrote the object since. Pass
// the version the reconcile read it at (the cached object's metadata.resourceVersion), so a write
// made from a stale read, or one that left a replica after another had taken its work over,
// changes nothing. The version is set as metadata.resourceVersion of what is sent, replacing any
// there (object itself is not changed; JSON bytes are sent with the same members, re-encoded).
// Needs verb patch on the object's kind in the grants.
//
// An error without a call: an object that is not a JSON object, a metadata that is not one, or an
// empty resourceVersion.
func ApplyAtVersion(object any, resourceVersion string, into ...any) ([]byte, error) {
	bytes, err := encode(object)
	if err != nil {
		return nil, err
	}
	if bytes, err = atVersion(bytes, resourceVersion); err != nil {
		return nil, err
	}
	return applyEncoded(object, bytes, true, "", into)
}

func apply(object any, force bool, subresource string, into []any) ([]byte, error) {
	bytes, err := encode(object)
	if err != nil {
		return nil, err
	}
	return applyEncoded(object, bytes, force, subresource, into)
}

// applyEncoded applies bytes, the encoding of object.
func applyEncoded(object any, bytes []byte, force bool, subresource string, into []any) ([]byte, error) {
	bytes, err := compact(object, bytes)
	if err != nil {
		return nil, err
	}
	stored, err := guest.CurrentHost().Apply(bytes, force, subresource)
	if err != nil {
		return nil, err
	}
	return decode(stored, into)
}

// Patch patches target with body (encoded as JSON) in the given format; subresource "status"
// patches the status. Returns the object as stored.
func Patch(target guest.ObjectRef, patchType guest.PatchType, body any, subresource string) ([]byte, error) {
	bytes, err := encode(body)
	if err != nil {
		return nil, err
	}
	return guest.CurrentHost().Patch(target, patchType, bytes, subresource)
}

// MergePatchAtVersion is Patch with a guest.MergePatch body (RFC 7386) and no subresource, only
// if the object is still at resourceVersion (409, guest.ErrConflict, otherwise; see
// ApplyAtVersion). patch itself is not changed.
//
// An error without a call: a patch that is not a JSON object, a metadata that is not one, or an
// empty resourceVersion.
func MergePatchAtVersion(target guest.ObjectRef, patch any, resourceVersion string) ([]byte, error) {
	bytes, err := encode(patch)
	if err != nil {
		return nil, err
	}
	if bytes, err = atVersion(bytes, resourceVersion); err != nil {
		return nil, err
	}
	return guest.CurrentHost().Patch(target, guest.MergePatch, bytes, "")
}

// Create creates object; a 409 with guest.ErrAlreadyExists if it exists.
func Create(object any, into ...any) ([]byte, error) {
	bytes, err := encode(object)
	if err != nil {
		return nil, err
	}
	stored, err := guest.CurrentHost().Create(bytes)
	if err != nil {
		return nil, err
	}
	return decode(stored, into)
}

// Replace replaces the object; it must carry the metadata.resourceVersion it was read at
// (guest.ErrConflict if the object changed since).
func Replace(object any, into ...any) ([]byte, error) {
	bytes, err := encode(object)
	if err != nil {
		return nil, err
	}
	stored, err := guest.CurrentHost().Replace(bytes)
	if err != nil {
		return nil, err
	}
	return decode(stored, into)
}

// Delete deletes target (background propagation); guest.ErrNotFound if it does not exist.
func Delete(target guest.ObjectRef) error {
	return guest.CurrentHost().Delete(target)
}

// Get reads target from the API server (not the cache) into into; found is false when it does
// not exist.
func Get(target guest.ObjectRef, into any) (found bool, err error) {
	object, found, err := guest.CurrentHost().Get(target)
	if err != nil || !found {
		return false, err
	}
	if err := json.Unmarshal(object, into); err != nil {
		return true, fmt.Errorf("cannot decode %s into %T: %w", target, into, err)
	}
	return true, nil
}

// KeepEmpty names the members whose empty object `{}` Apply sends rather than drops, because
// `{}` means something there (an emptyDir volume; a selector matching everything).
var KeepEmpty = map[string]bool{
	"emptyDir": true, "selector": true, "podSelector": true, "namespaceSelector": true,
	"labelSelector": true,
}

// compact drops null members and empty-object members (outside KeepEmpty) of an encoded Go
// value; raw JSON ([]byte, json.RawMessage) is left as it is.
func compact(object any, bytes []byte) ([]byte, error) {
	switch object.(type) {
	case []byte, json.RawMessage:
		return bytes, nil
	}
	var value any
	decoder := json.NewDecoder(strings.NewReader(string(bytes)))
	decoder.UseNumber()
	if err := decoder.Decode(&value); err != nil {
		return nil, fmt.Errorf("cannot re-read %T as JSON: %w", object, err)
	}
	return json.Marshal(prune(value))
}

func prune(value any) any {
	switch v := value.(type) {
	case map[string]any:
		for key, member := range v {
			member = prune(member)
			if m, ok := member.(map[string]any); member == nil || (ok && len(m) == 0 && !KeepEmpty[key]) {
				delete(v, key)
			} else {
				v[key] = member
			}
		}
	case []any:
		for i, element := range v {
			v[i] = prune(element)
		}
	}
	return value
}
