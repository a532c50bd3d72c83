// Command etcd is the etcd server used by the test control plane. It is built from the Go module proxy
// so that tests need no downloaded release archive.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
