package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// The chart as its README installs it: release wincompat in wincompat-system, from the repository.
const (
	helmRelease   = "wincompat"
	helmChart     = "deploy/helm/wincompat"
	engineKey     = "wincompat.io/engine"
	engineWhyKey  = "wincompat.io/engine-reason"
	helmLineWidth = 150 // wider lines are wrapped, indented under their first
)

// helmInstall is the first use of the chart, with the real bin/helm against this API server, before
// wincompat runs here: a mistyped value refused by the chart's schema, the defaults refused by the
// prerequisite check (no cert-manager here), the engine `auto` chooses on this cluster and offline, and
// what `helm uninstall` would take. Dry runs only: no kubelet would run the chart's Deployment, so the
// next section runs what it runs by hand (test/e2e/chart installs, upgrades and uninstalls for real).
// It runs before wincompat serve, on a cluster where nothing of wincompat exists yet, because helm
// refuses, dry run or not, to install over objects it does not manage, and the demo's own are named as
// the chart's.
func (d *demo) helmInstall(ctx context.Context) error {
	d.section("Install and undo with Helm: %s %s, dry runs against this API server", d.rel(d.helmBin), helmVersion(ctx, d.helmBin))
	kubeconfig := filepath.Join(d.work, "helm.kubeconfig")
	if err := d.cp.WriteKubeConfig(kubeconfig, "helm-admin", "system:masters"); err != nil {
		return err
	}
	install := []string{"install", helmRelease, helmChart, "--namespace", wincompatNamespace, "--dry-run=server", "--kubeconfig", d.rel(kubeconfig)}

	// 1. A typo: the schema refuses it before helm renders or sends anything.
	typo := slices.Concat(install, []string{"--set", "tls.mode=selfmanaged"})
	if _, msg, err := d.helm(ctx, typo...); err == nil {
		return errors.New("helm accepted tls.mode=selfmanaged: the chart's schema lets a mistyped value through")
	} else if !strings.Contains(msg, "self-managed") {
		return fmt.Errorf("helm refused tls.mode=selfmanaged, not naming the allowed values: %s", msg)
	} else {
		d.helmLine("--set tls.mode=selfmanaged: refused by the chart's schema before rendering: ", msg)
	}

	// 2. The defaults on a cluster without cert-manager: the prerequisite check says what to do.
	if _, msg, err := d.helm(ctx, install...); err == nil {
		return errors.New("helm install --dry-run=server with tls.mode cert-manager passed on a cluster without cert-manager")
	} else if !strings.Contains(msg, "cert-manager") {
		return fmt.Errorf("helm install --dry-run=server with the defaults failed, not on cert-manager: %s", msg)
	} else {
		d.helmLine("install --dry-run=server, the defaults: refused: ", msg)
	}

	// 3. Without cert-manager, as the message says: what auto chose on this API server, and why.
	out, msg, err := d.helm(ctx, slices.Concat(install, []string{"--set", "tls.mode=self-managed", "--output", "json"})...)
	if err != nil {
		return fmt.Errorf("helm install --dry-run=server --set tls.mode=self-managed: %w: %s", err, msg)
	}
	var rel struct {
		Manifest string `json:"manifest"`
		Info     struct {
			Notes string `json:"notes"`
		} `json:"info"`
	}
	if err := json.Unmarshal(out, &rel); err != nil {
		return fmt.Errorf("helm install --output json: %w", err)
	}
	online, err := readRendering([]byte(rel.Manifest))
	if err != nil {
		return fmt.Errorf("the release helm would install: %w", err)
	}
	if online.engine != "hybrid" {
		return fmt.Errorf("engine auto chose %q on Kubernetes %s (%s), want hybrid", online.engine, k8sVersion(), online.reason)
	}
	d.helmLine("--set tls.mode=self-managed: ", fmt.Sprintf("%d objects, engine %s, because %s", online.objects, online.engine, online.reason))
	for _, l := range strings.Split(strings.TrimSpace(rel.Info.Notes), "\n") {
		if strings.TrimSpace(l) != "" {
			d.detail("  NOTES | %s", l)
		}
	}

	// 4. Offline, no cluster to ask: the engine it renders and why.
	out, msg, err = d.helm(ctx, "template", helmRelease, helmChart, "--namespace", wincompatNamespace)
	if err != nil {
		return fmt.Errorf("helm template: %w: %s", err, msg)
	}
	offline, err := readRendering(out)
	if err != nil {
		return fmt.Errorf("helm template: %w", err)
	}
	if offline.engine != "webhook" {
		return fmt.Errorf("offline helm template rendered engine %q (%s), want webhook", offline.engine, offline.reason)
	}
	d.helmLine("helm template, offline: ", fmt.Sprintf("engine %s, because %s", offline.engine, offline.reason))

	// The undo, from the release above: what it installs goes with it, and what wincompat writes at run
	// time is owned by what it installs.
	d.sayWrapped(fmt.Sprintf("helm uninstall: takes its %d objects, among them %d MutatingAdmissionPolicies, their bindings and params",
		online.objects, online.bindings))
	d.detail("  helm uninstall: takes the %d objects of the release, the %d MutatingAdmissionPolicies, their bindings and params among them "+
		"(wincompat writes none); the garbage collector then deletes the self-managed TLS Secret, "+
		"owned by ConfigMap wincompat-policy-last-good; RuntimeClasses and the leader Lease stay, as the chart README's Uninstall says",
		online.objects, online.bindings)
	return nil
}

