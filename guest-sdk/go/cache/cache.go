// Package cache reads the host's informer caches (the `cache` import): no API round trip, only
// the kinds the manifest lists (for, owns, cache), possibly a moment behind the API server.
package cache

import (
	"encoding/json"
	"fmt"

	"reconcile-host/guest"
)

// Get decodes the cached object name in namespace (empty for cluster-scoped kinds) into into;
// found is false when the cache does not hold it.
func Get(kind guest.Kind, namespace, name string, into any) (found bool, err error) {
	object, found, err := guest.CurrentHost().CacheGet(kind, namespace, name)
	if err != nil || !found {
		return false, err
	}
	if err := json.Unmarshal(object, into); err != nil {
		return true, fmt.Errorf("cannot decode the cached %s %s/%s into %T: %w", kind.Kind, namespace, name, into, err)
	}
	return true, nil
}

// List is every cached object of kind (in namespace if not empty, matching labelSelector if
// not empty), ordered by namespace and name, decoded as T.
//
//	configMaps, err := cache.List[corev1.ConfigMap](guest.Kind{"v1", "ConfigMap"}, "default", "app=web")
func List[T any](kind guest.Kind, namespace, labelSelector string) ([]T, error) {
	objects, err := guest.CurrentHost().CacheList(kind, namespace, labelSelector)
	if err != nil {
		return nil, err
	}
	items := make([]T, len(objects))
	for i, object := range objects {
		if err := json.Unmarshal(object, &items[i]); err != nil {
			return nil, fmt.Errorf("cannot decode a cached %s into %T: %w", kind.Kind, items[i], err)
		}
	}
	return items, nil
}
