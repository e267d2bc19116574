// Package fake is a reconcile host in memory, so a Go reconciler is tested with plain
// `go test`: it holds objects (both "the API server" and "the cache"), records every call,
// log line and event, and answers the way the real host does (404 for missing objects, 409
// AlreadyExists on create, status-only apply with subresource "status", 409 Conflict on an apply
// or merge patch whose metadata.resourceVersion is not the stored object's).
//
// The fake does not advance metadata.resourceVersion when it writes: to test a write made at a
// stale version (client.ApplyAtVersion), Add the object again with another resourceVersion.
//
//	host := fake.New(t)
//	host.Add(website)
//	action, err := guest.Reconcile(ctx, reconcile, host.Request(website))
//	deployment, _ := host.Object(guest.Kind{"apps/v1", "Deployment"}, "default", "hello")
package fake

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"testing"

	"reconcile-host/guest"
)

// Call is one host import call the reconciler made.
type Call struct {
	// Verb is the import: "cache.get", "cache.list", "apply", "patch", "create", "replace",
	// "delete", "get".
	Verb string
	// Target is the object the call is about.
	Target guest.ObjectRef
	// Body is the object or patch sent, as JSON (nil for reads and deletes).
	Body json.RawMessage
	// Subresource is "status" for status writes.
	Subresource string
	// Force is apply's force flag.
	Force bool
}

// LogLine is one line the reconciler logged.
type LogLine struct {
	Level   slog.Level
	Message string
}

// Event is one event the reconciler recorded.
type Event struct {
	Regarding guest.ObjectRef
	Type      guest.EventType
	Reason    string
	Note      string
}

// Host is the fake host. Its fields are the record of what the reconciler did.
type Host struct {
	Calls  []Call
	Logs   []LogLine
	Events []Event
	// Fail, when set, is asked before every call; a non-nil error is returned instead of
	// doing the call (guest.Denied(...), guest.API(409, "Conflict", ...), ...).
	Fail    func(Call) error
	objects map[string]map[string]any
}

// New makes a fake host, makes it the one guest calls go to and, when t is not nil, puts the
// previous host back when the test ends.
func New(t testing.TB) *Host {
	h := &Host{objects: map[string]map[string]any{}}
	restore := guest.SetHost(h)
	if t != nil {
		t.Cleanup(restore)
	}
	return h
}

func key(kind guest.Kind, namespace, name string) string {
	return kind.APIVersion + "|" + kind.Kind + "|" + namespace + "|" + name
}

// RefOf is the reference of an object (anything encoding/json marshals).
func RefOf(object any) (guest.ObjectRef, map[string]any, error) {
	m, err := toMap(object)
	if err != nil {
		return guest.ObjectRef{}, nil, err
	}
	meta, _ := m["metadata"].(map[string]any)
	apiVersion, _ := m["apiVersion"].(string)
	kind, _ := m["kind"].(string)
	name, _ := meta["name"].(string)
	namespace, _ := meta["namespace"].(string)
	if apiVersion == "" || kind == "" || name == "" {
		return guest.ObjectRef{}, nil, guest.Invalid("the object needs apiVersion, kind and metadata.name (set TypeMeta on k8s.io/api types)")
	}
	return guest.ObjectRef{Kind: guest.Kind{APIVersion: apiVersion, Kind: kind}, Namespace: namespace, Name: name}, m, nil
}

func toMap(object any) (map[string]any, error) {
	var bytes []byte
	switch raw := object.(type) {
	case []byte:
		bytes = raw
	case json.RawMessage:
		bytes = raw
	default:
		var err error
		if bytes, err = json.Marshal(object); err != nil {
			return nil, err
		}
	}
	var m map[string]any
	if err := json.Unmarshal(bytes, &m); err != nil {
		return nil, guest.Invalid(fmt.Sprintf("not a JSON object: %v", err))
	}
	return m, nil
}

// Add puts object into the fake API server and cache (a uid is made up if it has none).
func (h *Host) Add(object any) guest.ObjectRef {
	ref, m, err := RefOf(object)
	if err != nil {
		panic(err)
	}
	meta := m["metadata"].(map[string]any)
	if _, ok := meta["uid"]; !ok {
		meta["uid"] = "uid-" + ref.Name
	}
	h.objects[key(ref.Kind, ref.Namespace, ref.Name)] = m
	return ref
}

