//go:build reconcile_component

// Package argv0 gives the program a name before any other package's init runs: the host passes
// no arguments, and packages such as k8s.io/klog/v2 (imported by k8s.io/apimachinery) index
// os.Args[0] in their init and would panic. Go initializes ready packages in import-path order,
// so this package, with a path sorting before "github.com/..." and "k8s.io/...", runs first.
// build-component.sh copies it into its own module `argv0` next to the bindings.
package argv0

import "os"

func init() {
	if len(os.Args) == 0 {
		os.Args = []string{"reconciler"}
	}
}
