package property

// Issue 8, the validation property at scale: thousands of generated Windows pods and workloads (random
// combinations of every strip-table row, the rewrites, volumes, containers, init containers and
// sidecars, annotations, existing scheduling), created through the real API server with `wincompat
// serve` answering its real webhook configuration. For every object:
//
//	(a) it is admitted;
//	(b) nothing is lost: the stored object equals the input with exactly the recorded changes applied
//	    (by an interpreter of Change paths written here) plus wincompat's own annotations, after the API
//	    server's defaulting, which a dry-run create of that expected object in a namespace wincompat
//	    does not serve supplies;
//	(c) nothing is widened: no privileged, hostProcess, hostNetwork, added capabilities or weaker
//	    runAsNonRoot than the input had.
//
// WINCOMPAT_PROPERTY_N (default 5000) sets the count, WINCOMPAT_PROPERTY_SEED the seed (random when
// unset, always logged), WINCOMPAT_PROPERTY_ONLY a comma-separated list of object numbers to replay.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/go-logr/logr"
	gocmp "github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/test/fixtures"
	"github.com/wincompat/wincompat/webhook/server"

	"github.com/wincompat/wincompat/test/e2e/e2eutil"
)

const (
	propNS           = "property"            // opted in
	propRestrictedNS = "property-restricted" // opted in, Pod Security restricted, a namespace build
	propOracleNS     = "property-oracle"     // not opted in: where the expected objects are dry-run
	propWorkers      = 8
	readBackEvery    = 25
)

// propConfig is the run's size and seed, from the environment.
type propConfig struct {
	n    int
	seed uint64
	only []int
}

func propertyConfig(t *testing.T) propConfig {
	t.Helper()
	c := propConfig{n: 5000, seed: uint64(time.Now().UnixNano())}
	if s := os.Getenv("WINCOMPAT_PROPERTY_N"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("WINCOMPAT_PROPERTY_N=%q: want a positive count", s)
		}
		c.n = n
	}
	if s := os.Getenv("WINCOMPAT_PROPERTY_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("WINCOMPAT_PROPERTY_SEED=%q: %v", s, err)
		}
		c.seed = seed
	}
	if s := os.Getenv("WINCOMPAT_PROPERTY_ONLY"); s != "" {
		for _, f := range strings.Split(s, ",") {
			i, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || i < 0 {
				t.Fatalf("WINCOMPAT_PROPERTY_ONLY=%q: want object numbers separated by commas", s)
			}
			c.only = append(c.only, i)
		}
	}
	return c
}

func (c propConfig) replay(index int) string {
	if index < 0 {
		return "a fixed case of propRegressions"
	}
	return fmt.Sprintf("WINCOMPAT_PROPERTY_SEED=%d WINCOMPAT_PROPERTY_ONLY=%d", c.seed, index)
}

// propResult is what one object came to.
type propResult struct {
	o        *propObject
	stored   *unstructured.Unstructured
	changes  []policy.Change
	admitErr error                      // (a)
	oracle   error                      // the expected object could not be built from the record, or the dry-run failed
	diff     string                     // (b): expected vs stored, "" when equal
	expected *unstructured.Unstructured // the dry-run expected object, kept when it differs
	widened  []string                   // (c)
	disallow []string                   // recorded changes the tables do not allow
	absent   []string                   // fields of recorded removals of values the input did not carry (the API server defaulted them)
}

func (r *propResult) equal() bool {
	return r.admitErr == nil && r.oracle == nil && r.diff == "" && len(r.disallow) == 0
}

