package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/webhook"
)

// hostile shows what anyone who creates pods, or reaches the webhook port, may send and what bounds
// it (SECURITY.md): a body that never finishes, strings meant to become metric labels, and a policy
// meant to cost seconds of CPU.
func (d *demo) hostile(ctx context.Context) error {
	d.section("Hostile input: a slow peer, attacker-chosen metric labels, an oversized policy")

	// The attacker does not check whom it talks to.
	conn, err := tls.Dial("tcp", "127.0.0.1:"+strconv.Itoa(d.port), &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // the attacker's view
	if err != nil {
		return err
	}
	defer conn.Close()
	const declared = 7<<20 - 1
	start := time.Now()
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: wincompat\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{\"apiVersion\":", webhook.PodPath, declared)
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return fmt.Errorf("the slow peer got no answer: %w", err)
	}
	body, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(body), `"code":408`) {
		return fmt.Errorf("the slow peer was answered %s", body)
	}
	d.detail("a peer declaring a 7 MiB review and sending 14 bytes: answered 408 and cut off after %.1fs (--read-timeout 2s here, 10s by default), holding 16 KiB meanwhile, not 7 MiB",
		time.Since(start).Seconds())
	d.brief("a peer declaring a 7 MiB review and sending 14 bytes: answered 408 after %.1fs (--read-timeout), holding 16 KiB, not 7 MiB",
		time.Since(start).Seconds())

	// A pod author chooses a build in the pod's own affinity and the recorded build source.
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "labels", Namespace: demoNamespace,
			Annotations: map[string]string{policy.AnnotationBuild: "10.0.17763", policy.AnnotationBuildSource: "attacker-chosen-source"}},
		Spec: corev1.PodSpec{OS: &corev1.PodOS{Name: corev1.Windows}, Containers: []corev1.Container{{Name: "web", Image: "mcr.microsoft.com/windows/nanoserver:ltsc2019"}}},
	}
	affinity := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "affinity", Namespace: demoNamespace},
		Spec: corev1.PodSpec{OS: &corev1.PodOS{Name: corev1.Windows}, Containers: []corev1.Container{{Name: "web", Image: "mcr.microsoft.com/windows/nanoserver:ltsc2019"}},
			Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
					Key: "node.kubernetes.io/windows-build", Operator: corev1.NodeSelectorOpIn, Values: []string{"10.0.99999-attacker-chosen"}}}}}}}}},
	}
	for _, p := range []*corev1.Pod{pod, affinity} {
		if err := d.c.Create(ctx, p, client.DryRunAll); err != nil {
			return fmt.Errorf("dry-run pod %s: %w", p.Name, err)
		}
	}
	d.warnings.Take()
	metrics, err := httpGet(d.metrics)
	if err != nil {
		return err
	}
	var builds []string
	for _, line := range strings.Split(metrics, "\n") {
		if strings.HasPrefix(line, "wincompat_build_selected_total{") {
			builds = append(builds, line)
		}
	}
	if strings.Contains(metrics, "attacker-chosen") {
		return fmt.Errorf("an attacker-chosen string became a metric label:\n%s", metrics)
	}
	d.detail("two dry-run pods, one with %s=attacker-chosen-source, one whose affinity allows build 10.0.99999-attacker-chosen: no series names either", policy.AnnotationBuildSource)
	d.brief("two dry-run pods with an attacker-chosen build source and affinity build: no metric series names either")
	for _, b := range builds {
		d.detail("  %s", b)
	}

	// Whoever may write the policy ConfigMap, or reach the policy check, chooses its size.
	var big strings.Builder
	big.WriteString("apiVersion: wincompat.io/v1alpha1\nkind: Policy\n")
	for i := 0; big.Len() < 300<<10; i++ {
		fmt.Fprintf(&big, "unknownKey%d: true\n", i)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: policyConfigMap, Namespace: wincompatNamespace}}
	if err := d.c.Get(ctx, client.ObjectKeyFromObject(cm), cm); err != nil {
		return err
	}
	cm.Data = map[string]string{webhook.PolicyKey: big.String()}
	start = time.Now()
	err = d.c.Update(ctx, cm, client.DryRunAll)
	if err == nil || !strings.Contains(err.Error(), "at most 256 KiB") {
		return fmt.Errorf("a 300 KiB policy of unknown keys was not refused for its size: %v", err)
	}
	d.detail("a 300 KiB policy of unknown keys: refused by the policy check in %.2fs (%s)", time.Since(start).Seconds(),
		strings.TrimSpace(err.Error()[strings.Index(err.Error(), "the policy is"):]))
	d.brief("a 300 KiB policy of unknown keys: refused by the policy check for its size in %.2fs (at most 256 KiB is read)", time.Since(start).Seconds())
	return nil
}

func httpGet(url string) (string, error) {
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}
