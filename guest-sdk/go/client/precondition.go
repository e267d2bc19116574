package client

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Messages of the writes atVersion refuses before any call.
var (
	errEmptyVersion = errors.New("an empty resourceVersion is no precondition; pass the " +
		"metadata.resourceVersion of the object as the reconcile read it")
	errNotAnObject = errors.New("a write with a resourceVersion precondition needs a JSON " +
		"object (an object to apply or a merge patch), not an array or a scalar")
	errMetadata = errors.New("metadata must be a JSON object")
)

// atVersion sets metadata.resourceVersion of document (an object to apply or a merge patch, as
// JSON), replacing any version it carries: the API server takes it as a precondition. Members
// other than metadata.resourceVersion are sent as they are.
func atVersion(document []byte, resourceVersion string) ([]byte, error) {
	if resourceVersion == "" {
		return nil, errEmptyVersion
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(document, &fields); err != nil {
		var notObject *json.UnmarshalTypeError
		if errors.As(err, &notObject) {
			return nil, errNotAnObject
		}
		return nil, fmt.Errorf("the document to write with a resourceVersion precondition is "+
			"not JSON; send JSON text or a value encoding/json marshals: %w", err)
	}
	if fields == nil { // `null`
		return nil, errNotAnObject
	}
	metadata := map[string]json.RawMessage{}
	if raw, ok := fields["metadata"]; ok {
		metadata = nil
		if err := json.Unmarshal(raw, &metadata); err != nil || metadata == nil {
			return nil, errMetadata
		}
	}
	var err error
	if metadata["resourceVersion"], err = json.Marshal(resourceVersion); err != nil {
		return nil, err
	}
	if fields["metadata"], err = json.Marshal(metadata); err != nil {
		return nil, err
	}
	return json.Marshal(fields)
}