// TestValidationProperty: issue 8, second bullet.
func TestValidationProperty(t *testing.T) {
	cfg := propertyConfig(t)
	rows := policy.LinuxOnlyFields()

	// Generate first: a row the generator cannot set fails before any cluster starts.
	indices := cfg.only
	if len(indices) == 0 {
		indices = make([]int, cfg.n)
		for i := range indices {
			indices[i] = i
		}
	}
	t.Logf("seed %d, %d objects; replay one object with WINCOMPAT_PROPERTY_SEED=%d WINCOMPAT_PROPERTY_ONLY=<n>", cfg.seed, len(indices), cfg.seed)
	objs := make([]*propObject, 0, len(indices))
	for _, i := range indices {
		o, err := generateChecked(cfg.seed, i, rows)
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, o)
	}

	began := time.Now()
	// wincompat logs a line per mutated object: thousands here. Its errors still reach the test log.
	cl := e2eutil.StartClusterWith(t, nil, e2eutil.ManageRuntimeClasses, func(o *server.Options) { o.Log = logr.New(errorsOnly{o.Log.GetSink()}) })
	ctx := context.Background()
	cl.NewNamespace(t, propNS, map[string]string{policy.LabelEnabled: "true"})
	cl.NewNamespace(t, propOracleNS, nil)
	// The restricted namespace also names a build (wincompat.io/build), one of the build sources.
	e2eutil.Create(ctx, t, cl.C, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:        propRestrictedNS,
		Labels:      map[string]string{policy.LabelEnabled: "true", "pod-security.kubernetes.io/enforce": "restricted"},
		Annotations: map[string]string{policy.AnnotationBuild: "ltsc2025"},
	}})
	e2eutil.Create(ctx, t, cl.C, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: propRestrictedNS}})
	cl.WaitUntilMutating(t, propRestrictedNS)
	// One Windows Server 2022 node: the cluster's only build, so pods whose images name none get it.
	if err := fixtures.AddNode(ctx, cl.C, fixtures.Node{Name: "win-2022", OS: "windows", Build: "10.0.20348"}, 110); err != nil {
		t.Fatal(err)
	}
	cl.WaitForManagedRuntimeClasses(t, 3)
	probe := e2eutil.ProbePod("example.com/no-build-tag:1.0")
	cl.WaitForAdmission(t, propNS, probe, "the cluster's build and its RuntimeClass", func(p *corev1.Pod, _ []string) bool {
		return p.Annotations[policy.AnnotationBuildSource] == policy.SourceCluster && p.Spec.RuntimeClassName != nil
	})
	t.Logf("control plane, wincompat serve, namespaces, node and RuntimeClasses ready in %v", time.Since(began).Round(time.Millisecond))

	// A client of its own: no client-side rate limit, warnings dropped (thousands of them).
	rc := rest.CopyConfig(cl.Cfg)
	rc.QPS, rc.Burst = -1, 0
	rc.WarningHandler = rest.NoWarnings{}
	c, err := client.New(rc, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	run := &propRun{c: c, rows: rows}

	began = time.Now()
	results := make([]*propResult, len(objs))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range propWorkers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(objs) {
					return
				}
				results[i] = run.check(ctx, objs[i])
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(began)

	t.Logf("%d objects created, dry-run as expected and compared in %v (%d workers, %.0f objects/s)\n%s",
		len(objs), elapsed.Round(time.Millisecond), propWorkers, float64(len(objs))/elapsed.Seconds(), propReport(results, rows))
	propFailures(t, cfg, results)
	if len(cfg.only) == 0 && cfg.n >= 1000 {
		propCoverage(t, results, rows)
	}

	// Inputs on which the property failed, kept as fixed cases (see propRegressions).
	for _, rc := range propRegressions() {
		t.Run(rc.name, func(t *testing.T) {
			o := &propObject{index: -1, kind: rc.obj.GetKind(), obj: rc.obj}
			r := run.check(ctx, o)
			if !r.equal() || len(r.widened) > 0 {
				propFailures(t, cfg, []*propResult{r})
				t.Log(rc.why)
			}
		})
	}

	// A test that cannot fail proves nothing: the oracle must see a loss.
	t.Run("oracle reports a field missing from the expected object", func(t *testing.T) {
		r := findResult(results, func(r *propResult) bool {
			return r.o.kind == "Pod" && r.equal() && len(podEnv(r.o.obj)) > 0
		})
		if r == nil {
			t.Skip("no admitted Pod with an env var in this run (use a larger WINCOMPAT_PROPERTY_N)")
		}
		diff, err := run.oracleDiff(ctx, r, func(root map[string]any) {
			env := podEnv(&unstructured.Unstructured{Object: root})
			c := env[0]
			list := c["env"].([]any)
			c["env"] = list[1:]
			if len(list) == 1 {
				delete(c, "env")
			}
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if diff == "" || !strings.Contains(diff, "VAR_") {
			t.Errorf("%v: dropping an env var from the expected object went unnoticed; diff:\n%s", r.o, diff)
		}
	})
	t.Run("widening check reports what it must", func(t *testing.T) {
		r := findResult(results, func(r *propResult) bool {
			spec := mustPodSpec(t, r.o)
			return r.o.kind == "Pod" && r.equal() && len(r.widened) == 0 && !hostProcessOf(spec) && !spec.HostNetwork
		})
		if r == nil {
			t.Skip("no admitted Pod without hostProcess and hostNetwork in this run")
		}
		for _, tc := range []struct {
			name, want string
			edit       func(in, out map[string]any) // pod specs of the input and the stored object
		}{
			{"privileged", "privileged", func(_, out map[string]any) { securityContextOf(firstContainer(out))["privileged"] = true }},
			{"added capability", "adds capabilities", func(_, out map[string]any) {
				securityContextOf(firstContainer(out))["capabilities"] = map[string]any{"add": []any{"SYS_ADMIN"}}
			}},
			{"hostProcess", "hostProcess set", func(_, out map[string]any) {
				securityContextOf(out)["windowsOptions"] = map[string]any{"hostProcess": true}
				out["hostNetwork"] = true
			}},
			{"hostNetwork", "hostNetwork set", func(_, out map[string]any) { out["hostNetwork"] = true }},
			{"runAsNonRoot", "runAsNonRoot weakened", func(in, out map[string]any) {
				securityContextOf(in)["runAsNonRoot"] = true
				securityContextOf(out)["runAsNonRoot"] = false
			}},
		} {
			in, out := r.o.obj.DeepCopy(), r.stored.DeepCopy()
			inSpec, _ := jsonMap(in.Object, "spec")
			outSpec, _ := jsonMap(out.Object, "spec")
			tc.edit(inSpec, outSpec)
			got := widening(&propObject{kind: "Pod", obj: in}, out)
			if !slices.ContainsFunc(got, func(s string) bool { return strings.Contains(s, tc.want) }) {
				t.Errorf("%s added to the stored %v: reported %q, want a report of %q", tc.name, r.o, got, tc.want)
			}
		}
	})
	t.Run("only changes the tables allow are accepted", func(t *testing.T) {
		for _, c := range []policy.Change{
			{Action: policy.Strip, Path: "spec.containers[app].image"},
			{Action: policy.Strip, Path: "spec.securityContext.runAsNonRoot"},
			{Action: policy.Rewrite, Path: "spec.securityContext.runAsNonRoot", From: []byte("true"), To: []byte("false")},
			{Action: policy.Inject, Path: "spec.containers[app].securityContext.privileged", To: []byte("true")},
			{Action: policy.Inject, Path: "spec.hostNetwork", To: []byte("true")},
			{Action: policy.Rewrite, Path: "spec.containers[app].resources.limits[cpu]", From: []byte(`"1"`)},
		} {
			if disallowedChange("Pod", c, rows) == "" {
				t.Errorf("%s %s was accepted", c.Action, c.Path)
			}
		}
		if why := disallowedChange("Deployment", policy.Change{Action: policy.Inject, Path: "spec.tolerations", To: []byte("{}")}, rows); why == "" {
			t.Errorf("a toleration injected into a template was accepted")
		}
	})
	t.Run("oracle reports a change wincompat did not record", func(t *testing.T) {
		// As if wincompat had rewritten emptyDir.medium without recording it: the interpreter skips the
		// record, the expected object keeps Memory, the stored one does not.
		r := findResult(results, func(r *propResult) bool {
			return r.equal() && slices.ContainsFunc(r.changes, isMediumRewrite)
		})
		if r == nil {
			t.Skip("no admitted object with an emptyDir medium rewrite in this run")
		}
		diff, err := run.oracleDiff(ctx, r, nil, isMediumRewrite)
		if err != nil {
			t.Fatal(err)
		}
		if diff == "" || !strings.Contains(diff, "Memory") {
			t.Errorf("%v: an unrecorded emptyDir.medium rewrite went unnoticed; diff:\n%s", r.o, diff)
		}
	})
}

// generateChecked generates one object, turning a strip-table row the generator cannot set into an
// error that names it.
func generateChecked(seed uint64, i int, rows []policy.LinuxOnlyField) (o *propObject, err error) {
	defer func() {
		if v := recover(); v != nil {
			u, ok := v.(unknownRow)
			if !ok {
				panic(v)
			}
			err = fmt.Errorf("strip-table row %s (rejected if %s) has no value in the property generator: add a case to stripValueFor",
				u.f.Path(), u.f.RejectedIf)
		}
	}()
	return generateObject(seed, i, propNS, propRestrictedNS, rows)
}

func isMediumRewrite(c policy.Change) bool {
	return c.Action == policy.Rewrite && strings.HasSuffix(c.Path, ".emptyDir.medium")
}

func findResult(results []*propResult, ok func(*propResult) bool) *propResult {
	for _, r := range results {
		if ok(r) {
			return r
		}
	}
	return nil
}

// podEnv returns the containers of a Pod's JSON that have env vars.
func podEnv(u *unstructured.Unstructured) []map[string]any {
	var out []map[string]any
	spec, _ := u.Object["spec"].(map[string]any)
	items, _ := spec["containers"].([]any)
	for _, item := range items {
		c := item.(map[string]any)
		if env, _ := c["env"].([]any); len(env) > 0 {
			out = append(out, c)
		}
	}
	return out
}

// propRun holds the client the workers share.
type propRun struct {
	c    client.Client
	rows []policy.LinuxOnlyField
}

// check runs one object through (a), (b) and (c).
func (p *propRun) check(ctx context.Context, o *propObject) *propResult {
	r := &propResult{o: o}
	obj := o.obj.DeepCopy()
	if err := p.c.Create(ctx, obj); err != nil {
		r.admitErr = err
		return r
	}
	// The Create response is the stored object: the API server decodes it from the bytes it wrote to
	// etcd. Every readBackEvery-th object is also read back, and must be that response exactly.
	r.stored = obj
	if o.index%readBackEvery == 0 {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(o.obj.GroupVersionKind())
		if err := p.c.Get(ctx, client.ObjectKeyFromObject(obj), got); err != nil {
			r.oracle = fmt.Errorf("reading back: %w", err)
			return r
		}
		if d := gocmp.Diff(obj.Object, got.Object); d != "" {
			r.oracle = fmt.Errorf("the object read back differs from the Create response (-response +read):\n%s", d)
			return r
		}
	}
	r.widened = widening(o, r.stored)
	exp, changes, absent, err := expectedObject(o, r.stored, nil, nil)
	r.changes, r.absent = changes, absent
	for _, c := range changes {
		if why := disallowedChange(o.kind, c, p.rows); why != "" {
			r.disallow = append(r.disallow, fmt.Sprintf("%s %s (from %s, to %s): %s", c.Action, c.Path, c.From, c.To, why))
		}
	}
	if err != nil {
		r.oracle = err
		return r
	}
	got, err := p.dryRun(ctx, exp)
	if err != nil {
		r.oracle = fmt.Errorf("dry-run of the expected object in %s: %w", propOracleNS, err)
		return r
	}
	if r.diff = compareWithStored(o.kind, got, r.stored); r.diff != "" {
		r.expected = got
	}
	return r
}

// oracleDiff re-runs the oracle for an admitted object with a tampered expected object (edit) or with
// some recorded changes ignored (skip), for the tests of the oracle itself.
func (p *propRun) oracleDiff(ctx context.Context, r *propResult, edit func(root map[string]any), skip func(policy.Change) bool) (string, error) {
	exp, _, _, err := expectedObject(r.o, r.stored, edit, skip)
	if err != nil {
		return "", err
	}
	got, err := p.dryRun(ctx, exp)
	if err != nil {
		return "", err
	}
	return compareWithStored(r.o.kind, got, r.stored), nil
}

func (p *propRun) dryRun(ctx context.Context, exp *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	if err := p.c.Create(ctx, exp, client.DryRunAll); err != nil {
		return nil, err
	}
	return exp, nil
}

// podRoot is the pod-shaped part of obj that wincompat's change paths are relative to: the Pod itself,
// or the workload's pod template.
func podRoot(kind string, obj map[string]any) (map[string]any, error) {
	if kind == "Pod" {
		return obj, nil
	}
	return jsonMap(obj, e2eutil.TemplatePaths[kind]...)
}

// The annotations wincompat writes: on Pods, and on templates.
var (
	podOwnedAnnotations      = []string{policy.AnnotationChanges, policy.AnnotationVersion, policy.AnnotationBuild, policy.AnnotationBuildSource}
	templateOwnedAnnotations = []string{policy.AnnotationTemplateChanges}
)

// buildNumbers resolves the build names the generator puts into wincompat.io/build annotations.
var buildNumbers = map[string]string{"ltsc2019": "10.0.17763", "2022": "10.0.20348", "10.0.26100": "10.0.26100"}

// expectedObject is the input with the stored object's recorded changes applied and wincompat's own
// annotations copied, in the oracle namespace. edit and skip (both optional) tamper with it, for the
// tests of the oracle. It also returns the recorded changes and how many removals found nothing in the
// input (values the API server defaulted before wincompat saw them).
func expectedObject(o *propObject, stored *unstructured.Unstructured, edit func(map[string]any), skip func(policy.Change) bool) (*unstructured.Unstructured, []policy.Change, []string, error) {
	exp := o.obj.DeepCopy()
	exp.SetNamespace(propOracleNS)
	// An empty list is never stored as such: every list of the pod API is omitempty, so the API server's
	// serialization drops it, including the one it sends the webhook and applies the patch to. Validation
	// still sees a non-nil empty list (supplementalGroups: [] is rejected for Windows) when the object
	// goes through unpatched, as the expected object does.
	dropEmptyLists(exp.Object)
	root, err := podRoot(o.kind, exp.Object)
	if err != nil {
		return nil, nil, nil, err
	}
	storedRoot, err := podRoot(o.kind, stored.Object)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("stored object: %w", err)
	}
	storedAnn, _, _ := unstructured.NestedStringMap(storedRoot, "metadata", "annotations")
	owned, key := templateOwnedAnnotations, policy.AnnotationTemplateChanges
	if o.kind == "Pod" {
		owned, key = podOwnedAnnotations, policy.AnnotationChanges
		if storedAnn[policy.AnnotationVersion] == "" {
			return nil, nil, nil, fmt.Errorf("stored Pod has no %s annotation: wincompat did not see it", policy.AnnotationVersion)
		}
	}
	var changes []policy.Change
	if s, ok := storedAnn[key]; ok {
		if changes, err = policy.DecodeChanges(s); err != nil {
			return nil, nil, nil, fmt.Errorf("%s: %w", key, err)
		}
		for i := range changes {
			for j := i + 1; j < len(changes); j++ {
				if e2eutil.SameChange(changes[i], changes[j]) {
					return nil, changes, nil, fmt.Errorf("%s lists %+v twice", key, changes[i])
				}
			}
		}
	}
	var absent []string
	for _, ch := range changes {
		if skip != nil && skip(ch) {
			continue
		}
		found, err := applyChange(root, ch)
		if err != nil {
			return nil, changes, absent, fmt.Errorf("recorded change %s %s (from %s, to %s): %w", ch.Action, ch.Path, ch.From, ch.To, err)
		}
		if !found {
			absent = append(absent, ch.Field())
		}
	}

	// wincompat's own annotations. A build annotation the user wrote may only be replaced by the build
	// it names, or, when it names none, with a recorded warning.
	ann, _, _ := unstructured.NestedStringMap(root, "metadata", "annotations")
	if ann == nil {
		ann = map[string]string{}
	}
	for _, k := range owned {
		v, inStored := storedAnn[k]
		userValue, inInput := ann[k]
		switch {
		case !inStored:
		case !inInput:
			ann[k] = v
		case k == policy.AnnotationBuild && v != userValue:
			if buildNumbers[userValue] == v || slices.ContainsFunc(changes, func(c policy.Change) bool {
				return c.Action == policy.Warn && c.Path == "metadata.annotations["+policy.AnnotationBuild+"]"
			}) {
				ann[k] = v
			}
		}
	}
	if len(ann) > 0 {
		if err := unstructured.SetNestedStringMap(root, ann, "metadata", "annotations"); err != nil {
			return nil, changes, absent, err
		}
	}
	// And its label (issue 41), on every Pod it admits, never recorded.
	if o.kind == "Pod" {
		storedLabels, _, _ := unstructured.NestedStringMap(storedRoot, "metadata", "labels")
		if storedLabels[policy.LabelOS] != string(corev1.Windows) {
			return nil, changes, absent, fmt.Errorf("stored Pod is not labelled %s=windows: the leader would not watch it", policy.LabelOS)
		}
		labels, _, _ := unstructured.NestedStringMap(root, "metadata", "labels")
		if labels == nil {
			labels = map[string]string{}
		}
		labels[policy.LabelOS] = string(corev1.Windows)
		if err := unstructured.SetNestedStringMap(root, labels, "metadata", "labels"); err != nil {
			return nil, changes, absent, err
		}
	}
	if edit != nil {
		edit(root)
	}
	return exp, changes, absent, nil
}

// dropEmptyLists removes every empty list from a JSON object, in place.
func dropEmptyLists(v any) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if l, ok := e.([]any); ok && len(l) == 0 {
				delete(x, k)
				continue
			}
			dropEmptyLists(e)
		}
	case []any:
		for _, e := range x {
			dropEmptyLists(e)
		}
	}
}