// Object is the stored object, as a JSON map.
func (h *Host) Object(kind guest.Kind, namespace, name string) (map[string]any, bool) {
	m, ok := h.objects[key(kind, namespace, name)]
	return m, ok
}

// Request is the request the host would send for object (which need not be stored).
func (h *Host) Request(object any) guest.Request {
	ref, m, err := RefOf(object)
	if err != nil {
		panic(err)
	}
	bytes, _ := json.Marshal(m)
	return guest.Request{Target: ref, Object: bytes}
}

// Absent is the request for an object that is not in the cache (deleted).
func (h *Host) Absent(ref guest.ObjectRef) guest.Request { return guest.Request{Target: ref} }

func (h *Host) record(call Call) error {
	h.Calls = append(h.Calls, call)
	if h.Fail != nil {
		return h.Fail(call)
	}
	return nil
}

func notFound(ref guest.ObjectRef) error {
	return guest.API(404, "NotFound", fmt.Sprintf("%s %q not found", ref.Kind.Kind, ref.Name))
}

func (h *Host) encode(m map[string]any) []byte {
	bytes, _ := json.Marshal(m)
	return bytes
}

// CacheGet implements guest.Host.
func (h *Host) CacheGet(kind guest.Kind, namespace, name string) ([]byte, bool, error) {
	ref := guest.ObjectRef{Kind: kind, Namespace: namespace, Name: name}
	if err := h.record(Call{Verb: "cache.get", Target: ref}); err != nil {
		return nil, false, err
	}
	m, ok := h.objects[key(kind, namespace, name)]
	if !ok {
		return nil, false, nil
	}
	return h.encode(m), true, nil
}

