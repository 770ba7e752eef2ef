// ipam-driver allocates and releases pod addresses with libcalico-go's IPAM client, as Calico's CNI plugin does
// (cni-plugin/pkg/ipamplugin/ipam_plugin.go cmdAdd/cmdDel; the datastore-ready check of cni-plugin/pkg/plugin),
// against the datastore named by the environment (DATASTORE_TYPE=kubernetes, KUBECONFIG). It stands in for the
// CNI plugin of the local test cluster, whose pods never run a real network. `tunnel` is calico-node's
// tunnel-address allocation, run once per node as calico-node runs it at start.
//
//	ipam-driver churn --nodes n1,n2 --duration 30s --rate 10 --target 20 --prefix run1 [--namespace ns] [--seed 1]
//	ipam-driver assign --node n1 --pod p [--namespace ns] [--id ID]
//	ipam-driver release --id ID
//	ipam-driver tunnel --nodes n1,n2
//
// Every call is one JSON line on stdout: {"op":"assign",...}, {"op":"release",...} for calls that succeeded,
// {"op":"fail",...} for those that did not, and for churn a last {"op":"end",...} line. A consumer that replays
// the assign/release lines knows exactly which handles hold which addresses when the driver stops.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

	v3 "github.com/projectcalico/api/pkg/apis/projectcalico/v3"
	client "github.com/projectcalico/calico/libcalico-go/lib/clientv3"
	cerrors "github.com/projectcalico/calico/libcalico-go/lib/errors"
	"github.com/projectcalico/calico/libcalico-go/lib/ipam"
	"github.com/projectcalico/calico/libcalico-go/lib/options"
	"github.com/projectcalico/calico/node/pkg/allocateip"
	"github.com/sirupsen/logrus"
)

// The CNI plugin's network name in every Calico manifest; handles are "<network>.<containerID>" (utils.GetHandleID).
const network = "k8s-pod-network"

type pod struct {
	ID        string `json:"id"`
	Handle    string `json:"handle"`
	Pod       string `json:"pod"`
	Namespace string `json:"namespace"`
	Node      string `json:"node"`
	IP        string `json:"ip,omitempty"`
}

type event struct {
	Time string `json:"t"`
	Op   string `json:"op"`
	Call string `json:"call,omitempty"`
	*pod
	Error string `json:"error,omitempty"`
	// end line only
	Held      *int     `json:"held,omitempty"`
	Assigns   *int     `json:"assigns,omitempty"`
	Releases  *int     `json:"releases,omitempty"`
	Failures  *int     `json:"failures,omitempty"`
	Unsettled []string `json:"unsettled,omitempty"`
}

var out = json.NewEncoder(os.Stdout)

func emit(e event) {
	e.Time = time.Now().UTC().Format(time.RFC3339Nano)
	_ = out.Encode(e)
}

type driver struct{ c client.Interface }

// ready is the CNI plugin's first check: while ClusterInformation default has datastoreReady false (an upgrade or
// a restore holds the datastore lock) every ADD and DEL fails and the kubelet retries it later. The plugin
// dereferences the field without a nil check (it would crash); here an unset value is a failure too.
func (d driver) ready(ctx context.Context) error {
	ci, err := d.c.ClusterInformation().Get(ctx, "default", options.GetOptions{})
	if err != nil {
		return fmt.Errorf("error getting ClusterInformation: %v", err)
	}
	if ci.Spec.DatastoreReady == nil {
		return errors.New("ClusterInformation default has no datastoreReady (the CNI plugin would crash)")
	}
	if !*ci.Spec.DatastoreReady {
		return errors.New("Calico is currently not ready to process requests")
	}
	return nil
}

// assign is cmdAdd without a requested IP: one IPv4 address from the enabled pools, with the attributes the plugin
// records. On failure the kubelet calls DEL for the same container, which releases whatever was assigned.
func (d driver) assign(ctx context.Context, p *pod) error {
	if err := d.ready(ctx); err != nil {
		return err
	}
	handle := p.Handle
	attrs := map[string]string{
		ipam.AttributeNode:      p.Node,
		ipam.AttributeTimestamp: time.Now().UTC().String(),
		ipam.AttributePod:       p.Pod,
		ipam.AttributeNamespace: p.Namespace,
	}
	v4, _, err := d.c.IPAM().AutoAssign(ctx, ipam.AutoAssignArgs{
		Num4:        1,
		HandleID:    &handle,
		Hostname:    p.Node,
		Attrs:       attrs,
		IntendedUse: v3.IPPoolAllowedUseWorkload,
	})
	if err == nil && (v4 == nil || len(v4.IPs) != 1) {
		err = fmt.Errorf("no IPv4 address assigned: %v", v4)
	}
	if err != nil {
		return err
	}
	p.IP = v4.IPs[0].IP.String()
	return nil
}