// pathSeg is one step of a Change path: a member, optionally with a bracketed name selecting a list
// element by its name (by mountPath for volumeMounts) or a map key.
type pathSeg struct {
	member, key string
	keyed       bool
}

func parseChangePath(p string) ([]pathSeg, error) {
	var segs []pathSeg
	rest := p
	for {
		i := strings.IndexAny(rest, ".[")
		if i < 0 {
			if rest == "" {
				return nil, fmt.Errorf("path %q: empty member", p)
			}
			return append(segs, pathSeg{member: rest}), nil
		}
		seg := pathSeg{member: rest[:i]}
		if seg.member == "" {
			return nil, fmt.Errorf("path %q: empty member", p)
		}
		rest = rest[i:]
		if rest[0] == '[' {
			end := strings.IndexByte(rest, ']')
			if end < 0 {
				return nil, fmt.Errorf("path %q: unclosed [", p)
			}
			seg.key, seg.keyed = rest[1:end], true
			rest = rest[end+1:]
		}
		segs = append(segs, seg)
		if rest == "" {
			return segs, nil
		}
		if rest[0] != '.' || len(rest) == 1 {
			return nil, fmt.Errorf("path %q: expected a member after ]", p)
		}
		rest = rest[1:]
	}
}

// errAbsent says a path leads through something the object does not have.
var errAbsent = errors.New("absent")