// CacheList implements guest.Host: label selectors of `k=v` terms joined by commas.
func (h *Host) CacheList(kind guest.Kind, namespace, selector string) ([][]byte, error) {
	if err := h.record(Call{Verb: "cache.list", Target: guest.ObjectRef{Kind: kind, Namespace: namespace}}); err != nil {
		return nil, err
	}
	var keys []string
	for k := range h.objects {
		if strings.HasPrefix(k, kind.APIVersion+"|"+kind.Kind+"|") {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var out [][]byte
	for _, k := range keys {
		m := h.objects[k]
		meta, _ := m["metadata"].(map[string]any)
		if ns, _ := meta["namespace"].(string); namespace != "" && ns != namespace {
			continue
		}
		if !matches(meta, selector) {
			continue
		}
		out = append(out, h.encode(m))
	}
	return out, nil
}

func matches(meta map[string]any, selector string) bool {
	labels, _ := meta["labels"].(map[string]any)
	for _, term := range strings.Split(selector, ",") {
		if term = strings.TrimSpace(term); term == "" {
			continue
		}
		name, value, _ := strings.Cut(term, "=")
		if labels[name] != value {
			return false
		}
	}
	return true
}

// Apply implements guest.Host: the object's fields replace the stored ones (only the status
// with subresource "status").
func (h *Host) Apply(object []byte, force bool, subresource string) ([]byte, error) {
	ref, m, err := RefOf(object)
	if err != nil {
		return nil, err
	}
	if err := h.record(Call{Verb: "apply", Target: ref, Body: object, Subresource: subresource, Force: force}); err != nil {
		return nil, err
	}
	k := key(ref.Kind, ref.Namespace, ref.Name)
	stored, ok := h.objects[k]
	if ok {
		if err := checkVersion(ref, stored, m); err != nil {
			return nil, err
		}
	}
	if subresource == "status" {
		if !ok {
			return nil, notFound(ref)
		}
		stored["status"] = m["status"]
		return h.encode(stored), nil
	}
	if !ok {
		h.Add(m)
		return h.encode(h.objects[k]), nil
	}
	for field, value := range m {
		if field != "status" {
			stored[field] = value
		}
	}
	return h.encode(stored), nil
}

// Patch implements guest.Host: merge patches, and JSON patches of add, remove, replace and test.
func (h *Host) Patch(target guest.ObjectRef, patchType guest.PatchType, body []byte, subresource string) ([]byte, error) {
	if err := h.record(Call{Verb: "patch", Target: target, Body: body, Subresource: subresource}); err != nil {
		return nil, err
	}
	k := key(target.Kind, target.Namespace, target.Name)
	stored, ok := h.objects[k]
	if !ok {
		return nil, notFound(target)
	}
	switch patchType {
	case guest.JSONPatch:
		var ops []struct {
			Op    string `json:"op"`
			Path  string `json:"path"`
			Value any    `json:"value"`
		}
		if err := json.Unmarshal(body, &ops); err != nil {
			return nil, guest.Invalid(err.Error())
		}
		patched, err := roundTrip(stored)
		if err != nil {
			return nil, err
		}
		for _, op := range ops {
			if patched, err = jsonPatch(patched, op.Op, op.Path, op.Value); err != nil {
				return nil, err
			}
		}
		h.objects[k] = patched.(map[string]any)
	default:
		var patch any
		if err := json.Unmarshal(body, &patch); err != nil {
			return nil, guest.Invalid(err.Error())
		}
		if fields, ok := patch.(map[string]any); ok {
			if err := checkVersion(target, stored, fields); err != nil {
				return nil, err
			}
		}
		h.objects[k] = mergePatch(stored, patch).(map[string]any)
	}
	return h.encode(h.objects[k]), nil
}

// checkVersion is the API server's precondition: a write that carries a metadata.resourceVersion
// other than the stored object's is refused with 409 Conflict (an empty one is none).
func checkVersion(ref guest.ObjectRef, stored, sent map[string]any) error {
	sentMeta, _ := sent["metadata"].(map[string]any)
	version, _ := sentMeta["resourceVersion"].(string)
	if version == "" {
		return nil
	}
	storedMeta, _ := stored["metadata"].(map[string]any)
	if live, _ := storedMeta["resourceVersion"].(string); live != version {
		return guest.API(409, "Conflict", fmt.Sprintf("Operation cannot be fulfilled on %s %q: "+
			"the object has been modified; please apply your changes to the latest version and "+
			"try again", ref.Kind.Kind, ref.Name))
	}
	return nil
}

func roundTrip(value any) (any, error) {
	bytes, err := json.Marshal(value)
	if err != nil {
		return nil, err
	}
	var out any
	return out, json.Unmarshal(bytes, &out)
}

func mergePatch(target, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	t, ok := target.(map[string]any)
	if !ok {
		t = map[string]any{}
	}
	for k, v := range p {
		if v == nil {
			delete(t, k)
		} else {
			t[k] = mergePatch(t[k], v)
		}
	}
	return t
}

// jsonPatch applies one RFC 6902 operation at a JSON pointer.
func jsonPatch(doc any, op, path string, value any) (any, error) {
	parts := strings.Split(strings.TrimPrefix(path, "/"), "/")
	parent := doc
	for _, part := range parts[:len(parts)-1] {
		child, err := step(parent, part)
		if err != nil {
			return nil, err
		}
		parent = child
	}
	last := parts[len(parts)-1]
	conflict := guest.API(422, "Invalid", fmt.Sprintf("the JSON patch %s at %s does not apply", op, path))
	switch p := parent.(type) {
	case map[string]any:
		switch op {
		case "test":
			a, _ := json.Marshal(p[last])
			b, _ := json.Marshal(value)
			if string(a) != string(b) {
				return nil, guest.API(409, "Conflict", fmt.Sprintf("the JSON patch test at %s failed", path))
			}
		case "remove":
			if _, ok := p[last]; !ok {
				return nil, conflict
			}
			delete(p, last)
		default:
			p[last] = value
		}
		return doc, nil
	case []any:
		if op == "add" && last == "-" {
			return setParent(doc, parts[:len(parts)-1], append(p, value))
		}
		i, err := strconv.Atoi(last)
		if err != nil || i < 0 || i > len(p) || (op != "add" && i == len(p)) {
			return nil, conflict
		}
		switch op {
		case "test":
			a, _ := json.Marshal(p[i])
			b, _ := json.Marshal(value)
			if string(a) != string(b) {
				return nil, guest.API(409, "Conflict", fmt.Sprintf("the JSON patch test at %s failed", path))
			}
			return doc, nil
		case "remove":
			return setParent(doc, parts[:len(parts)-1], append(p[:i:i], p[i+1:]...))
		case "replace":
			p[i] = value
			return doc, nil
		default:
			grown := append(p[:i:i], append([]any{value}, p[i:]...)...)
			return setParent(doc, parts[:len(parts)-1], grown)
		}
	}
	return nil, conflict
}

func step(value any, part string) (any, error) {
	switch v := value.(type) {
	case map[string]any:
		if child, ok := v[part]; ok {
			return child, nil
		}
	case []any:
		if i, err := strconv.Atoi(part); err == nil && i >= 0 && i < len(v) {
			return v[i], nil
		}
	}
	return nil, guest.API(422, "Invalid", fmt.Sprintf("the JSON patch path element %q does not exist", part))
}

func setParent(doc any, path []string, value any) (any, error) {
	if len(path) == 0 {
		return value, nil
	}
	parent := doc
	for _, part := range path[:len(path)-1] {
		child, err := step(parent, part)
		if err != nil {
			return nil, err
		}
		parent = child
	}
	last := path[len(path)-1]
	switch p := parent.(type) {
	case map[string]any:
		p[last] = value
	case []any:
		i, _ := strconv.Atoi(last)
		p[i] = value
	}
	return doc, nil
}

// Create implements guest.Host.
func (h *Host) Create(object []byte) ([]byte, error) {
	ref, m, err := RefOf(object)
	if err != nil {
		return nil, err
	}
	if err := h.record(Call{Verb: "create", Target: ref, Body: object}); err != nil {
		return nil, err
	}
	if _, ok := h.objects[key(ref.Kind, ref.Namespace, ref.Name)]; ok {
		return nil, guest.API(409, "AlreadyExists", fmt.Sprintf("%s %q already exists", ref.Kind.Kind, ref.Name))
	}
	h.Add(m)
	return h.encode(m), nil
}

// Replace implements guest.Host (no resourceVersion check).
func (h *Host) Replace(object []byte) ([]byte, error) {
	ref, m, err := RefOf(object)
	if err != nil {
		return nil, err
	}
	if err := h.record(Call{Verb: "replace", Target: ref, Body: object}); err != nil {
		return nil, err
	}
	if _, ok := h.objects[key(ref.Kind, ref.Namespace, ref.Name)]; !ok {
		return nil, notFound(ref)
	}
	h.objects[key(ref.Kind, ref.Namespace, ref.Name)] = m
	return h.encode(m), nil
}

// Delete implements guest.Host.
func (h *Host) Delete(target guest.ObjectRef) error {
	if err := h.record(Call{Verb: "delete", Target: target}); err != nil {
		return err
	}
	k := key(target.Kind, target.Namespace, target.Name)
	if _, ok := h.objects[k]; !ok {
		return notFound(target)
	}
	delete(h.objects, k)
	return nil
}

// Get implements guest.Host.
func (h *Host) Get(target guest.ObjectRef) ([]byte, bool, error) {
	if err := h.record(Call{Verb: "get", Target: target}); err != nil {
		return nil, false, err
	}
	m, ok := h.objects[key(target.Kind, target.Namespace, target.Name)]
	if !ok {
		return nil, false, nil
	}
	return h.encode(m), true, nil
}

// RecordEvent implements guest.Host.
func (h *Host) RecordEvent(regarding guest.ObjectRef, eventType guest.EventType, reason, note string) error {
	if err := h.record(Call{Verb: "events.record", Target: regarding}); err != nil {
		return err
	}
	h.Events = append(h.Events, Event{Regarding: regarding, Type: eventType, Reason: reason, Note: note})
	return nil
}

// Log implements guest.Host.
func (h *Host) Log(level slog.Level, message string) {
	h.Logs = append(h.Logs, LogLine{Level: level, Message: message})
}
