package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/test/lab/perf"
)

// cluster is what the lab has written to the API server so far, so that the next size adds to it.
type cluster struct {
	cs                  kubernetes.Interface
	workers             int
	windowsEvery        int
	linux, windows      *corev1.Pod // the templates
	nodes               int
	linuxNodes, win2022 []string
	win2019             []string
	hostIPs             map[string]string
	pods, events        int
	counts              map[podRole]int
	// misplacedPods are the pods the leader must report, legacy ones included.
	misplacedPods []podRef
	// stamped says whether `wincompat mutate` put policy.LabelOS on the Windows pod itself; if not, the
	// lab adds it, as wincompat will.
	stamped bool
}

// newCluster prepares the pod templates: the Linux pod of a typical chart (3 containers), and the Windows
// chart pod (2 containers) as wincompat stores it, by running `wincompat mutate` on it once.
func newCluster(ctx context.Context, cs kubernetes.Interface, wincompatBin string, workers, windowsEvery int) (*cluster, error) {
	c := &cluster{cs: cs, workers: workers, windowsEvery: windowsEvery, hostIPs: map[string]string{}, counts: map[podRole]int{}}
	var err error
	if c.linux, err = perf.TypedPod(perf.ChartPod(3, namespaceName(0), false)); err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, wincompatBin, "mutate", "-f", "-", "-o", "json", "--namespace", namespaceName(0), "--quiet")
	cmd.Stdin = bytes.NewReader(perf.ChartPod(2, namespaceName(0), true))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("wincompat mutate of the Windows chart pod: %w: %s", err, stderr.String())
	}
	if c.windows, err = perf.TypedPod(out); err != nil {
		return nil, fmt.Errorf("wincompat mutate's output: %w", err)
	}
	if _, ok := c.windows.Annotations[policy.AnnotationVersion]; !ok {
		return nil, errors.New("wincompat mutate left the Windows chart pod without its annotations: not the pod wincompat admits")
	}
	_, c.stamped = c.windows.Labels[policy.LabelOS]
	c.windows.Labels[policy.LabelOS] = "windows"
	return c, nil
}

// setup creates what every size shares: the namespaces (even ones opted in), each with the ServiceAccount
// the chart pods name (no controller-manager creates it), and wincompat's own namespace.
func (c *cluster) setup(ctx context.Context) error {
	for k := range namespaces {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespaceName(k), Labels: map[string]string{"team": fmt.Sprint(k)}}}
		if k%2 == 0 {
			ns.Labels[policy.LabelEnabled] = "true"
		}
		if _, err := c.cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			return err
		}
		if _, err := c.cs.CoreV1().ServiceAccounts(ns.Name).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "web"}}, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	_, err := c.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: wincompatNamespace}}, metav1.CreateOptions{})
	return err
}

