package client

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestAPreconditionSetsTheResourceVersionOfAnObjectOrAMergePatch(t *testing.T) {
	object := []byte(`{"apiVersion":"v1","kind":"ConfigMap",` +
		`"metadata":{"name":"a","resourceVersion":"1"},"data":{"k":"v"},"spec":{"n":12345678901234567890}}`)
	sent, err := atVersion(object, "42")
	if err != nil {
		t.Fatalf("an object: %v", err)
	}
	if got, want := string(sent), `{"apiVersion":"v1","data":{"k":"v"},"kind":"ConfigMap",`+
		`"metadata":{"name":"a","resourceVersion":"42"},"spec":{"n":12345678901234567890}}`; got != want {
		t.Fatalf("an object at 42 is\n%s, want\n%s", got, want)
	}
	patch, err := atVersion([]byte(`{"data":{"k":"w"}}`), "7")
	if err != nil {
		t.Fatalf("a merge patch: %v", err)
	}
	if got, want := string(patch), `{"data":{"k":"w"},"metadata":{"resourceVersion":"7"}}`; got != want {
		t.Fatalf("a merge patch at 7 is %s, want %s", got, want)
	}
	refused := map[string]error{
		`[{"op":"add"}]`: errNotAnObject, `"text"`: errNotAnObject, `3`: errNotAnObject,
		`null`: errNotAnObject, `{"metadata":3}`: errMetadata, `{"metadata":null}`: errMetadata,
		`{"metadata":["a"]}`: errMetadata,
	}
	for document, want := range refused {
		if _, err := atVersion([]byte(document), "7"); !errors.Is(err, want) {
			t.Errorf("%s at 7: err %v, want %v", document, err, want)
		}
	}
	if _, err := atVersion([]byte(`{}`), ""); !errors.Is(err, errEmptyVersion) {
		t.Errorf("an empty version: err %v", err)
	}
	var syntax *json.SyntaxError
	if _, err := atVersion([]byte(`{"data":`), "7"); !errors.As(err, &syntax) {
		t.Errorf("text that is not JSON: err %v", err)
	}
}
