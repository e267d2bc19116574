//go:build reconcile_component

// Package export_wit_world joins the bindings wit-bindgen's Go generator makes for the
// reconciler world to the SDK: it is the `Reconcile` the generated `reconcile` export calls, and the guest.Host
// whose methods are the generated imports. build-component.sh copies it into the generated
// module (wit_component/export_wit_world) with RECONCILER_PACKAGE replaced by the import path of
// the package that calls guest.Register.
package export_wit_world

import (
	"context"
	"log/slog"
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"unsafe"

	witTypes "go.bytecodealliance.org/pkg/wit/types"

	"reconcile-host/guest"
	"wit_component/kube_reconcile_cache"
	"wit_component/kube_reconcile_client"
	"wit_component/kube_reconcile_events"
	"wit_component/kube_reconcile_log"
	"wit_component/kube_reconcile_types"

	_ "RECONCILER_PACKAGE"
	_ "argv0" // first: os.Args[0] for the packages that read it in init
)

func init() {
	stopAutomaticGC()
	guest.SetHost(componentHost{})
}

// Garbage collection runs only where the component may call imports.
//
// The component model forbids a callee from calling any import while the canonical ABI runs its
// `cabi_realloc` (the host copying a request, or an import's result, into guest memory). Go's
// allocator, called from `cabi_realloc`, may start a collection or assist one in progress, and
// the collector reads the clocks (WASI imports): the instance traps. The runtime package pauses
// the adapter's monotonic clock around that allocation, but not the wall clock that mark
// termination reads. It rarely happens on a fresh instance per call (the heap never reaches the
// collector's first goal); on a reused instance the heap grows and it happens within a few
// calls. So automatic collection is off (and a GOMEMLIMIT from the manifest's env cannot turn it
// back on), and collectIfGrown, called in the export after the reconciler ran and before each
// import, collects when the heap allocated as much since the last collection as was live after
// it (as GOGC=100 would), and at least minCollectBytes, so a reused instance does not pay a
// full collection every call.
const minCollectBytes = 4 << 20

var (
	gcSamples         = []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}, {Name: "/gc/heap/live:bytes"}}
	allocatedAtLastGC uint64
)

func stopAutomaticGC() {
	debug.SetGCPercent(-1)
	debug.SetMemoryLimit(math.MaxInt64)
}

func collectIfGrown() {
	metrics.Read(gcSamples)
	allocated, live := gcSamples[0].Value.Uint64(), gcSamples[1].Value.Uint64()
	if allocated-allocatedAtLastGC < max(minCollectBytes, live) {
		return
	}
	runtime.GC()
	metrics.Read(gcSamples[:1])
	allocatedAtLastGC = gcSamples[0].Value.Uint64()
}

// Reconcile is the world's export. It runs on the goroutine the host's call entered on and
// returns before the call does: nothing waits for another goroutine (they are frozen between
// calls). A panic becomes the reconcile error (guest.Reconcile recovers it).
func Reconcile(request kube_reconcile_types.Request) witTypes.Result[kube_reconcile_types.Action, kube_reconcile_types.ReconcileError] {
	req := guest.Request{
		Target:   objectRef(request.Target),
		Requeues: request.Requeues,
	}
	if request.Object.IsSome() {
		// The object's text is a block the host wrote through cabi_realloc for this call alone:
		// the reconciler gets it as it is, not a copy (nothing else reads or keeps it).
		object := request.Object.Some()
		req.Object = unsafe.Slice(unsafe.StringData(object), len(object))
	}
	reconciler := guest.Registered()
	if reconciler == nil {
		noReconciler()
	}
	action, err := guest.Reconcile(context.Background(), reconciler, req)
	collectIfGrown()
	if err != nil {
		return witTypes.Err[kube_reconcile_types.Action](kube_reconcile_types.ReconcileError{Message: err.Error()})
	}
	var answer kube_reconcile_types.Action
	switch action.Kind {
	case guest.ActionRequeue:
		answer = kube_reconcile_types.MakeActionRequeue()
	case guest.ActionRequeueAfter:
		answer = kube_reconcile_types.MakeActionRequeueAfter(action.Millis())
	default:
		answer = kube_reconcile_types.MakeActionDone()
	}
	return witTypes.Ok[kube_reconcile_types.Action, kube_reconcile_types.ReconcileError](answer)
}

// noReconciler stops the call when the reconciler's package never called guest.Register: the
// component cannot reconcile anything, so this is a trap (which `reconcile-host check` reports
// and a hot reload rolls back), not a reconcile error retried forever. The Go runtime writes the
// panic's message to stderr, which the host logs, before it stops the instance.
func noReconciler() {
	panic("reconcile-host/guest: no reconciler registered: the component's reconcile export " +
		"has nothing to call; call guest.Register(yourFunc) in an init function of the " +
		"reconciler's package (the package build-component.sh was given)")
}

func objectRef(r kube_reconcile_types.ObjectRef) guest.ObjectRef {
	return guest.ObjectRef{
		Kind:      guest.Kind{APIVersion: r.Kind.ApiVersion, Kind: r.Kind.Kind},
		Namespace: r.Namespace.SomeOr(""),
		Name:      r.Name,
	}
}

