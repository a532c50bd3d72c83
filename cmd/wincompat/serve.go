package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/resource"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/webhook"
	"github.com/wincompat/wincompat/webhook/certs"
	"github.com/wincompat/wincompat/webhook/scheduling/misplaced"
	"github.com/wincompat/wincompat/webhook/scheduling/registry"
	"github.com/wincompat/wincompat/webhook/server"
)

const serveUsage = `Usage: wincompat serve [flags]

Serves the mutating admission webhook over TLS: /mutate-pod (Pods on CREATE, pods/ephemeralcontainers)
and /mutate-workload (pod templates of Deployment, ReplicaSet, StatefulSet, DaemonSet, Job, CronJob,
ReplicationController, PodTemplate); /healthz and /readyz on the probe address; Prometheus /metrics on
the metrics address. Reads namespaces through the kubeconfig (in-cluster when run as a pod). The serving
certificate is reloaded when tls.crt or tls.key change on disk. On SIGTERM it turns not ready and keeps
answering for --shutdown-delay, closing each keep-alive connection after its next answer, then stops
accepting connections and finishes the reviews in flight.

Unless GOGC is set, the server runs Go's garbage collector at GOGC=200; unless GOMEMLIMIT is set,
WINCOMPAT_MEMORY_LIMIT (bytes; the chart sets it) makes 90% of it the heap's soft limit.

Anything that reaches the port may send reviews, so the port is bounded: connections
(--max-connections), time to send a request (--read-timeout), and the review bytes held at once
(--max-review-bytes-in-flight: past it a review is answered 429 at once and the API server applies the
webhook's failurePolicy). Where the API server can present a client certificate (its admission
configuration), --client-ca-file makes wincompat refuse every other caller; the pods' own pull secrets
(policy podImagePullSecrets) are read only for reviews from such a verified caller.

Every flag in detail: cmd/wincompat/README.md; the server at run time: webhook/server/README.md.

Flags:
`

// serveGCPercent is the server's GOGC unless its environment sets one.
const serveGCPercent = 200

