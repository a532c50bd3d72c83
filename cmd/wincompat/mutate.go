package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/webhook/manifest"
	"github.com/wincompat/wincompat/webhook/scheduling/registry"
	"github.com/wincompat/wincompat/webhook/termsafe"
)

const mutateUsage = `Usage: wincompat mutate [-f FILE|DIR|-]... [-R] [flags]

Reads multi-document YAML, rewrites every Windows Pod and workload template exactly as the admission
webhook would in a namespace with the given labels, and prints the stream: changed objects re-rendered
(comments kept), everything else byte for byte. Warnings go to stderr. With no -f, reads stdin. As with
kubectl's -f, a directory gives its own *.yaml, *.yml and *.json files in lexical order, and its
subdirectories only with -R.

-o json prints the objects as JSON instead, as kubectl apply -o json does: one object alone, several
(from every file) in a v1 List, so that the output is one document for kubectl apply -f - or jq.

A KRM function: when stdin is a config.kubernetes.io/v1 ResourceList (kustomize's exec transformers,
kpt), it returns the list with its Pods and workloads mutated, every other item untouched, and a result
per warning. Its functionConfig may be a wincompat.io/v1alpha1 Policy, or a ConfigMap whose data gives
namespace, namespace-labels, namespace-annotations (k=v,...) and policy. See deploy/examples/kustomize.

A Helm post-renderer:
  helm template my-release chart/ --post-renderer wincompat --post-renderer-args mutate
  helm install  my-release chart/ --post-renderer wincompat --post-renderer-args mutate
In Helm 4, --post-renderer names a plugin: helm plugin install deploy/helm-plugin, then
--post-renderer wincompat. Helm 3 does not post-render hooks (a pre-install Job comes out unchanged: the
webhook rewrites it at admission, or pipe helm template into wincompat mutate; Helm 4 does), and shows a
post-renderer's stderr only when it fails (Helm 4 never): to see the warnings, run
helm template ... | wincompat mutate > /dev/null. kustomize drops a KRM
function's results when it succeeds: kustomize fn run DIR --enable-exec --dry-run --results-dir DIR2
writes them. See webhook/manifest/README.md.

For review: --explain (or -o explain) prints every change of every Pod and workload with its
reason and where the rule comes from (a strip-table row, a policy key, the build's source, or the
document a readiness check is from); -o diff prints a unified diff of each changed object, for a
CI job to show what a chart would get.

With --resolve-images, a Pod's Windows build comes from each image's registry (its index's os.version
entries, or the image config's), as in the cluster; without it, from tags, annotations and the policy.
Workload templates get no build (their pods get one when they are created), but their images are read too,
so that a Deployment whose image has no Windows entry is warned about when Helm post-renders it.

Exit status: 0 on success; 1 when a document is invalid (nothing is printed then, and every bad document
is named on stderr by source and index, e.g. "chart.yaml#3 Deployment demo/web: ..."); 2 on usage errors.

Flags:
`

// cliCloudsUsage is --image-cloud-credentials of mutate and audit.
const cliCloudsUsage = "with --resolve-images: the clouds whose registries are read with your identity there when your docker config has no login\nfor them, comma-separated from acr, ecr, gar; empty for none"

// cliImageFlags are the registry flags of mutate and audit.
type cliImageFlags struct {
	clouds               string
	allowPrivateNetworks bool
}

// addImageFlags defines them with the command's defaults. mutate reads the user's own references, so
// it lends them the user's cloud identities and networks, as ko and crane do; audit reads references
// any pod author in the cluster chose, so it lends them neither unless asked.
func addImageFlags(fl *pflag.FlagSet, defaults cliImageFlags, cloudsUsage, privateUsage string) *cliImageFlags {
	f := &cliImageFlags{}
	fl.StringVar(&f.clouds, "image-cloud-credentials", defaults.clouds, cloudsUsage)
	fl.BoolVar(&f.allowPrivateNetworks, "image-allow-private-networks", defaults.allowPrivateNetworks, privateUsage)
	return f
}

