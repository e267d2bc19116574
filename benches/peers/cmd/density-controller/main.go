// Command density-controller is a minimal controller-runtime controller: one manager, one
// controller over one custom resource given on the command line, watched as
// unstructured.Unstructured, with a reconciler that does nothing. The density bench
// (tests/benches/density.rs) starts N of these, each on its own CRD, to compare their memory with
// one reconcile-host running N plugins.
//
// Usage: density-controller GROUP VERSION KIND PLURAL EXPECT
//
// The API server comes from KUBECONFIG (or in-cluster). Prints "synced <count>" on stdout once
// EXPECT distinct objects have been reconciled, then keeps running until killed. Metrics and
// health probe servers and leader election are off: only the controller runs.
package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// seen counts the distinct objects reconciled, up to expect, and announces when it gets there.
type seen struct {
	mu        sync.Mutex
	names     map[string]struct{}
	expect    int
	announced bool
}

func (s *seen) Reconcile(_ context.Context, request reconcile.Request) (reconcile.Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.names) < s.expect {
		s.names[request.String()] = struct{}{}
	}
	if len(s.names) >= s.expect && !s.announced {
		s.announced = true
		fmt.Printf("synced %d\n", len(s.names))
	}
	return reconcile.Result{}, nil
}

func main() {
	if len(os.Args) != 6 {
		fmt.Fprintf(os.Stderr, "density-controller: expected 5 arguments, got %d; usage: "+
			"density-controller GROUP VERSION KIND PLURAL EXPECT\n", len(os.Args)-1)
		os.Exit(2)
	}
	group, version, kind := os.Args[1], os.Args[2], os.Args[3]
	expect, err := strconv.Atoi(os.Args[5])
	if err != nil {
		fmt.Fprintf(os.Stderr, "density-controller: EXPECT %q is not a count; pass e.g. 100\n", os.Args[5])
		os.Exit(2)
	}
	config, err := ctrl.GetConfig()
	if err != nil {
		fmt.Fprintf(os.Stderr, "density-controller: cannot load a kubeconfig: %v; set KUBECONFIG to a kubeconfig file\n", err)
		os.Exit(1)
	}
	mgr, err := ctrl.NewManager(config, manager.Options{
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "density-controller: cannot create the manager: %v\n", err)
		os.Exit(1)
	}
	object := &unstructured.Unstructured{}
	object.SetGroupVersionKind(schema.GroupVersionKind{Group: group, Version: version, Kind: kind})
	reconciler := &seen{names: map[string]struct{}{}, expect: expect}
	if err := ctrl.NewControllerManagedBy(mgr).For(object).Named("density").Complete(reconciler); err != nil {
		fmt.Fprintf(os.Stderr, "density-controller: cannot build the controller for %s/%s %s: %v\n", group, version, kind, err)
		os.Exit(1)
	}
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		fmt.Fprintf(os.Stderr, "density-controller: the manager stopped: %v\n", err)
		os.Exit(1)
	}
}