func newServeCommand(stderr io.Writer) *cobra.Command {
	o := server.Options{Version: version}
	var policyFile string
	var zapOpts zap.Options
	var kube *kubeFlags
	var selfManaged, resolveImages, watchMisplaced bool
	remediation := misplaced.Remediation{}
	tlsCfg := certs.Config{}
	imageOpts := server.ImageOptions{}
	cmd := newCommand("serve", serveUsage, func(*cobra.Command) int {
		return runServe(&o, policyFile, &zapOpts, kube, selfManaged, resolveImages, watchMisplaced, remediation, tlsCfg, imageOpts, stderr)
	})
	fl := cmd.Flags()
	fl.StringVar(&o.CertDir, "cert-dir", "/tmp/k8s-webhook-server/serving-certs", "directory with tls.crt and tls.key")
	fl.IntVar(&o.Port, "port", 9443, "webhook HTTPS port")
	fl.StringVar(&o.Host, "bind-address", "", "webhook HTTPS address to listen on (default: all interfaces)")
	fl.StringVar(&policyFile, "policy", "", "policy file, reloaded when it changes; an invalid change is refused (default: the built-in policy, see \"wincompat policy\")")
	fl.StringVar(&o.PolicyConfigMap, "policy-configmap", "", "the ConfigMap in --namespace that --policy is mounted from; its last good policy is kept in <name>"+server.LastGoodSuffix+"\nand served when the file is invalid at start")
	fl.StringVar(&o.MetricsAddr, "metrics-bind-address", ":8080", "Prometheus /metrics address; 0 disables")
	fl.StringVar(&o.ProbeAddr, "health-probe-bind-address", ":8081", "/healthz and /readyz address; 0 disables")
	fl.StringVar(&o.PprofAddr, "pprof-bind-address", "0", "Go profiling (net/http/pprof) address; 0 disables. Keep it on localhost: profiles reveal internals")
	fl.StringVar(&o.TLSMinVersion, "tls-min-version", "1.3", "minimum TLS version: 1.2 or 1.3")
	fl.BoolVar(&o.EnableHTTP2, "enable-http2", false, "serve HTTP/2 too (the API server needs only HTTP/1.1; HTTP/2 adds attack surface such as rapid reset)")
	fl.StringVar(&o.Engine, "engine", server.EngineWebhook, "webhook: every decision in this server; hybrid: the chart's MutatingAdmissionPolicies do the static part in the API server\n(Kubernetes 1.36 and later), so Windows pods stay admissible while no replica answers")
	// Kept so that manifests of earlier charts still start; the chart no longer passes it.
	fl.Bool("admission-policy-bindings-installed", false, "deprecated, does nothing: the chart installs the admission policies")
	fl.BoolVar(&o.ManageRuntimeClasses, "manage-runtimeclasses", true, "keep a RuntimeClass per catalog build (leader only; classes not labelled app.kubernetes.io/managed-by=wincompat are never touched)")
	fl.BoolVar(&watchMisplaced, "watch-misplaced", true, "on the leader, report Windows pods that fail on their node for reasons of OS or build: an Event WindowsBuildMismatch on each\nand the wincompat_misplaced_pods gauge; needs list and watch on pods and events")
	fl.BoolVar(&remediation.Enabled, "remediate-misplaced", false, "with --watch-misplaced: delete a misplaced pod once so that its controller makes it again and admission places it\n(never a bare, Job, DaemonSet, static or build-pinned pod); needs delete on pods and create on pods/eviction")
	fl.IntVar(&remediation.PerMinute, "remediate-misplaced-per-minute", 5, "with --remediate-misplaced: pods deleted per minute at most, cluster-wide")
	fl.DurationVar(&remediation.OwnerWindow, "remediate-misplaced-owner-window", 10*time.Minute, "with --remediate-misplaced: after deleting a pod of a controller, delete no other pod of it for this long (at least 1m)")
	fl.BoolVar(&o.LeaderElect, "leader-elect", false, "elect a leader for cluster-wide work; every replica serves admission either way")
	fl.StringVar(&o.Namespace, "namespace", os.Getenv("POD_NAMESPACE"), "wincompat's own namespace: never mutated, holds the leader Lease (default $POD_NAMESPACE)")
	fl.DurationVar(&o.ShutdownDelay, "shutdown-delay", 5*time.Second, "after SIGTERM, how long to keep answering while not ready, so that reviews sent while the endpoint leaves the Service are not lost;\n0 stops at once")
	fl.DurationVar(&o.ShutdownTimeout, "shutdown-timeout", 20*time.Second, "after --shutdown-delay, how long to finish in-flight reviews")
	fl.BoolVar(&selfManaged, "self-managed-tls", false, "issue and rotate our own CA and serving certificate (in --tls-secret) and keep the webhooks' caBundle current, instead of --cert-dir")
	fl.StringVar(&tlsCfg.SecretName, "tls-secret", "wincompat-tls", "with --self-managed-tls: the Secret in --namespace holding the CA and serving certificate")
	fl.StringVar(&tlsCfg.ServiceName, "service-name", "wincompat", "with --self-managed-tls: the webhook Service, whose DNS names the certificate carries")
	fl.StringVar(&tlsCfg.WebhookConfigName, "webhook-config-name", "0100-wincompat", "with --self-managed-tls: the webhook configurations (mutating, and validating of the same name) whose caBundle to keep")
	fl.Func("tls-san", "with --self-managed-tls: a further DNS name or IP address for the certificate, for a webhook called by URL; repeatable", func(v string) error {
		tlsCfg.ExtraNames = append(tlsCfg.ExtraNames, v)
		return nil
	})
	fl.BoolVar(&resolveImages, "resolve-images", true, "read each Windows pod's images from their registries to learn which Windows builds can run them;\nfalse leaves the build to tags, annotations and the cluster")
	fl.DurationVar(&imageOpts.Timeout, "image-lookup-timeout", time.Second, "how long one review waits for registries (at most 2s); past it the pod is gated (or, with --image-resolver-mode=fallback,\nits build falls back to the other sources, with a warning)")
	fl.StringVar(&o.ImageResolverMode, "image-resolver-mode", webhook.ImageModeLookup, "lookup: read registries within --image-lookup-timeout, gate pods not answered; gate: read only the cache, gate every miss\n(no outbound connection from admission); fallback: never gate (the build falls back to tags and the other sources)")
	fl.DurationVar(&o.GateTimeout, "gate-timeout", policy.DefaultGateTimeout, "how long a gated pod waits for its registry before the leader removes the gate with the fallback build (at least 5s)")
	fl.DurationVar(&imageOpts.TagTTL, "image-tag-ttl", 5*time.Minute, "how long an image tag's digest is trusted before the registry is asked again")
	fl.IntVar(&imageOpts.MaxLookups, "image-max-lookups", 64, "registry lookups in flight at most, over all images; past it a new image waits within --image-lookup-timeout,\nthen its build falls back, with a warning")
	fl.IntVar(&imageOpts.MaxLookupsPerRegistry, "image-max-lookups-per-registry", 16, "registry lookups in flight at most to one registry host (0: a quarter of --image-max-lookups)")
	fl.Func("image-bytes-in-flight", "bytes of registry responses held at once over all lookups, a quarter per registry, as a quantity (default 32Mi, at least 9Mi)", func(v string) error {
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return err
		}
		imageOpts.MaxBytesInFlight = q.Value()
		return nil
	})
	fl.BoolVar(&imageOpts.AllowPrivateNetworks, "image-allow-private-networks", false, "let registry lookups reach loopback, private and unspecified addresses, and plain-HTTP loopback registries;\nlink-local and cloud metadata addresses are never contacted")
	fl.Func("image-cloud-credentials", "clouds whose registries are read with wincompat's own identity there, comma-separated from acr, ecr, gar (default none;\nneeds --image-pull-secret-namespaces)", func(v string) error {
		clouds, err := registry.ParseClouds(v)
		imageOpts.CloudCredentials = clouds
		return err
	})
	fl.Func("image-ecr-regions", "with --image-cloud-credentials=ecr: the AWS regions whose ECR registries get wincompat's identity, comma-separated (default $AWS_REGION)", func(v string) error {
		for r := range strings.SplitSeq(v, ",") {
			if r = strings.TrimSpace(r); r != "" {
				imageOpts.ECRRegions = append(imageOpts.ECRRegions, r)
			}
		}
		return nil
	})
	fl.StringVar(&imageOpts.AzureCloud, "image-azure-cloud", "AzureCloud", "with --image-cloud-credentials=acr: the Azure cloud whose registries get wincompat's token: "+strings.Join(registry.AzureClouds(), ", "))
	fl.StringVar(&imageOpts.PullSecretNamespaces, "image-pull-secret-namespaces", "", "with --image-pull-secret or --image-cloud-credentials (required then): a label selector of the namespaces whose pods' images\nmay be read with wincompat's credentials; kubernetes.io/metadata.name selects every namespace")
	fl.StringVar(&imageOpts.PullSecret, "image-pull-secret", "", "a kubernetes.io/dockerconfigjson Secret in --namespace with credentials for private registries (default: anonymous)")
	o.Serving = server.Serving{MaxConnections: server.DefaultMaxConnections, ReadTimeout: server.DefaultReadTimeout, ReviewBytes: server.DefaultReviewBytes}
	fl.IntVar(&o.Serving.MaxConnections, "max-connections", server.DefaultMaxConnections, "open connections to the webhook port at most (0: the default); past it new ones wait to be accepted")
	fl.DurationVar(&o.Serving.ReadTimeout, "read-timeout", server.DefaultReadTimeout, "time a caller has to send one request: TLS handshake, headers and body; at most 30s (0: the default)")
	fl.Func("max-review-bytes-in-flight", "memory reviews in flight may hold at once, as a quantity (default 96Mi, at least 36Mi); past it a review is answered 429 at once", func(v string) error {
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return err
		}
		o.Serving.ReviewBytes = q.Value()
		return nil
	})
	fl.StringVar(&o.Serving.ClientCAFile, "client-ca-file", "", "PEM CA bundle: answer only callers presenting a client certificate of these CAs (the API server's); reloaded when it changes.\nEmpty: any caller is answered")
	fl.Func("client-names", "with --client-ca-file: the client certificate's common name or a DNS name must be one of these (comma-separated)", func(v string) error {
		for n := range strings.SplitSeq(v, ",") {
			if n = strings.TrimSpace(n); n != "" {
				o.Serving.ClientNames = append(o.Serving.ClientNames, n)
			}
		}
		return nil
	})
	goFlags := flag.NewFlagSet("zap", flag.ContinueOnError)
	zapOpts.BindFlags(goFlags)
	fl.AddGoFlagSet(goFlags)
	// Its own --namespace is wincompat's namespace, not a request's.
	kube = addKubeFlags(cmd, false)
	return cmd
}