// newCLIResolver is the image resolver of mutate and audit, which wait for registries up to wait.
func newCLIResolver(wait time.Duration, f cliImageFlags) (*registry.Resolver, error) {
	cloudList, err := registry.ParseClouds(f.clouds)
	if err != nil {
		return nil, fmt.Errorf("--image-cloud-credentials: %w", err)
	}
	return registry.New(registry.Config{
		Timeout:           wait,
		BackgroundTimeout: wait,
		Keychain:          authn.DefaultKeychain,
		CloudCredentials:  cloudList,
		CloudHint:         "sign in to %s where wincompat runs, see --image-cloud-credentials",
		// The server's bound keeps tenants from piling up lookups; here every lookup is the user's
		// own, and an audit asks a whole page's images at once: none may be refused.
		MaxLookups: math.MaxInt,
		// Link-local and metadata addresses stay refused either way, and plain HTTP is still for
		// loopback only.
		AllowPrivateNetworks: f.allowPrivateNetworks,
		// authn.DefaultKeychain reads the user's docker config, not the chart's pull secret.
		UnauthorizedHint: "log in with docker login or crane auth login",
		// The user named the hosts and runs on their own network: the cause is theirs to see, and
		// there is no server log to send them to.
		ShowCauses: true,
	})
}

// waitingResolver answers a template's images as it does a pod's: the server only warms its cache for a
// template, never making workload admission wait on a registry, but mutate can wait, and the templates
// are what a Helm post-renderer sees.
type waitingResolver struct{ *registry.Resolver }

func (r waitingResolver) Warm(req policy.ImageRequest) map[string]policy.Image {
	return r.Lookup(context.Background(), req)
}

// maxInput bounds what mutate reads, so a runaway pipe fails clearly instead of exhausting memory.
const maxInput = 256 << 20

