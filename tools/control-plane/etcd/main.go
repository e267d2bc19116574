// Command etcd is the etcd server that Kubernetes pins (go.etcd.io/etcd/server/v3), built from
// Go modules so the test suite can run a real control plane without downloading release binaries.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
