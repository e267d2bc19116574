// Package guest is the Go guest SDK of the reconcile host: it turns a plain Go function into the
// `reconcile` export of the `kube:reconcile/reconciler` world (wit/reconcile.wit) and gives it
// the host's imports as idiomatic Go.
//
//	func reconcile(ctx context.Context, req guest.Request) (guest.Action, error) {
//		var cm corev1.ConfigMap
//		found, err := req.Decode(&cm)
//		...
//		if _, err := client.Apply(&obj); err != nil {
//			return guest.Action{}, fmt.Errorf("failed to apply: %w", err)
//		}
//		return guest.RequeueAfter(time.Minute), nil
//	}
//
//	func init() { guest.Register(reconcile) }
//
// Packages client, cache and events are the host's imports; slog.Default() writes to the host
// log once Register ran; package fake is a host in memory for `go test`.
//
// The component is built by guest-sdk/go/build-component.sh (see docs/guests/go.md): standard Go
// with GOOS=wasip1 GOARCH=wasm -buildmode=c-shared, bindings from wit-bindgen's Go generator,
// and the WASI preview1 reactor adapter.
//
// Rules a reconciler must follow, because of how a component runs:
//   - Goroutines only run while an export runs. Do not start work on another goroutine and wait
//     for it: between calls every goroutine is frozen, and a blocked export is a deadlock the
//     Go runtime reports as a fatal error (a trap). Everything the SDK does is synchronous.
//   - A panic is recovered by the SDK and returned as the reconcile error ("panic: ..."), so
//     the key is retried with backoff like any other error.
package guest
