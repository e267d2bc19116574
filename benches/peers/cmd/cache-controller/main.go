// Command cache-controller holds the ConfigMaps of one namespace in a controller-runtime cache,
// as a controller reconciling ConfigMaps would: typed (corev1.ConfigMap, the whole object) or,
// with --metadata-only, as metav1.PartialObjectMetadata (what builder.OnlyMetadata gives a
// controller that reads no data). The website_peers bench (tests/benches/website_peers.rs)
// compares its memory with reconcile-host caching the same objects.
//
// Usage: cache-controller --namespace NS --expect N [--metadata-only]
//
// The API server comes from KUBECONFIG. Once the cache holds N ConfigMaps it prints
// "synced <count> heap_inuse=<bytes>" (the Go heap in use after a collection) and keeps running
// until killed. Metrics, health probes and leader election are off.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "cache-controller: "+format+"\n", args...)
	os.Exit(1)
}

// count lists the cached ConfigMaps of namespace (without copying them).
func count(ctx context.Context, reader client.Reader, namespace string, metadataOnly bool) (int, error) {
	if metadataOnly {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
		err := reader.List(ctx, list, client.InNamespace(namespace), client.UnsafeDisableDeepCopy)
		return len(list.Items), err
	}
	list := &corev1.ConfigMapList{}
	err := reader.List(ctx, list, client.InNamespace(namespace), client.UnsafeDisableDeepCopy)
	return len(list.Items), err
}

func main() {
	namespace := flag.String("namespace", "", "the namespace whose ConfigMaps to cache")
	expect := flag.Int("expect", 0, "how many ConfigMaps the namespace holds")
	metadataOnly := flag.Bool("metadata-only", false, "cache metadata only (PartialObjectMetadata)")
	flag.Parse()
	if *namespace == "" {
		fail("--namespace is required; pass the namespace holding the ConfigMaps")
	}

	config, err := ctrl.GetConfig()
	if err != nil {
		fail("cannot load a kubeconfig: %v; set KUBECONFIG to a kubeconfig file", err)
	}
	config.QPS, config.Burst = 100000, 100000
	mgr, err := ctrl.NewManager(config, manager.Options{
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{*namespace: {}}},
	})
	if err != nil {
		fail("cannot create the manager: %v", err)
	}
	var object client.Object = &corev1.ConfigMap{}
	if *metadataOnly {
		partial := &metav1.PartialObjectMetadata{}
		partial.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
		object = partial
	}
	ctx := ctrl.SetupSignalHandler()
	if _, err := mgr.GetCache().GetInformer(ctx, object); err != nil {
		fail("cannot start the ConfigMap informer: %v", err)
	}
	go func() {
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return
		}
		for {
			n, err := count(ctx, mgr.GetCache(), *namespace, *metadataOnly)
			if err == nil && n >= *expect {
				runtime.GC()
				var stats runtime.MemStats
				runtime.ReadMemStats(&stats)
				fmt.Printf("synced %d heap_inuse=%d\n", n, stats.HeapInuse)
				return
			}
			time.Sleep(500 * time.Millisecond)
		}
	}()
	if err := mgr.Start(ctx); err != nil {
		fail("the manager stopped: %v", err)
	}
}