// helm runs bin/helm from the repository with a configuration and cache of its own (none of the user's
// repositories, plugins or contexts) and returns its stdout and its error message, made one line.
func (d *demo) helm(ctx context.Context, args ...string) (stdout []byte, msg string, err error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, d.helmBin, args...)
	cmd.Dir = d.root
	home := filepath.Join(d.work, "helm")
	cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+filepath.Join(home, "config"), "HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"), "KUBECONFIG=/dev/null")
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = nil, &stderr
	d.detail("$ %s %s", d.rel(d.helmBin), strings.Join(args, " "))
	stdout, err = cmd.Output()
	if err == nil && stderr.Len() > 0 {
		d.detail("  stderr | %s", helmMessage(stderr.String()))
	}
	return stdout, helmMessage(stderr.String()), err
}

// helmLine prints what a helm command came to: with -v in full, else shortened (shortenHelm) and
// wrapped under its label.
func (d *demo) helmLine(label, text string) {
	if d.verbose {
		d.detail("  %s%s", label, text)
		return
	}
	d.sayWrapped(label + shortenHelm(text))
}

// sayWrapped says a line too long for one (helmLineWidth), wrapped: printed without -v only.
func (d *demo) sayWrapped(text string) {
	for _, l := range wrap(text, helmLineWidth, "  ") {
		d.brief("%s", l)
	}
}

var (
	// What helm puts before a template's fail message, which says nothing to the reader.
	helmPrefix = regexp.MustCompile(`^(Error: )?([A-Z ]+ FAILED: )?(execution error at \([^)]*\): )?`)
	// An aside in parentheses (a web address, "(the default)"), which the default output leaves out; -v
	// keeps it.
	aside = regexp.MustCompile(` \([^()]*\)`)
)

// helmMessage is helm's error output as one line: without helm's "Error: INSTALLATION FAILED:
// execution error at (template):" preamble, its lines joined, the items of a list by "; ".
func helmMessage(stderr string) string {
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimSpace(stderr), "\n") {
		l = strings.TrimSpace(l)
		switch {
		case l == "" || strings.HasPrefix(l, "Use --debug flag"):
			continue // helm's advice on its own flags, not the chart's message
		case b.Len() == 0:
			l = helmPrefix.ReplaceAllString(l, "")
		case strings.HasPrefix(l, "- ") && !strings.HasSuffix(b.String(), ":"):
			b.WriteString(";")
		}
		if b.Len() > 0 {
			b.WriteString(" ")
		}
		b.WriteString(strings.TrimPrefix(l, "- "))
	}
	return b.String()
}

// shortenHelm is a helm message for the default output: asides in parentheses left out, the API group
// before a kind named in words (not one spelled for --api-versions, group/version/Kind), and helm's and
// the chart's preambles, which the line's label says already ("this cluster lacks what the release
// needs"), cut.
func shortenHelm(s string) string {
	s = aside.ReplaceAllString(s, "")
	s = strings.ReplaceAll(s, "admissionregistration.k8s.io/v1 ", "")
	for _, cut := range []string{"this cluster lacks what the release needs: ",
		"values don't meet the specifications of the schema(s) in the following chart(s): wincompat: "} {
		s = strings.Replace(s, cut, "", 1)
	}
	return s
}

// wrap breaks s at spaces into lines of at most width runes where it can (a longer word stays whole),
// the lines after the first starting with indent.
func wrap(s string, width int, indent string) []string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(s) {
		switch {
		case line == "" || strings.TrimSpace(line) == "":
			line += w
		case len([]rune(line))+1+len([]rune(w)) > width:
			lines = append(lines, line)
			line = indent + w
		default:
			line += " " + w
		}
	}
	if strings.TrimSpace(line) != "" {
		lines = append(lines, line)
	}
	return lines
}

// rendering is what the demo reads from a rendering of the chart.
type rendering struct {
	objects, bindings int
	engine, reason    string // the Deployment's wincompat.io/engine and wincompat.io/engine-reason
}

// readRendering reads the chart's objects from helm's manifest (YAML documents).
func readRendering(manifest []byte) (rendering, error) {
	var r rendering
	rd := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(manifest)))
	for {
		doc, err := rd.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return r, err
		}
		var u unstructured.Unstructured
		if err := yaml.Unmarshal(doc, &u.Object); err != nil {
			return r, err
		}
		if len(u.Object) == 0 {
			continue // a comment or an empty document
		}
		r.objects++
		switch u.GetKind() {
		case "MutatingAdmissionPolicyBinding":
			r.bindings++
		case "Deployment":
			r.engine, r.reason = u.GetAnnotations()[engineKey], u.GetAnnotations()[engineWhyKey]
		}
	}
	if r.engine == "" {
		return r, fmt.Errorf("no Deployment annotated %s among %d objects", engineKey, r.objects)
	}
	return r, nil
}

// helmVersion is helm's version, as `helm version --short` says it.
func helmVersion(ctx context.Context, bin string) string {
	out, err := exec.CommandContext(ctx, bin, "version", "--short").Output()
	if err != nil {
		return "(unknown version)"
	}
	return strings.TrimSpace(string(out))
}
