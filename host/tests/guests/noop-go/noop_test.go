package noop

import "testing"

func TestNames(t *testing.T) {
	for _, c := range []struct {
		text string
		want bool
	}{
		{`{"data":{"panic":"x"}}`, true},
		{`{"data":{"a":"panic"}}`, true},
		{`"panic"`, true},
		{`{"data":{"panics":"x"}}`, false},
		{`{"data":{"apanic":"x"}}`, false},
		{`{"data":{"panic`, false},
		{`panic"`, false},
		{`{"apiVersion":"v1","kind":"ConfigMap","data":{"key":"pp"}}`, false},
		{``, false},
	} {
		if got := names([]byte(c.text), "panic"); got != c.want {
			t.Errorf("names(%s, panic) = %v, want %v", c.text, got, c.want)
		}
	}
}
