// vcsim for the cni-rewind tests: VMware's vCenter simulator (govmomi's simulator package) built from the
// published root module, because `go install github.com/vmware/govmomi/vcsim@v0.56.0` is refused (the nested
// vcsim module has a replace directive). Listens on the address given by -l (127.0.0.1 only in tests), plain
// HTTP unless -tls, prints the SDK URL on one line, and runs until SIGTERM/SIGINT.
package main

import (
	"crypto/tls"
	"flag"
	"fmt"
	"log"
	"net/url"
	"os"
	"os/signal"
	"syscall"

	"github.com/vmware/govmomi/simulator"
)

func main() {
	listen := flag.String("l", "127.0.0.1:8989", "listen address")
	useTLS := flag.Bool("tls", false, "serve HTTPS with a self-signed certificate")
	vms := flag.Int("vm", 2, "VMs per host")
	hosts := flag.Int("host", 3, "standalone hosts")
	username := flag.String("username", "", "accept only this user name (default: any)")
	password := flag.String("password", "", "accept only this password (default: any)")
	flag.Parse()

	m := simulator.VPX()
	m.Host = *hosts
	m.Machine = *vms
	if err := m.Create(); err != nil {
		log.Fatal(err)
	}
	defer m.Remove()
	m.Service.Listen = &url.URL{Host: *listen}
	if *username != "" {
		m.Service.Listen.User = url.UserPassword(*username, *password)
	}
	if *useTLS {
		m.Service.TLS = new(tls.Config)
	}
	s := m.Service.NewServer()
	defer s.Close()
	fmt.Printf("VCSIM_URL=%s VCSIM_PID=%d\n", s.URL.String(), os.Getpid())
	os.Stdout.Sync()

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
}