func witRef(r guest.ObjectRef) kube_reconcile_types.ObjectRef {
	return kube_reconcile_types.ObjectRef{Kind: witKind(r.Kind), Namespace: optional(r.Namespace), Name: r.Name}
}

func witKind(k guest.Kind) kube_reconcile_types.Kind {
	return kube_reconcile_types.Kind{ApiVersion: k.APIVersion, Kind: k.Kind}
}

// optional is `none` for "".
func optional(s string) witTypes.Option[string] {
	if s == "" {
		return witTypes.None[string]()
	}
	return witTypes.Some(s)
}

func callError(e kube_reconcile_types.CallError) error {
	switch e.Tag() {
	case kube_reconcile_types.CallError_Denied:
		return guest.Denied(e.Denied())
	case kube_reconcile_types.CallError_Invalid:
		return guest.Invalid(e.Invalid())
	case kube_reconcile_types.CallError_Api:
		status := e.Api()
		return guest.API(status.Code, status.Reason, status.Message)
	default:
		return guest.Unavailable(e.Unavailable())
	}
}

func object(r witTypes.Result[string, kube_reconcile_types.CallError]) ([]byte, error) {
	if r.IsErr() {
		return nil, callError(r.Err())
	}
	return []byte(r.Ok()), nil
}

func maybeObject(r witTypes.Result[witTypes.Option[string], kube_reconcile_types.CallError]) ([]byte, bool, error) {
	if r.IsErr() {
		return nil, false, callError(r.Err())
	}
	if r.Ok().IsNone() {
		return nil, false, nil
	}
	return []byte(r.Ok().Some()), true, nil
}

func unit(r witTypes.Result[witTypes.Unit, kube_reconcile_types.CallError]) error {
	if r.IsErr() {
		return callError(r.Err())
	}
	return nil
}

// componentHost is guest.Host over the component's imports.
// Each method first collects garbage if the heap grew (collectIfGrown): imports are the points
// inside a long reconcile where that is allowed.
type componentHost struct{}

func (componentHost) CacheGet(kind guest.Kind, namespace, name string) ([]byte, bool, error) {
	collectIfGrown()
	return maybeObject(kube_reconcile_cache.Get(witKind(kind), optional(namespace), name))
}

func (componentHost) CacheList(kind guest.Kind, namespace, selector string) ([][]byte, error) {
	collectIfGrown()
	r := kube_reconcile_cache.List(witKind(kind), optional(namespace), optional(selector))
	if r.IsErr() {
		return nil, callError(r.Err())
	}
	texts := r.Ok()
	objects := make([][]byte, len(texts))
	for i, text := range texts {
		objects[i] = []byte(text)
	}
	return objects, nil
}

func (componentHost) Apply(o []byte, force bool, subresource string) ([]byte, error) {
	collectIfGrown()
	return object(kube_reconcile_client.Apply(string(o), force, optional(subresource)))
}

func (componentHost) Patch(target guest.ObjectRef, patchType guest.PatchType, body []byte, subresource string) ([]byte, error) {
	collectIfGrown()
	var patch kube_reconcile_client.PatchBody
	switch patchType {
	case guest.JSONPatch:
		patch = kube_reconcile_client.MakePatchBodyJson(string(body))
	case guest.StrategicMergePatch:
		patch = kube_reconcile_client.MakePatchBodyStrategic(string(body))
	default:
		patch = kube_reconcile_client.MakePatchBodyMerge(string(body))
	}
	return object(kube_reconcile_client.Patch(witRef(target), patch, optional(subresource)))
}

func (componentHost) Create(o []byte) ([]byte, error) {
	collectIfGrown()
	return object(kube_reconcile_client.Create(string(o)))
}

func (componentHost) Replace(o []byte) ([]byte, error) {
	collectIfGrown()
	return object(kube_reconcile_client.Replace(string(o)))
}

func (componentHost) Delete(target guest.ObjectRef) error {
	collectIfGrown()
	return unit(kube_reconcile_client.Delete(witRef(target)))
}

func (componentHost) Get(target guest.ObjectRef) ([]byte, bool, error) {
	collectIfGrown()
	return maybeObject(kube_reconcile_client.Get(witRef(target)))
}

func (componentHost) RecordEvent(regarding guest.ObjectRef, eventType guest.EventType, reason, note string) error {
	collectIfGrown()
	t := kube_reconcile_events.EventType_Normal
	if eventType == guest.Warning {
		t = kube_reconcile_events.EventType_Warning
	}
	return unit(kube_reconcile_events.RecordEvent(witRef(regarding), t, reason, note))
}

func (componentHost) Log(level slog.Level, message string) {
	collectIfGrown()
	var l kube_reconcile_log.Level
	switch {
	case level < slog.LevelDebug:
		l = kube_reconcile_log.Level_Trace
	case level < slog.LevelInfo:
		l = kube_reconcile_log.Level_Debug
	case level < slog.LevelWarn:
		l = kube_reconcile_log.Level_Info
	case level < slog.LevelError:
		l = kube_reconcile_log.Level_Warn
	default:
		l = kube_reconcile_log.Level_Error
	}
	kube_reconcile_log.Log(l, message)
}