// release is cmdDel: everything held by the handle; a handle that does not exist is not an error.
func (d driver) release(ctx context.Context, p *pod) error {
	if err := d.ready(ctx); err != nil {
		return err
	}
	err := d.c.IPAM().ReleaseByHandle(ctx, p.Handle)
	if _, ok := err.(cerrors.ErrorResourceDoesNotExist); ok {
		return nil
	}
	return err
}

// tunnel is calico-node's own tunnel-address code (node/pkg/allocateip, the `calico-node -allocate-tunnel-addrs`
// step of its start) in its single-shot mode, for one node: for each tunnel type (IPIP, VXLAN, their IPv6 and
// wireguard forms) an address from the enabled pools with that encapsulation that select the node, handle
// "<type>-tunnel-addr-<node>", written to the Node (in KDD its projectcalico.org/IPv4*TunnelAddr annotation); kept
// when still valid, released and reassigned when its pool is gone or changed. Like calico-node it exits the process
// on an error (logrus Fatal), with the reason on stderr. The line printed, {"op":"tunnel","node","ipip","vxlan"},
// is the Node's IPv4 tunnel addresses afterwards ("" = none).
func (d driver) tunnel(nodename string) error {
	if err := os.Setenv("NODENAME", nodename); err != nil {
		return err
	}
	allocateip.Run(nil) // nil: one reconcile, no watch
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	n, err := d.c.Nodes().Get(ctx, nodename, options.GetOptions{})
	if err != nil {
		emit(event{Op: "fail", Call: "tunnel", pod: &pod{Node: nodename}, Error: err.Error()})
		return err
	}
	line := struct {
		Time  string `json:"t"`
		Op    string `json:"op"`
		Node  string `json:"node"`
		IPIP  string `json:"ipip"`
		VXLAN string `json:"vxlan"`
	}{time.Now().UTC().Format(time.RFC3339Nano), "tunnel", nodename, "", n.Spec.IPv4VXLANTunnelAddr}
	if n.Spec.BGP != nil {
		line.IPIP = n.Spec.BGP.IPv4IPIPTunnelAddr
	}
	return out.Encode(line)
}

func newPod(id, name, namespace, node string) *pod {
	if id == "" {
		sum := sha256.Sum256([]byte(namespace + "/" + name))
		id = hex.EncodeToString(sum[:]) // a container id is 64 hex digits
	}
	return &pod{ID: id, Handle: network + "." + id, Pod: name, Namespace: namespace, Node: node}
}

func call(what string, p *pod, f func(context.Context, *pod) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second) // the plugin's own timeout
	defer cancel()
	if err := f(ctx, p); err != nil {
		emit(event{Op: "fail", Call: what, pod: p, Error: err.Error()})
		return err
	}
	emit(event{Op: what, pod: p})
	return nil
}