// elementKey is the member that names the elements of a list in change paths (policy/strip.go,
// policy/rewrite.go): volumeMounts by mountPath, containers and volumes by name.
func elementKey(list string) string {
	if list == "volumeMounts" {
		return "mountPath"
	}
	return "name"
}

// locate returns the object holding the path's last member, and that member's name. With create, maps
// missing on the way are made (never list elements).
func locate(root map[string]any, segs []pathSeg, create bool) (map[string]any, string, error) {
	cur := root
	step := func(m map[string]any, member string) (map[string]any, error) {
		switch v := m[member].(type) {
		case map[string]any:
			return v, nil
		case nil:
			if !create {
				return nil, errAbsent
			}
			n := map[string]any{}
			m[member] = n
			return n, nil
		default:
			return nil, fmt.Errorf("%s is %T, not an object", member, v)
		}
	}
	for i, s := range segs {
		last := i == len(segs)-1
		if !s.keyed {
			if last {
				return cur, s.member, nil
			}
			next, err := step(cur, s.member)
			if err != nil {
				return nil, "", err
			}
			cur = next
			continue
		}
		if list, ok := cur[s.member].([]any); ok {
			if last {
				return nil, "", fmt.Errorf("%s[%s] names a list element, not a field", s.member, s.key)
			}
			var found map[string]any
			for _, item := range list {
				if m, ok := item.(map[string]any); ok && m[elementKey(s.member)] == s.key {
					found = m
				}
			}
			if found == nil {
				return nil, "", fmt.Errorf("no element of %s with %s %q", s.member, elementKey(s.member), s.key)
			}
			cur = found
			continue
		}
		m, err := step(cur, s.member)
		if err != nil {
			return nil, "", err
		}
		if last {
			return m, s.key, nil
		}
		if cur, err = step(m, s.key); err != nil {
			return nil, "", err
		}
	}
	return nil, "", errors.New("empty path")
}

// applyChange applies one recorded change to root: strip, and rewrite without a `to`, remove the path;
// rewrite and inject set `to` there; inject of spec.tolerations appends; warn changes nothing. It checks
// the record against the input: a removed or rewritten value must be what `from` says (the input may
// omit members the API server defaults), an injected one must not be there yet. found is false when a
// removal found nothing in the input.
func applyChange(root map[string]any, c policy.Change) (found bool, err error) {
	if c.Action == policy.Warn {
		return true, nil
	}
	segs, err := parseChangePath(c.Path)
	if err != nil {
		return false, err
	}
	var to any
	if len(c.To) > 0 {
		if err := utiljson.Unmarshal(c.To, &to); err != nil {
			return false, fmt.Errorf("to: %w", err)
		}
	}
	var from any
	if len(c.From) > 0 {
		if err := utiljson.Unmarshal(c.From, &from); err != nil {
			return false, fmt.Errorf("from: %w", err)
		}
	}
	remove := c.Action == policy.Strip || (c.Action == policy.Rewrite && len(c.To) == 0)
	parent, member, err := locate(root, segs, !remove)
	if remove {
		if errors.Is(err, errAbsent) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		cur, ok := parent[member]
		if !ok {
			return false, nil
		}
		if len(c.From) > 0 && !covers(from, cur) {
			return false, fmt.Errorf("records %s, the input has %v", c.From, cur)
		}
		delete(parent, member)
		return true, nil
	}
	if err != nil {
		return false, err
	}
	cur, exists := parent[member]
	switch c.Action {
	case policy.Inject:
		if c.Path == "spec.tolerations" {
			list, _ := cur.([]any)
			parent[member] = append(list, to)
			return true, nil
		}
		if c.Path == "metadata.labels" || c.Path == "metadata.annotations" {
			// The injector opt-outs: members merged into the map, none of which the input has.
			add, ok := to.(map[string]any)
			if !ok {
				return false, fmt.Errorf("injects %T into %s, want members", to, c.Path)
			}
			m, _ := cur.(map[string]any)
			if m == nil {
				m = map[string]any{}
			}
			for k, v := range add {
				if _, has := m[k]; has {
					return false, fmt.Errorf("injects %s, which the input already has", k)
				}
				m[k] = v
			}
			parent[member] = m
			return true, nil
		}
		if exists {
			return false, fmt.Errorf("injects a member the input already has: %v", cur)
		}
	case policy.Rewrite:
		if !exists {
			return false, fmt.Errorf("rewrites a member the input does not have")
		}
		if len(c.From) > 0 && !covers(from, cur) {
			return false, fmt.Errorf("records %s, the input has %v", c.From, cur)
		}
	default:
		return false, fmt.Errorf("unknown action %q", c.Action)
	}
	parent[member] = to
	return true, nil
}

