// Package noop is the noop-go test guest: like the other languages' noop guests it reads the
// request (the object's JSON text, not parsed) and answers done, for comparing the host's
// dispatch cost across guest languages. An object whose text names `panic` or `decode` is
// decoded: a ConfigMap with the data key `panic` panics, to show that a Go panic is a reconcile
// error, not a trap; one with the data key `decode` is decoded and answered done, to make the
// Go heap work.
package noop

import (
	"bytes"
	"context"

	"reconcile-host/guest"
)

func init() { guest.Register(reconcile) }

func reconcile(_ context.Context, req guest.Request) (guest.Action, error) {
	if !names(req.Object, "panic") && !names(req.Object, "decode") {
		return guest.Done(), nil
	}
	var object struct {
		Data map[string]string `json:"data"`
	}
	// A copy first, as a reconciler that keeps the text would make: the large-object test
	// (tests/lang_go.rs) counts on three copies of each object, with the lifted request and
	// the decoded value.
	req.Object = bytes.Clone(req.Object)
	if _, err := req.Decode(&object); err != nil {
		return guest.Action{}, err
	}
	if message, ok := object.Data["panic"]; ok {
		panic(message)
	}
	return guest.Done(), nil
}

// names reports whether text holds the JSON string "word" (quotes included). It looks for the
// word's first letter with bytes.IndexByte (4 bytes a step in wasm) and checks the quotes
// around it: bytes.Contains(text, []byte(`"word"`)) starts from the quote, which JSON is full of,
// gives up skipping and hashes every byte (Rabin-Karp) — for a 1 KB object, twice, that was
// 60 % of this guest's reconcile.
func names(text []byte, word string) bool {
	for i := 1; i < len(text); {
		j := bytes.IndexByte(text[i:], word[0])
		if j < 0 {
			return false
		}
		i += j
		end := i + len(word)
		if text[i-1] == '"' && end < len(text) && text[end] == '"' && string(text[i:end]) == word {
			return true
		}
		i++
	}
	return false
}