// churn keeps about `target` fake pods, adding and deleting them at `rate` calls per second until `duration`
// has passed or SIGTERM/SIGINT arrives. A failed ADD is followed by its DEL, retried on every following tick until it
// succeeds (nothing else is called meanwhile), as the kubelet retries it. A failed DEL of a held pod is not retried
// as such: the pod stays held and may be picked again by a later tick's random delete.
func (d driver) churn(nodes []string, namespace, prefix string, rate float64, target int, duration time.Duration, seed int64) int {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	rng := rand.New(rand.NewSource(seed))
	held := map[string]*pod{}
	var order []string // held ids in assignment order (deterministic choice of the pod to delete)
	unsettled := map[string]*pod{}
	assigns, releases, failures, n := 0, 0, 0, 0
	drop := func(id string) {
		delete(held, id)
		for i, x := range order {
			if x == id {
				order = append(order[:i], order[i+1:]...)
				break
			}
		}
	}
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer tick.Stop()
	deadline := time.After(duration)
loop:
	for {
		select {
		case <-stop:
			break loop
		case <-deadline:
			break loop
		case <-tick.C:
		}
		if len(unsettled) > 0 { // a DEL after a failed ADD, retried
			for id, p := range unsettled {
				if call("release", p, d.release) == nil {
					delete(unsettled, id)
				} else {
					failures++
				}
				break
			}
			continue
		}
		add := len(order) == 0 || (len(order) < target && rng.Intn(4) != 0) || (len(order) >= target && rng.Intn(4) == 0)
		if add {
			n++
			p := newPod("", fmt.Sprintf("%s-%d", prefix, n), namespace, nodes[rng.Intn(len(nodes))])
			if call("assign", p, d.assign) == nil {
				held[p.ID] = p
				order = append(order, p.ID)
				assigns++
			} else {
				failures++
				unsettled[p.ID] = p
			}
			continue
		}
		p := held[order[rng.Intn(len(order))]]
		if call("release", p, d.release) == nil {
			drop(p.ID)
			releases++
		} else {
			failures++
		}
	}
	var left []string
	for _, p := range unsettled {
		left = append(left, p.Handle)
	}
	sort.Strings(left)
	h := len(held)
	emit(event{Op: "end", Held: &h, Assigns: &assigns, Releases: &releases, Failures: &failures, Unsettled: left})
	return 0
}

func main() {
	logrus.SetOutput(os.Stderr)
	logrus.SetLevel(logrus.WarnLevel)
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: ipam-driver churn|assign|release|tunnel [flags]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	nodes := fs.String("nodes", "", "churn, tunnel: comma-separated node names")
	node := fs.String("node", "", "assign: node name")
	podName := fs.String("pod", "", "assign: pod name")
	namespace := fs.String("namespace", "ipam-churn", "pod namespace")
	id := fs.String("id", "", "container id (default: derived from namespace/pod)")
	prefix := fs.String("prefix", "churn", "churn: pod name prefix (unique per run)")
	rate := fs.Float64("rate", 10, "churn: calls per second")
	target := fs.Int("target", 20, "churn: pods held at about this number")
	duration := fs.Duration("duration", time.Minute, "churn: how long")
	seed := fs.Int64("seed", 1, "churn: random seed")
	_ = fs.Parse(os.Args[2:])

	c, err := client.NewFromEnv()
	if err != nil {
		fmt.Fprintf(os.Stderr, "ipam-driver: %v\n", err)
		os.Exit(4)
	}
	d := driver{c: c}
	switch os.Args[1] {
	case "churn":
		list := strings.FieldsFunc(*nodes, func(r rune) bool { return r == ',' })
		if len(list) == 0 || *rate <= 0 || *target <= 0 {
			fmt.Fprintln(os.Stderr, "ipam-driver churn: --nodes, a positive --rate and --target are required")
			os.Exit(2)
		}
		os.Exit(d.churn(list, *namespace, *prefix, *rate, *target, *duration, *seed))
	case "assign":
		if *node == "" || *podName == "" {
			fmt.Fprintln(os.Stderr, "ipam-driver assign: --node and --pod are required")
			os.Exit(2)
		}
		if call("assign", newPod(*id, *podName, *namespace, *node), d.assign) != nil {
			os.Exit(1)
		}
	case "release":
		if *id == "" {
			fmt.Fprintln(os.Stderr, "ipam-driver release: --id is required")
			os.Exit(2)
		}
		if call("release", newPod(*id, "", *namespace, ""), d.release) != nil {
			os.Exit(1)
		}
	case "tunnel":
		list := strings.FieldsFunc(*nodes, func(r rune) bool { return r == ',' })
		if len(list) == 0 {
			fmt.Fprintln(os.Stderr, "ipam-driver tunnel: --nodes is required")
			os.Exit(2)
		}
		code := 0
		for _, n := range list {
			if d.tunnel(n) != nil {
				code = 1
			}
		}
		os.Exit(code)
	default:
		fmt.Fprintf(os.Stderr, "ipam-driver: unknown command %q (churn, assign, release, tunnel)\n", os.Args[1])
		os.Exit(2)
	}
}