// covers reports whether a recorded value is the input's value, allowing members the input left for
// the API server to default.
func covers(rec, in any) bool {
	switch iv := in.(type) {
	case map[string]any:
		rm, ok := rec.(map[string]any)
		if !ok {
			return false
		}
		for k, v := range iv {
			if !covers(rm[k], v) {
				return false
			}
		}
		return true
	case []any:
		rl, ok := rec.([]any)
		if !ok {
			return len(iv) == 0 && rec == nil
		}
		if len(rl) != len(iv) {
			return false
		}
		for i := range iv {
			if !covers(rl[i], iv[i]) {
				return false
			}
		}
		return true
	case int64:
		return number(rec) == float64(iv)
	case float64:
		return number(rec) == iv
	default:
		return rec == in
	}
}

func number(v any) float64 {
	switch n := v.(type) {
	case int64:
		return float64(n)
	case float64:
		return n
	}
	return -1e308
}

// compareWithStored diffs the dry-run expected object against the stored one, ignoring only what the
// API server sets per object: uid (and the Job selector labels derived from it), resourceVersion,
// creationTimestamp, generation, managedFields, the namespace, the random suffix of the ServiceAccount
// token volume (kube-api-access-xxxxx), and the order of a Pod's tolerations (DefaultTolerationSeconds
// appends its own before the webhook on the stored pod, after the recorded injection on the expected
// one; tolerations are a set).
func compareWithStored(kind string, expected, stored *unstructured.Unstructured) string {
	e, s := normalizeStored(kind, expected.Object), normalizeStored(kind, stored.Object)
	if reflect.DeepEqual(e, s) {
		return ""
	}
	return gocmp.Diff(e, s)
}

// diffPaths lists where expected and stored differ, list indices as [*]: the signature by which the
// report groups unequal objects.
func diffPaths(kind string, expected, stored map[string]any) []string {
	var r pathReporter
	gocmp.Equal(normalizeStored(kind, expected), normalizeStored(kind, stored), gocmp.Reporter(&r))
	slices.Sort(r.diffs)
	return slices.Compact(r.diffs)
}

// pathReporter is a go-cmp reporter that records the path of every difference.
type pathReporter struct {
	path  gocmp.Path
	diffs []string
}

func (r *pathReporter) PushStep(ps gocmp.PathStep) { r.path = append(r.path, ps) }

func (r *pathReporter) PopStep() { r.path = r.path[:len(r.path)-1] }

func (r *pathReporter) Report(rs gocmp.Result) {
	if rs.Equal() {
		return
	}
	var b strings.Builder
	for _, step := range r.path {
		switch s := step.(type) {
		case gocmp.MapIndex:
			fmt.Fprintf(&b, ".%v", s.Key())
		case gocmp.SliceIndex:
			b.WriteString("[*]")
		}
	}
	r.diffs = append(r.diffs, strings.TrimPrefix(b.String(), "."))
}