func newMutateCommand(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	var m mutateFlags
	cmd := newCommand("mutate", mutateUsage, func(c *cobra.Command) int {
		m.nsLabelsSet = c.Flags().Changed("namespace-labels")
		return runMutate(&m, stdin, stdout, stderr)
	})
	fl := cmd.Flags()
	fl.StringArrayVarP(&m.files, "filename", "f", nil, "file, directory (its *.yaml, *.yml and *.json files), glob pattern, or - for stdin; repeatable")
	fl.BoolVarP(&m.recursive, "recursive", "R", false, "read the subdirectories of -f directories too, as kubectl -R does")
	fl.StringVar(&m.policyFile, "policy", "", "policy file (default: the built-in policy, see \"wincompat policy\")")
	// The simulated namespace, not a cluster's: mutate talks to none.
	fl.StringVarP(&m.namespace, "namespace", "n", "default", "namespace of objects that name none")
	fl.StringVar(&m.nsLabels, "namespace-labels", policy.LabelEnabled+"=true", "labels of the simulated namespace, k=v,... (all of them: keep "+policy.LabelEnabled+"=true); e.g. add "+policy.LabelDefaultOS+"=windows or "+policy.LabelMode+"="+policy.ModeWarn)
	fl.StringVar(&m.nsAnnotations, "namespace-annotations", "", "annotations of the simulated namespace, k=v,... (e.g. "+policy.AnnotationBuild+"=ltsc2022)")
	fl.StringVarP(&m.output, "output", "o", "yaml", "yaml (the mutated stream), json (as kubectl apply -o json prints it), patch (a JSON patch per object), explain (every change\nwith its reason and rule) or diff (a unified diff per changed object)")
	fl.BoolVar(&m.explain, "explain", false, "same as --output explain")
	fl.BoolVar(&m.quiet, "quiet", false, "do not print the info: lines (the changes made as intended); warning: lines, what needs action, still print")
	fl.BoolVar(&m.resolveImages, "resolve-images", false, "read each Windows pod's images from their registries with your docker credentials to learn which Windows builds can run them")
	fl.DurationVar(&m.lookupTimeout, "image-lookup-timeout", 10*time.Second, "with --resolve-images: how long to wait for the registries of one object")
	m.imageFlags = addImageFlags(fl, cliImageFlags{clouds: "acr,ecr,gar", allowPrivateNetworks: true}, cliCloudsUsage,
		"with --resolve-images: let registry lookups reach loopback and private networks; false for public registries only")
	_ = cmd.MarkFlagFilename("filename", "yaml", "yml", "json")
	_ = cmd.MarkFlagFilename("policy", "yaml", "yml")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(mutateOutputs, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// mutateOutputs are the values of mutate's -o.
var mutateOutputs = []string{"yaml", "json", "patch", "explain", "diff"}

// mutateFlags are mutate's flags, as parsed.
type mutateFlags struct {
	files                                                  []string
	recursive, explain, quiet, resolveImages               bool
	policyFile, namespace, nsLabels, nsAnnotations, output string
	nsLabelsSet                                            bool
	lookupTimeout                                          time.Duration
	imageFlags                                             *cliImageFlags
}

func runMutate(m *mutateFlags, stdin io.Reader, stdout, stderr io.Writer) int {
	files, recursive, output, explain, quiet := m.files, m.recursive, &m.output, &m.explain, &m.quiet
	policyFile, namespace, nsLabels, nsAnnotations := &m.policyFile, &m.namespace, &m.nsLabels, &m.nsAnnotations
	resolveImages, lookupTimeout, imageFlags := &m.resolveImages, &m.lookupTimeout, m.imageFlags
	if *explain {
		*output = "explain"
	}
	writeReport, known := map[string]func(io.Writer, []manifest.Document) error{
		"yaml": nil, "json": nil, "patch": writePatches, "explain": manifest.WriteExplain, "diff": manifest.WriteDiff,
	}[*output]
	if !known {
		fmt.Fprintf(stderr, "wincompat mutate: --output %q: use yaml, json, patch, explain or diff\n", *output)
		return 2
	}
	labels, err := manifest.ParseKeyValues(*nsLabels)
	if err != nil {
		fmt.Fprintf(stderr, "wincompat mutate: --namespace-labels: %v\n", err)
		return 2
	}
	annotations, err := manifest.ParseKeyValues(*nsAnnotations)
	if err != nil {
		fmt.Fprintf(stderr, "wincompat mutate: --namespace-annotations: %v\n", err)
		return 2
	}
	pol, err := loadPolicy(*policyFile)
	if err != nil {
		fmt.Fprintf(stderr, "wincompat mutate: %v\n", err)
		return 1
	}
	if len(files) == 0 {
		files = []string{"-"}
	}
	opts := manifest.Options{
		Policy:    pol,
		Namespace: policy.Namespace{Name: *namespace, Labels: labels, Annotations: annotations},
		Version:   version,
	}
	if *resolveImages {
		r, err := newCLIResolver(*lookupTimeout, *imageFlags)
		if err != nil {
			fmt.Fprintf(stderr, "wincompat mutate: %v\n", err)
			return 2
		}
		opts.Images = waitingResolver{r}
	}

	if len(files) == 1 && files[0] == "-" {
		data, err := readInput("-", stdin)
		if err != nil {
			fmt.Fprintf(stderr, "wincompat mutate: %v\n", err)
			return 1
		}
		if manifest.IsResourceList(data) {
			// A KRM function (kustomize, kpt): the list back on stdout, its results in it.
			if err := manifest.ProcessResourceList(bytes.NewReader(data), stdout, opts); err != nil {
				fmt.Fprintf(stderr, "wincompat mutate: %v\n", err)
				return 1
			}
			return 0
		}
		stdin = bytes.NewReader(data)
	}
	failed := false
	// Nothing is printed unless every file is good: a post-render or a pipe to kubectl apply must not
	// apply half of what was asked.
	var printed bytes.Buffer
	out := &streamWriter{w: &printed}
	// JSON is one document for all the files, printed once every file has been read.
	var objects []json.RawMessage
	// Every file's documents, to say once why nothing changed.
	var allDocs []manifest.Document
	for _, src := range files {
		inputs, err := expand(src, recursive)
		if err != nil {
			fmt.Fprintf(stderr, "wincompat mutate: %v\n", err)
			return 1
		}
		for _, in := range inputs {
			data, err := readInput(in, stdin)
			if err != nil {
				fmt.Fprintf(stderr, "wincompat mutate: %v\n", err)
				failed = true
				continue
			}
			var stream bytes.Buffer
			name := in
			if in == "-" {
				name = "stdin"
			}
			docs, err := manifest.Process(name, data, &stream, opts)
			printMessages(stderr, docs, *quiet)
			allDocs = append(allDocs, docs...)
			if err != nil {
				for _, line := range strings.Split(err.Error(), "\n") {
					fmt.Fprintf(stderr, "wincompat mutate: %s\n", termsafe.String(line))
				}
				failed = true
				continue
			}
			if *output == "json" {
				objs, err := manifest.JSONObjects(name, stream.Bytes())
				if err != nil {
					fmt.Fprintf(stderr, "wincompat mutate: %s\n", termsafe.String(err.Error()))
					failed = true
				}
				objects = append(objects, objs...)
				continue
			}
			if writeReport == nil {
				out.append(stream.Bytes())
				continue
			}
			if err := writeReport(&printed, docs); err != nil {
				fmt.Fprintf(stderr, "wincompat mutate: %v\n", err)
				return 1
			}
		}
	}
	if failed {
		return 1
	}
	notOptedIn(stderr, pol, opts.Namespace, m.nsLabelsSet, allDocs)
	if *output == "json" {
		if err := manifest.WriteJSON(&printed, objects); err != nil {
			fmt.Fprintf(stderr, "wincompat mutate: %v\n", err)
			return 1
		}
	}
	_, _ = stdout.Write(printed.Bytes())
	return 0
}

// printMessages says what wincompat tells of each object on stderr: "info:" for a change made as
// intended, "warning:" for what needs action; quiet leaves out the info.
func printMessages(stderr io.Writer, docs []manifest.Document, quiet bool) {
	for _, d := range docs {
		for _, msg := range d.Messages {
			severity := policy.SeverityWarning
			if msg.Severity == policy.SeverityInfo {
				if quiet {
					continue
				}
				severity = policy.SeverityInfo
			}
			fmt.Fprintf(stderr, "%s: %s: %s\n", severity, termsafe.String(d.Label()), termsafe.String(strings.TrimPrefix(msg.Text, "wincompat: ")))
		}
	}
}

// notOptedIn says, in two lines, that nothing changed because the simulated namespace is not opted
// in, with the --namespace-labels that would opt it in: a stream that comes out as it went in, with
// nothing on stderr, looks like a stream wincompat found nothing to do in. labelsSet is whether
// --namespace-labels was given, which replaces the default label rather than adding to it.
func notOptedIn(stderr io.Writer, pol *policy.Policy, ns policy.Namespace, labelsSet bool, docs []manifest.Document) {
	workloads := 0
	for _, d := range docs {
		if d.Mutated {
			return
		}
		if d.Kind == "List" {
			continue
		}
		objNS := ns
		objNS.Name, _, _ = strings.Cut(d.Name, "/")
		if pol.Scope(nil, objNS) != policy.NamespaceNotEnabled {
			return
		}
		workloads++
	}
	if workloads == 0 {
		return
	}
	why := "the simulated namespace is not labelled " + policy.LabelEnabled + "=true"
	if labelsSet {
		why += " (--namespace-labels replaces the default " + policy.LabelEnabled + "=true, it does not add to it)"
	}
	fixed := maps.Clone(ns.Labels)
	if fixed == nil {
		fixed = map[string]string{}
	}
	for _, mistake := range policy.NamespaceOptInMistakes(ns.Labels) {
		if mistake.Kind == policy.NearKey {
			delete(fixed, mistake.Key)
		}
		fixed[mistake.FixKey] = mistake.FixValue
		if mistake.Kind != policy.NotEnabled {
			why += "; " + mistake.String()
		}
	}
	fixed[policy.LabelEnabled] = "true"
	keys := slices.Sorted(maps.Keys(fixed))
	// wincompat.io/enabled=true first: the label that opts in, then the rest as they were.
	slices.SortStableFunc(keys, func(a, b string) int { return boolRank(b == policy.LabelEnabled) - boolRank(a == policy.LabelEnabled) })
	pairs := make([]string, len(keys))
	for i, k := range keys {
		pairs[i] = k + "=" + fixed[k]
	}
	fmt.Fprintf(stderr, "warning: nothing changed: %s\n", termsafe.String(why))
	fmt.Fprintf(stderr, "warning: to opt the namespace in: --namespace-labels %s\n", termsafe.String(strings.Join(pairs, ",")))
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}

func loadPolicy(path string) (*policy.Policy, error) {
	if path == "" {
		return policy.Default(), nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading policy: %w", err)
	}
	p, err := policy.Load(data)
	if err != nil {
		return nil, fmt.Errorf("policy %s: %w", path, err)
	}
	return p, nil
}

// manifestExtensions are the files a directory contributes, as kubectl's -f reads them
// (k8s.io/cli-runtime/pkg/resource FileExtensions); a file named on its own is read whatever its name.
var manifestExtensions = []string{".json", ".yaml", ".yml"}

// expand turns one -f argument into the files to read, as kubectl's -f does: a file as it is; a
// directory's own *.json, *.yaml and *.yml files, its subdirectories only with recursive; a path that
// does not exist as a glob pattern. Lexical order, so output is stable.
func expand(src string, recursive bool) ([]string, error) {
	if src == "-" {
		return []string{src}, nil
	}
	info, err := os.Stat(src)
	if errors.Is(err, fs.ErrNotExist) {
		matches, globErr := filepath.Glob(src)
		if globErr != nil || len(matches) == 0 {
			return nil, fmt.Errorf("the path %q does not exist", src)
		}
		var files []string
		for _, m := range matches {
			more, err := expand(m, recursive)
			if err != nil {
				return nil, err
			}
			files = append(files, more...)
		}
		return files, nil
	}
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		return []string{src}, nil
	}
	var files []string
	skipped := 0
	// A trailing separator makes the walk follow a root that is a symbolic link to a directory; links
	// inside it are not followed, as filepath.Walk does not follow them for kubectl either.
	root := strings.TrimRight(src, string(filepath.Separator)) + string(filepath.Separator)
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && !recursive {
				skipped++
				return filepath.SkipDir
			}
			return nil
		}
		if slices.Contains(manifestExtensions, filepath.Ext(path)) {
			files = append(files, path)
		}
		return nil
	})
	if err == nil && len(files) == 0 {
		hint := ""
		if skipped > 0 {
			hint = " (subdirectories are read with -R)"
		}
		err = fmt.Errorf("%s: no *.yaml, *.yml or *.json files%s", src, hint)
	}
	return files, err
}