func runServe(o *server.Options, policyFile string, zapOpts *zap.Options, kube *kubeFlags, selfManaged, resolveImages, watchMisplaced bool,
	remediation misplaced.Remediation, tlsCfg certs.Config, imageOpts server.ImageOptions, stderr io.Writer) int {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(serveGCPercent)
	}
	if err := setMemoryLimit(); err != nil {
		fmt.Fprintf(stderr, "wincompat serve: %v\n", err)
		return 1
	}
	pol, err := loadPolicy(policyFile)
	if err != nil && o.PolicyConfigMap == "" {
		fmt.Fprintf(stderr, "wincompat serve: %v (with --policy-configmap wincompat would serve with the last good policy instead)\n", err)
		return 1
	}
	if err != nil {
		pol = policy.Default() // a placeholder: the server falls back to the last good policy itself
	}
	o.Policy, o.PolicyFile = pol, policyFile
	if selfManaged {
		o.SelfManagedTLS = &tlsCfg
	}
	if resolveImages {
		o.Images = &imageOpts
	}
	if watchMisplaced {
		o.Misplaced = &remediation
	} else if remediation.Enabled {
		fmt.Fprintln(stderr, "wincompat serve: --remediate-misplaced needs --watch-misplaced")
		return 2
	}
	var invalid []error
	if o.Images != nil && slices.Contains(o.Images.CloudCredentials, registry.CloudECR) && len(o.Images.ECRRegions) == 0 &&
		os.Getenv("AWS_REGION") == "" && os.Getenv("AWS_DEFAULT_REGION") == "" {
		invalid = append(invalid, errors.New("--image-cloud-credentials=ecr needs --image-ecr-regions (the chart's imageResolver.ecrRegions) or AWS_REGION: the regions whose ECR registries get wincompat's identity"))
	}
	if o.Images != nil && !slices.Contains(registry.AzureClouds(), o.Images.AzureCloud) {
		invalid = append(invalid, fmt.Errorf("--image-azure-cloud %q: use one of %s", o.Images.AzureCloud, strings.Join(registry.AzureClouds(), ", ")))
	}
	if err := errors.Join(append(invalid, o.Validate())...); err != nil {
		fmt.Fprintf(stderr, "wincompat serve: %v\n", err)
		return 1
	}
	cfg, err := kube.restConfig()
	if err != nil {
		fmt.Fprintf(stderr, "wincompat serve: kubeconfig: %v\n", err)
		return 1
	}
	o.Log = zap.New(zap.UseFlagOptions(zapOpts))
	ctrl.SetLogger(o.Log)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := server.Run(ctx, cfg, *o); err != nil {
		fmt.Fprintf(stderr, "wincompat serve: %v\n", err)
		return 1
	}
	return 0
}

// memoryLimitShare is the part of the container's memory limit the heap may use: the rest is for what
// the Go runtime does not count (stacks' slack, the binary) and for the collector to catch up.
const memoryLimitShare = 0.9

// setMemoryLimit applies WINCOMPAT_MEMORY_LIMIT unless GOMEMLIMIT is set.
func setMemoryLimit() error {
	v, set := os.LookupEnv("WINCOMPAT_MEMORY_LIMIT")
	if _, own := os.LookupEnv("GOMEMLIMIT"); own || !set || v == "" {
		return nil
	}
	limit, err := strconv.ParseInt(v, 10, 64)
	if err != nil || limit <= 0 {
		return fmt.Errorf("WINCOMPAT_MEMORY_LIMIT=%q: want the container's memory limit in bytes (the chart sets it from resources.limits.memory)", v)
	}
	debug.SetMemoryLimit(int64(float64(limit) * memoryLimitShare))
	return nil
}