func normalizeStored(kind string, obj map[string]any) map[string]any {
	o := runtime.DeepCopyJSON(obj)
	md, _ := o["metadata"].(map[string]any)
	uid, _ := md["uid"].(string)
	for _, k := range []string{"uid", "resourceVersion", "creationTimestamp", "generation", "managedFields", "namespace", "selfLink"} {
		delete(md, k)
	}
	var walk func(v any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				x[k] = walk(e)
			}
		case []any:
			for i, e := range x {
				x[i] = walk(e)
			}
		case string:
			if uid != "" && x == uid {
				return "<uid>"
			}
			if strings.HasPrefix(x, "kube-api-access-") {
				return "kube-api-access-<random>"
			}
		}
		return v
	}
	walk(o)
	if kind == "Pod" {
		if spec, ok := o["spec"].(map[string]any); ok {
			if tols, ok := spec["tolerations"].([]any); ok {
				slices.SortStableFunc(tols, func(a, b any) int { return cmp.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
			}
		}
	}
	return o
}

// widening checks (c) on the pod spec (or template spec) of the stored object against the input's.
func widening(o *propObject, stored *unstructured.Unstructured) []string {
	in, err := typedPodSpec(o.kind, o.obj.Object)
	if err != nil {
		return []string{"input: " + err.Error()}
	}
	out, err := typedPodSpec(o.kind, stored.Object)
	if err != nil {
		return []string{"stored: " + err.Error()}
	}
	var bad []string
	add := func(format string, args ...any) { bad = append(bad, fmt.Sprintf(format, args...)) }
	hostProcessIn, hostProcessOut := hostProcessOf(in), hostProcessOf(out)
	if hostProcessOut && !hostProcessIn {
		add("hostProcess set, the input had none")
	}
	if hostProcessIn && (!hostProcessOut || !out.HostNetwork) {
		add("a hostProcess pod lost hostProcess (%v) or hostNetwork (%v)", hostProcessOut, out.HostNetwork)
	}
	if out.HostNetwork && !in.HostNetwork {
		add("hostNetwork set, the input had none")
	}
	if out.HostPID || out.HostIPC {
		add("hostPID %v, hostIPC %v", out.HostPID, out.HostIPC)
	}
	podNonRoot := func(s *corev1.PodSpec) *bool {
		if s.SecurityContext == nil {
			return nil
		}
		return s.SecurityContext.RunAsNonRoot
	}
	if v := podNonRoot(in); v != nil && *v {
		if w := podNonRoot(out); w == nil || !*w {
			add("spec.securityContext.runAsNonRoot weakened from true to %v", ptrString(w))
		}
	}
	podUser := func(s *corev1.PodSpec) *string {
		if s.SecurityContext == nil || s.SecurityContext.WindowsOptions == nil {
			return nil
		}
		return s.SecurityContext.WindowsOptions.RunAsUserName
	}
	userChanged := func(where string, a, b *string) {
		if ptrString(a) != ptrString(b) && (a != nil || *b != "ContainerUser") {
			add("%s runAsUserName changed from %s to %s", where, ptrString(a), ptrString(b))
		}
	}
	userChanged("spec.securityContext.windowsOptions", podUser(in), podUser(out))
	inContainers := map[string]corev1.Container{}
	for _, c := range slices.Concat(in.InitContainers, in.Containers) {
		inContainers[c.Name] = c
	}
	for _, c := range slices.Concat(out.InitContainers, out.Containers) {
		sc := c.SecurityContext
		if sc == nil {
			sc = &corev1.SecurityContext{}
		}
		if sc.Privileged != nil && *sc.Privileged {
			add("container %s is privileged", c.Name)
		}
		if sc.AllowPrivilegeEscalation != nil && *sc.AllowPrivilegeEscalation {
			add("container %s allows privilege escalation", c.Name)
		}
		if sc.Capabilities != nil && len(sc.Capabilities.Add) > 0 {
			add("container %s adds capabilities %v", c.Name, sc.Capabilities.Add)
		}
		ic, ok := inContainers[c.Name]
		if !ok {
			add("container %s is not in the input", c.Name)
			continue
		}
		isc := ic.SecurityContext
		if isc == nil {
			isc = &corev1.SecurityContext{}
		}
		if effectiveNonRoot(isc, in) && !effectiveNonRoot(sc, out) {
			add("container %s: effective runAsNonRoot weakened from true", c.Name)
		}
		var inUser, outUser *string
		if isc.WindowsOptions != nil {
			inUser = isc.WindowsOptions.RunAsUserName
		}
		if sc.WindowsOptions != nil {
			outUser = sc.WindowsOptions.RunAsUserName
		}
		userChanged("container "+c.Name, inUser, outUser)
	}
	return bad
}

func effectiveNonRoot(sc *corev1.SecurityContext, spec *corev1.PodSpec) bool {
	if sc.RunAsNonRoot != nil {
		return *sc.RunAsNonRoot
	}
	return spec.SecurityContext != nil && spec.SecurityContext.RunAsNonRoot != nil && *spec.SecurityContext.RunAsNonRoot
}

func hostProcessOf(s *corev1.PodSpec) bool {
	set := func(wo *corev1.WindowsSecurityContextOptions) bool {
		return wo != nil && wo.HostProcess != nil && *wo.HostProcess
	}
	if s.SecurityContext != nil && set(s.SecurityContext.WindowsOptions) {
		return true
	}
	for _, c := range slices.Concat(s.InitContainers, s.Containers) {
		if c.SecurityContext != nil && set(c.SecurityContext.WindowsOptions) {
			return true
		}
	}
	return false
}

func ptrString[T any](p *T) string {
	if p == nil {
		return "<unset>"
	}
	return fmt.Sprint(*p)
}

func typedPodSpec(kind string, obj map[string]any) (*corev1.PodSpec, error) {
	m, err := jsonMap(obj, e2eutil.PodSpecPath(kind)...)
	if err != nil {
		return nil, err
	}
	var spec corev1.PodSpec
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &spec); err != nil {
		return nil, err
	}
	return &spec, nil
}

// propReport renders the summary: per kind and namespace, per action, and how often each strip-table
// row was exercised.
func propReport(results []*propResult, rows []policy.LinuxOnlyField) string {
	type row struct{ generated, admitted, equal, widened, changed int }
	byKind := map[string]*row{}
	var total row
	actions := map[policy.Action]int{}
	fields := map[string]int{}
	absent := map[string]int{}
	for _, r := range results {
		key := r.o.kind
		if r.o.restricted {
			key += " (restricted)"
		}
		k := byKind[key]
		if k == nil {
			k = &row{}
			byKind[key] = k
		}
		for _, x := range []*row{k, &total} {
			x.generated++
			if r.admitErr == nil {
				x.admitted++
			}
			if r.equal() {
				x.equal++
			}
			if len(r.widened) > 0 {
				x.widened++
			}
			if len(r.changes) > 0 {
				x.changed++
			}
		}
		for _, c := range r.changes {
			actions[c.Action]++
			fields[string(c.Action)+" "+c.Field()]++
		}
		for _, f := range r.absent {
			absent[f]++
		}
	}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "kind\tgenerated\tadmitted\tequal\twith changes\twidened\t")
	for _, k := range slices.Sorted(maps.Keys(byKind)) {
		x := byKind[k]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t\n", k, x.generated, x.admitted, x.equal, x.changed, x.widened)
	}
	fmt.Fprintf(tw, "total\t%d\t%d\t%d\t%d\t%d\t\n", total.generated, total.admitted, total.equal, total.changed, total.widened)
	tw.Flush()
	fmt.Fprintf(&b, "\nchanges recorded: ")
	for _, a := range []policy.Action{policy.Strip, policy.Rewrite, policy.Inject, policy.Warn} {
		fmt.Fprintf(&b, "%s %d, ", a, actions[a])
	}
	b.WriteString("\nrecorded removals of values the input did not have (the API server defaulted them):")
	for _, f := range slices.Sorted(maps.Keys(absent)) {
		fmt.Fprintf(&b, " %s %d;", f, absent[f])
	}
	b.WriteString("\n\n")

	// Strip-table coverage, by where the row lives.
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "strip-table row\tpod\tcontainers\tinitContainers\t")
	for _, f := range rows {
		if f.Level == policy.ContainerSecurityContextLevel {
			fmt.Fprintf(tw, "%s\t\t%d\t%d\t\n", f.Path(), fields["strip spec.containers[*].securityContext."+f.Name], fields["strip spec.initContainers[*].securityContext."+f.Name])
		} else {
			fmt.Fprintf(tw, "%s\t%d\t\t\t\n", f.Path(), fields["strip "+f.Path()])
		}
	}
	tw.Flush()
	b.WriteString("\nother changes:\n")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	for _, f := range slices.Sorted(maps.Keys(fields)) {
		if !strings.HasPrefix(f, "strip ") {
			fmt.Fprintf(tw, "%s\t%d\t\n", f, fields[f])
		}
	}
	tw.Flush()
	return b.String()
}