// addNodes brings the node count to n: each created, its status written as a kubelet writes it, and the
// not-ready taint the API server's admission puts on a new node lifted, as the node lifecycle
// controller does once the node is Ready.
func (c *cluster) addNodes(ctx context.Context, n int) error {
	from := c.nodes
	if n <= from {
		return nil
	}
	err := parallel(ctx, c.workers, n-from, func(ctx context.Context, k int) error {
		j := from + k
		node, err := c.cs.CoreV1().Nodes().Create(ctx, newNode(j), metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("node %s: %w", nodeName(j), err)
		}
		nodeStatus(node, j)
		if node, err = c.cs.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("node %s status: %w", node.Name, err)
		}
		kept := node.Spec.Taints[:0]
		for _, t := range node.Spec.Taints {
			if t.Key != corev1.TaintNodeNotReady {
				kept = append(kept, t)
			}
		}
		node.Spec.Taints = kept
		if _, err = c.cs.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("node %s taints: %w", node.Name, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for j := from; j < n; j++ {
		name := nodeName(j)
		c.hostIPs[name] = fmt.Sprintf("10.224.%d.%d", j/250, j%250+4)
		switch w, b := nodeKind(j); {
		case !w:
			c.linuxNodes = append(c.linuxNodes, name)
		case b == build2019:
			c.win2019 = append(c.win2019, name)
		default:
			c.win2022 = append(c.win2022, name)
		}
	}
	c.nodes = n
	return nil
}

// addPods brings the pod count to n, with their Events (one per two pods): pods created bound to
// their nodes, then their status written through the status subresource, since no kubelet runs.
func (c *cluster) addPods(ctx context.Context, n int) error {
	from := c.pods
	if n <= from {
		return nil
	}
	refs := make([]podRef, n-from)
	var done atomic.Int64
	stop := progress("pods", n-from, &done)
	err := parallel(ctx, c.workers, n-from, func(ctx context.Context, k int) error {
		i := from + k
		role := roleOf(i, c.windowsEvery)
		ns := podNamespace(i, role)
		var template *corev1.Pod
		var node string
		switch role {
		case roleLinux:
			template, node = c.linux, c.linuxNodes[i%len(c.linuxNodes)]
		case roleMisplaced, roleLegacyMisplaced:
			template, node = c.windows, c.win2019[i%len(c.win2019)]
		default:
			template, node = c.windows, c.win2022[i%len(c.win2022)]
		}
		p := podFrom(template, i, ns, node, role)
		if role == roleLegacy || role == roleLegacyMisplaced {
			delete(p.Labels, policy.LabelOS)
			for k := range p.Annotations {
				if len(k) > len("wincompat.io/") && k[:len("wincompat.io/")] == "wincompat.io/" {
					delete(p.Annotations, k)
				}
			}
		}
		created, err := c.cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("pod %s/%s: %w", ns, p.Name, err)
		}
		if role.misplaced() {
			misplacedStatus(created, c.hostIPs[node])
		} else {
			runningStatus(created, i, c.hostIPs[node])
		}
		if _, err := c.cs.CoreV1().Pods(ns).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("pod %s/%s status: %w", ns, p.Name, err)
		}
		refs[k] = podRef{ns: ns, name: created.Name, node: node, uid: created.UID, role: role}
		done.Add(1)
		return nil
	})
	stop()
	if err != nil {
		return err
	}
	for _, r := range refs {
		c.counts[r.role]++
		if r.role.misplaced() {
			c.misplacedPods = append(c.misplacedPods, r)
		}
	}
	c.pods = n
	// One Event per two pods, and one about every misplaced pod (the runtime's refusal).
	var about []podRef
	for k, r := range refs {
		if r.role.misplaced() || (from+k)%2 == 0 {
			about = append(about, r)
		}
	}
	done.Store(0)
	stop = progress("events", len(about), &done)
	defer stop()
	base := c.events
	err = parallel(ctx, c.workers, len(about), func(ctx context.Context, k int) error {
		e := eventAbout(about[k], base+k)
		if _, err := c.cs.CoreV1().Events(e.Namespace).Create(ctx, e, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("event %s/%s: %w", e.Namespace, e.Name, err)
		}
		done.Add(1)
		return nil
	})
	c.events += len(about)
	return err
}

// misplaced is how many misplaced pods the fill made: those the leader must report.
func (c *cluster) misplaced() (labelled, legacy int) {
	return c.counts[roleMisplaced], c.counts[roleLegacyMisplaced]
}

// parallel runs f(0..n-1) on workers goroutines, and stops at the first error.
func parallel(ctx context.Context, workers, n int, f func(ctx context.Context, k int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				k := int(next.Add(1) - 1)
				if k >= n {
					return
				}
				if err := f(ctx, k); err != nil {
					cancel(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return ctx.Err()
}

// progress prints how far a long fill has come every 15 s, until the returned stop.
func progress(what string, total int, done *atomic.Int64) (stop func()) {
	start := time.Now()
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(15 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
				d := done.Load()
				fmt.Printf("    %s: %d/%d, %.0f/s\n", what, d, total, float64(d)/time.Since(start).Seconds())
			}
		}
	})
	return func() { close(quit); wg.Wait() }
}
