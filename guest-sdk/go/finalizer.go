package guest

import (
	"encoding/json"
	"fmt"
)

// Finalizer runs a reconciler that must clean up outside Kubernetes before its object goes
// (kube-runtime's finalizer helper).
//
// Flow:
//   - The object is absent: Done (it is gone; nothing can be done for it any more).
//   - It is alive without the finalizer `name`: the finalizer is added with a JSON patch (which
//     fails with ErrConflict if the object changed meanwhile), then apply runs.
//   - It is alive with the finalizer: apply runs.
//   - It is being deleted (metadata.deletionTimestamp) with the finalizer: cleanup runs; when
//     it succeeds the finalizer is removed, and the API server deletes the object.
//   - It is being deleted without the finalizer: Done.
//
// The plugin needs a `patch` grant on its `for` kind. cleanup must be idempotent: it runs
// again if removing the finalizer fails.
func Finalizer(req Request, name string, apply, cleanup FinalizerStep) (Action, error) {
	if req.Object == nil {
		return Done(), nil
	}
	var object struct {
		Metadata struct {
			Finalizers        []string `json:"finalizers"`
			DeletionTimestamp *string  `json:"deletionTimestamp"`
			ResourceVersion   string   `json:"resourceVersion"`
		} `json:"metadata"`
	}
	if _, err := req.Decode(&object); err != nil {
		return Action{}, err
	}
	index := -1
	for i, finalizer := range object.Metadata.Finalizers {
		if finalizer == name {
			index = i
		}
	}
	var patch []map[string]any
	if object.Metadata.DeletionTimestamp != nil {
		if index < 0 {
			return Done(), nil
		}
		action, err := cleanup(req)
		if err != nil {
			return action, err
		}
		path := fmt.Sprintf("/metadata/finalizers/%d", index)
		patch = []map[string]any{
			{"op": "test", "path": path, "value": name},
			{"op": "remove", "path": path},
		}
		if err := patchFinalizers(req.Target, patch); err != nil {
			return Action{}, fmt.Errorf("failed to remove the finalizer %s: %w", name, err)
		}
		return action, nil
	}
	if index < 0 {
		patch = []map[string]any{{"op": "test", "path": "/metadata/resourceVersion", "value": object.Metadata.ResourceVersion}}
		if object.Metadata.Finalizers == nil {
			patch = append(patch, map[string]any{"op": "add", "path": "/metadata/finalizers", "value": []string{name}})
		} else {
			patch = append(patch, map[string]any{"op": "add", "path": "/metadata/finalizers/-", "value": name})
		}
		if err := patchFinalizers(req.Target, patch); err != nil {
			return Action{}, fmt.Errorf("failed to add the finalizer %s: %w", name, err)
		}
	}
	return apply(req)
}

// FinalizerStep is one side of a Finalizer: what to do while the object lives, or to clean up.
type FinalizerStep func(req Request) (Action, error)

func patchFinalizers(target ObjectRef, patch []map[string]any) error {
	body, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	_, err = current.Patch(target, JSONPatch, body, "")
	return err
}
