package main

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

const (
	controllerRounds = 20
)

// F: controller-runtime's controller (its defaults: priority queue, 4 concurrent reconciles)
// with a no-op reconciler that looks its object up in a map, fed 20 rounds of the same 10,000
// objects as generic events through source.Channel (no API server). Wall time runs from the
// first event to the end of the last reconcile, found by waiting until the count has been
// unchanged for 200 ms.
func workloadF() {
	objects := make(map[types.NamespacedName]*corev1.ConfigMap, keyspace)
	list := make([]*corev1.ConfigMap, keyspace)
	for i := range list {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("object-%05d", i)}}
		list[i] = cm
		objects[types.NamespacedName{Namespace: cm.Namespace, Name: cm.Name}] = cm
	}
	var count atomic.Int64
	var last atomic.Int64
	start := time.Now()
	ctrl, err := controller.NewTypedUnmanaged("peers", controller.TypedOptions[reconcile.Request]{
		MaxConcurrentReconciles: workers,
		SkipNameValidation:      ptr.To(true),
		Reconciler: reconcile.Func(func(_ context.Context, req reconcile.Request) (reconcile.Result, error) {
			if objects[req.NamespacedName] == nil {
				panic("unknown object")
			}
			count.Add(1)
			last.Store(int64(time.Since(start)))
			return reconcile.Result{}, nil
		}),
	})
	if err != nil {
		panic(err)
	}
	events := make(chan event.TypedGenericEvent[*corev1.ConfigMap], 1024)
	if err := ctrl.Watch(source.Channel(events, &handler.TypedEnqueueRequestForObject[*corev1.ConfigMap]{})); err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		if err := ctrl.Start(ctx); err != nil {
			panic(err)
		}
		close(stopped)
	}()
	start = time.Now()
	for r := 0; r < controllerRounds; r++ {
		for i, cm := range list {
			events <- event.TypedGenericEvent[*corev1.ConfigMap]{Object: cm}
			if i%yieldEvery == yieldEvery-1 {
				runtime.Gosched()
			}
		}
	}
	seen := int64(-1)
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); {
		time.Sleep(200 * time.Millisecond)
		now := count.Load()
		if now == seen && now > 0 {
			break
		}
		seen = now
	}
	cancel()
	<-stopped
	fmt.Printf("PEERS F wall_ms=%.3f reconciles=%d\n", ms(time.Duration(last.Load())), count.Load())
}