// propFailures reports every object that broke a property, the first ones in full.
func propFailures(t *testing.T, cfg propConfig, results []*propResult) {
	t.Helper()
	const detailed = 10
	var rejected, unequal, oracle, disallowed, widened int
	for _, r := range results {
		replay := cfg.replay(r.o.index)
		switch {
		case r.admitErr != nil:
			rejected++
			if rejected <= detailed {
				t.Errorf("(a) %v not admitted (replay: %s): %v\ninput:\n%s", r.o, replay, r.admitErr, asJSON(r.o.obj.Object))
			}
		case r.oracle != nil:
			oracle++
			if oracle <= detailed {
				t.Errorf("(b) %v: no expected object (replay: %s): %v\ninput:\n%s\nstored:\n%s", r.o, replay, r.oracle, asJSON(r.o.obj.Object), asJSON(r.stored.Object))
			}
		case r.diff != "":
			unequal++
			if unequal <= detailed {
				t.Errorf("(b) %v: stored object is not the input minus the recorded changes (replay: %s); -expected +stored:\n%s\nchanges: %s\ninput:\n%s",
					r.o, replay, r.diff, policy.EncodeChanges(r.changes), asJSON(r.o.obj.Object))
			}
		}
		if len(r.disallow) > 0 {
			disallowed++
			if disallowed <= detailed {
				t.Errorf("(b) %v records changes the tables do not allow (replay: %s): %s", r.o, replay, strings.Join(r.disallow, "; "))
			}
		}
		if len(r.widened) > 0 {
			widened++
			if widened <= detailed {
				t.Errorf("(c) %v widened (replay: %s): %s", r.o, replay, strings.Join(r.widened, "; "))
			}
		}
	}
	if unequal > 0 {
		groups := map[string][]int{}
		for _, r := range results {
			if r.admitErr == nil && r.oracle == nil && r.diff != "" {
				key := strings.Join(diffPaths(r.o.kind, r.expected.Object, r.stored.Object), ", ")
				groups[key] = append(groups[key], r.o.index)
			}
		}
		var b strings.Builder
		for _, k := range slices.Sorted(maps.Keys(groups)) {
			ids := groups[k]
			fmt.Fprintf(&b, "\n  %d objects differ at %s (e.g. #%v)", len(ids), k, ids[:min(len(ids), 5)])
		}
		t.Errorf("objects not equal to the input minus the recorded changes, by where they differ:%s", b.String())
	}
	if n := rejected + unequal + oracle + disallowed + widened; n > 0 {
		t.Errorf("of %d objects: %d not admitted, %d without an expected object, %d not equal to the input minus the recorded changes, %d with changes the tables do not allow, %d widened (the first %d of each shown)",
			len(results), rejected, oracle, unequal, disallowed, widened, detailed)
	}
}

// propCoverage fails when a large run did not exercise every strip-table row where it can occur: a
// generator that stops setting a field would otherwise leave the property vacuously true for it.
func propCoverage(t *testing.T, results []*propResult, rows []policy.LinuxOnlyField) {
	t.Helper()
	seen := map[string]bool{}
	for _, r := range results {
		for _, c := range r.changes {
			seen[string(c.Action)+" "+c.Field()] = true
		}
	}
	var want []string
	for _, f := range rows {
		if f.Level == policy.ContainerSecurityContextLevel {
			want = append(want, "strip spec.containers[*].securityContext."+f.Name, "strip spec.initContainers[*].securityContext."+f.Name)
		} else {
			want = append(want, "strip "+f.Path())
		}
	}
	want = append(want,
		"rewrite spec.volumes[*].emptyDir.medium", "rewrite spec.dnsPolicy",
		"rewrite spec.containers[*].volumeMounts[*].mountPropagation", "rewrite spec.containers[*].resources.limits[*]",
		"rewrite metadata.annotations[*]", "rewrite spec.nodeSelector[kubernetes.io/os]",
		"inject spec.tolerations", "inject spec.runtimeClassName", "inject spec.nodeSelector[kubernetes.io/os]",
		"inject spec.securityContext.runAsNonRoot", "inject spec.securityContext.windowsOptions.runAsUserName",
		"warn spec.hostNetwork", "warn spec.containers[*].volumeDevices")
	for _, w := range want {
		if !seen[w] {
			t.Errorf("no object of this run exercised %q: the generator no longer covers it", w)
		}
	}
}

