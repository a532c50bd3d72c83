package inventory

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wincompat/wincompat/policy"
)

// BuildRow is one Windows build of the cluster or the catalog, for `wincompat nodes`.
type BuildRow struct {
	Build        string
	Names        string // catalog names, e.g. ltsc2022
	Nodes, Ready int
	Archs        []string
	Taints       []string // distinct taints of its nodes, "(tolerated)" after those Windows pods get a toleration for
	RuntimeClass string   // the catalog's class for the build
	ClassState   string   // "managed", "unmanaged", "missing" or "-" (no class in the catalog)
}

// Report summarises the cluster's Windows nodes and RuntimeClasses against the policy, with the
// problems a platform engineer would want flagged.
func Report(ctx context.Context, c client.Reader, p *policy.Policy) ([]BuildRow, []string, error) {
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes); err != nil {
		return nil, nil, fmt.Errorf("listing nodes: %w", err)
	}
	var classes nodev1.RuntimeClassList
	if err := c.List(ctx, &classes); err != nil {
		return nil, nil, fmt.Errorf("listing RuntimeClasses: %w", err)
	}
	rows := map[string]*BuildRow{}
	row := func(build string) *BuildRow {
		if r, ok := rows[build]; ok {
			return r
		}
		r := &BuildRow{Build: build, ClassState: "-"}
		for _, b := range p.Builds {
			if b.Number == build {
				r.Names, r.RuntimeClass = strings.Join(b.Names, ","), b.RuntimeClass
			}
		}
		rows[build] = r
		return r
	}
	for _, b := range p.Builds {
		row(b.Number)
	}
	var findings []string
	for _, n := range nodes.Items {
		if n.Labels[corev1.LabelOSStable] != string(corev1.Windows) {
			continue
		}
		build := n.Labels[corev1.LabelWindowsBuild]
		if build == "" {
			findings = append(findings, fmt.Sprintf("node %s is Windows but has no %s label: wincompat cannot match its build", n.Name, corev1.LabelWindowsBuild))
			continue
		}
		r := row(build)
		r.Nodes++
		if NodeReady(&n) {
			r.Ready++
		}
		if arch := n.Labels[corev1.LabelArchStable]; arch != "" && !slices.Contains(r.Archs, arch) {
			r.Archs = append(r.Archs, arch)
		}
		osTainted := false
		for _, t := range n.Spec.Taints {
			s := t.ToString()
			if p.WindowsPodsTolerate(t) {
				osTainted = osTainted || t.Effect != corev1.TaintEffectPreferNoSchedule
				s += " (tolerated)"
			}
			if !slices.Contains(r.Taints, s) {
				r.Taints = append(r.Taints, s)
			}
		}
		if !osTainted {
			findings = append(findings, fmt.Sprintf("node %s is Windows but has no operating-system taint (%s=windows): pods that choose no operating system may be scheduled onto it; label their namespaces %s=linux, or set linuxByDefault", n.Name, strings.Join(policy.OSTaintKeys(), "|"), policy.LabelDefaultOS))
		}
	}
	byName := map[string]nodev1.RuntimeClass{}
	for _, rc := range classes.Items {
		byName[rc.Name] = rc
	}
	var out []BuildRow
	for _, build := range sortedBuilds(rows) {
		r := rows[build]
		if r.RuntimeClass != "" {
			rc, ok := byName[r.RuntimeClass]
			switch {
			case !ok:
				r.ClassState = "missing"
				if r.Nodes > 0 {
					findings = append(findings, fmt.Sprintf("build %s has nodes but no RuntimeClass %s: pods get no runtimeClassName", build, r.RuntimeClass))
				}
			case rc.Labels["app.kubernetes.io/managed-by"] == "wincompat":
				r.ClassState = "managed"
			default:
				r.ClassState = "unmanaged"
			}
			if ok && r.Nodes == 0 {
				findings = append(findings, fmt.Sprintf("RuntimeClass %s is for build %s, which has no node: its pods stay Pending", r.RuntimeClass, build))
			}
		}
		slices.Sort(r.Taints)
		slices.Sort(r.Archs)
		out = append(out, *r)
	}
	return out, findings, nil
}

func sortedBuilds(rows map[string]*BuildRow) []string {
	var builds []string
	for b := range rows {
		builds = append(builds, b)
	}
	slices.Sort(builds)
	return builds
}