func readInput(name string, stdin io.Reader) ([]byte, error) {
	var r io.Reader = stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, maxInput+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	if len(data) > maxInput {
		return nil, fmt.Errorf("%s is larger than %d MiB: split it", name, maxInput>>20)
	}
	return data, nil
}

// writePatches prints one JSON object per line, for jq and CI diffs.
func writePatches(w io.Writer, docs []manifest.Document) error {
	enc := json.NewEncoder(w)
	for _, d := range docs {
		if err := enc.Encode(struct {
			Source   string   `json:"source"`
			Document int      `json:"document"`
			Kind     string   `json:"kind"`
			Name     string   `json:"name"`
			Patch    any      `json:"patch"`
			Warnings []string `json:"warnings,omitempty"`
			// Messages are the warnings with their severities, in the same order.
			Messages []policy.Message `json:"messages,omitempty"`
		}{d.Source, d.Index, d.Kind, d.Name, nonNilPatch(d), d.Warnings, d.Messages}); err != nil {
			return err
		}
	}
	return nil
}

func nonNilPatch(d manifest.Document) any {
	if d.Patch == nil {
		return []any{}
	}
	return d.Patch
}

// streamWriter concatenates the streams of several files into one valid multi-document stream.
type streamWriter struct {
	w       io.Writer
	written bool
	lastNL  bool
}

func (s *streamWriter) append(stream []byte) {
	if len(stream) == 0 {
		return
	}
	if s.written {
		if !s.lastNL {
			_, _ = io.WriteString(s.w, "\n")
		}
		if !bytes.HasPrefix(stream, []byte("---")) {
			_, _ = io.WriteString(s.w, "---\n")
		}
	}
	_, _ = s.w.Write(stream)
	s.written = true
	s.lastNL = stream[len(stream)-1] == '\n'
}