func asJSON(obj map[string]any) string {
	u := &unstructured.Unstructured{Object: obj}
	b, err := u.MarshalJSON()
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// propRegression is an input on which the property failed, kept as a fixed case.
type propRegression struct {
	name string
	why  string
	obj  *unstructured.Unstructured
}

func propRegressions() []propRegression {
	u := func(obj map[string]any) *unstructured.Unstructured { return &unstructured.Unstructured{Object: obj} }
	container := func(image string) []any { return []any{map[string]any{"name": "app", "image": image}} }
	return []propRegression{
		{
			name: "build annotation replaced silently by the nodeSelector's build",
			why: "wincompat.io/build: ltsc2025 on the pod, nodeSelector node.kubernetes.io/windows-build: 10.0.17763: " +
				"chooseBuild takes the nodeSelector (source nodeSelector) and overwrites the annotation with 10.0.17763, " +
				"recording no change and no warning; the build annotation comes first (policy/build_source.go)",
			obj: u(map[string]any{
				"apiVersion": "v1", "kind": "Pod",
				"metadata": map[string]any{"name": "regression-build-pin", "namespace": propNS,
					"annotations": map[string]any{policy.AnnotationBuild: "ltsc2025"}},
				"spec": map[string]any{
					"os":           map[string]any{"name": "windows"},
					"nodeSelector": map[string]any{corev1.LabelWindowsBuild: "10.0.17763"},
					"containers":   container("mcr.microsoft.com/windows/servercore:ltsc2019"),
				},
			}),
		},
		{
			name: "build annotation replaced silently by the RuntimeClass's build",
			why: "wincompat.io/build: 2022 on the pod, runtimeClassName windows-2019: chooseBuild takes the class's build " +
				"(source runtimeClass) and overwrites the annotation with 10.0.17763, recording nothing",
			obj: u(map[string]any{
				"apiVersion": "v1", "kind": "Pod",
				"metadata": map[string]any{"name": "regression-build-class", "namespace": propNS,
					"annotations": map[string]any{policy.AnnotationBuild: "2022"}},
				"spec": map[string]any{
					"os":               map[string]any{"name": "windows"},
					"runtimeClassName": "windows-2019",
					"containers":       container("example.com/shop/web:1.4.2"),
				},
			}),
		},
		{
			name: "empty supplementalGroups on an otherwise clean template",
			why: "supplementalGroups: [] is rejected for Windows (validateWindows tests != nil) but never reaches " +
				"wincompat: the API server serializes the object for the webhook with omitempty",
			obj: u(map[string]any{
				"apiVersion": "apps/v1", "kind": "Deployment",
				"metadata": map[string]any{"name": "regression-empty-groups", "namespace": propNS},
				"spec": map[string]any{
					"selector": map[string]any{"matchLabels": map[string]any{"app": "regression-empty-groups"}},
					"template": map[string]any{
						"metadata": map[string]any{"labels": map[string]any{"app": "regression-empty-groups"}},
						"spec": map[string]any{
							"os":              map[string]any{"name": "windows"},
							"securityContext": map[string]any{"supplementalGroups": []any{}},
							"containers":      container("mcr.microsoft.com/windows/servercore:ltsc2022"),
						},
					},
				},
			}),
		},
		{
			// Admitted: a Pod always gets a patch (wincompat.io/version), and the API server's decoding of the
			// patched object drops the empty list. Kept beside the template case, which fails.
			name: "empty supplementalGroups on an otherwise clean pod",
			why:  "as for the template, but a Pod always gets a patch (wincompat.io/version), which drops the empty list",
			obj: u(map[string]any{
				"apiVersion": "v1", "kind": "Pod",
				"metadata": map[string]any{"name": "regression-empty-groups", "namespace": propNS},
				"spec": map[string]any{
					"os":              map[string]any{"name": "windows"},
					"securityContext": map[string]any{"supplementalGroups": []any{}},
					"containers":      container("mcr.microsoft.com/windows/servercore:ltsc2022"),
				},
			}),
		},
	}
}

// errorsOnly passes a logger's errors and drops its info lines.
type errorsOnly struct{ logr.LogSink }

func (s errorsOnly) Enabled(int) bool { return false }

func (s errorsOnly) WithValues(kv ...any) logr.LogSink {
	return errorsOnly{s.LogSink.WithValues(kv...)}
}

func (s errorsOnly) WithName(name string) logr.LogSink { return errorsOnly{s.LogSink.WithName(name)} }

// securityContextOf returns the securityContext object of a pod spec's or a container's JSON, made if
// missing.
func securityContextOf(m map[string]any) map[string]any {
	sc, _ := m["securityContext"].(map[string]any)
	if sc == nil {
		sc = map[string]any{}
		m["securityContext"] = sc
	}
	return sc
}

func mustPodSpec(t *testing.T, o *propObject) *corev1.PodSpec {
	t.Helper()
	spec, err := typedPodSpec(o.kind, o.obj.Object)
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

func firstContainer(spec map[string]any) map[string]any {
	return spec["containers"].([]any)[0].(map[string]any)
}

// injectorOptOutsOnly says why members injected into labels (or annotations) are not exactly opt-outs of
// Linux-only injectors in the form each reads, as policy/README.md publishes them ("" when they are).
func injectorOptOutsOnly(labels bool, raw []byte) string {
	var members map[string]string
	if err := utiljson.Unmarshal(raw, &members); err != nil {
		return "injects something other than string members: " + err.Error()
	}
	for k, v := range members {
		i := slices.IndexFunc(policy.Injectors(), func(in policy.Injector) bool { return in.Key == k })
		if i < 0 {
			return "injects " + k + ", which is no injector's opt-out"
		}
		if in := policy.Injectors()[i]; in.Value != v || in.Label != labels {
			return fmt.Sprintf("injects %s=%s, not %s's opt-out %q in the form it reads", k, v, in.Name, in.Value)
		}
	}
	return ""
}

// disallowedChange says why a recorded change is not one the tables allow ("" when it is): strips
// only of strip-table rows; rewrites and injections only of the fields and to the values the tables name;
// templates get only the strip table, the removal of mount propagation, the non-root user and spec.os.
func disallowedChange(kind string, c policy.Change, rows []policy.LinuxOnlyField) string {
	field := strings.Replace(c.Field(), "spec.initContainers[*]", "spec.containers[*]", 1)
	to := string(c.To)
	key := ""
	if i := strings.LastIndexByte(c.Path, '['); i >= 0 && strings.HasSuffix(c.Path, "]") {
		key = c.Path[i+1 : len(c.Path)-1]
	}
	template := kind != "Pod"
	switch c.Action {
	case policy.Warn:
		return ""
	case policy.Strip:
		for _, f := range rows {
			path := f.Path()
			if f.Level == policy.ContainerSecurityContextLevel {
				path = "spec.containers[*].securityContext." + f.Name
			}
			if field == path {
				return ""
			}
		}
		return "not a row of the strip table"
	case policy.Rewrite:
		switch {
		case field == "spec.containers[*].volumeMounts[*].mountPropagation" && to == "":
			return ""
		case template:
		case field == "spec.volumes[*].emptyDir.medium" && string(c.From) == `"Memory"` && to == `""`,
			field == "spec.dnsPolicy" && string(c.From) == `"ClusterFirstWithHostNet"` && to == `"ClusterFirst"`,
			(field == "spec.containers[*].resources.limits[*]" || field == "spec.containers[*].resources.requests[*]") &&
				strings.HasPrefix(key, corev1.ResourceHugePagesPrefix) && to == "",
			field == "metadata.annotations[*]" && to == "" && (key == "seccomp.security.alpha.kubernetes.io/pod" ||
				strings.HasPrefix(key, "container.seccomp.security.alpha.kubernetes.io/") ||
				strings.HasPrefix(key, "container.apparmor.security.beta.kubernetes.io/")),
			field == "spec.nodeSelector[kubernetes.io/os]" && to == `"windows"`,
			(field == "spec.securityContext.runAsNonRoot" || field == "spec.containers[*].securityContext.runAsNonRoot") &&
				string(c.From) == "false" && to == "true":
			return ""
		}
		return "not a rewrite the tables name, or not to the value it names"
	case policy.Inject:
		if field == "metadata.labels" || field == "metadata.annotations" {
			return injectorOptOutsOnly(field == "metadata.labels", c.To)
		}
		switch {
		case field == "spec.os.name" && to == `"windows"`,
			strings.HasSuffix(field, "securityContext.windowsOptions.runAsUserName") && to == `"ContainerUser"`:
			return ""
		case template:
		case field == "spec.nodeSelector[kubernetes.io/os]" && to == `"windows"`,
			field == "spec.nodeSelector[node.kubernetes.io/windows-build]", field == "spec.nodeSelector[kubernetes.io/arch]",
			field == "spec.tolerations", field == "spec.runtimeClassName",
			field == "spec.securityContext.runAsNonRoot" && to == "true":
			return ""
		}
		return "not an injection the tables name, or not of the value it names"
	}
	return "unknown action"
}
