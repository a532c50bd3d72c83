package main

import (
	"fmt"
	"os"
	"sort"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// kubeFlags are kubectl's connection flags (--kubeconfig, --context, --as, --server, ...), from
// cli-runtime so that they mean what they mean to kubectl, for the commands that talk to a cluster.
type kubeFlags struct{ *genericclioptions.ConfigFlags }

// shorterUsage replaces kubectl's help of a few flags, which TestFlagHelpIsShort finds too long when
// printed beside wincompat's own; the meaning is kubectl's.
var shorterUsage = map[string]string{
	"request-timeout":          "how long to wait for one API server request (1s, 2m; 0: 30s for nodes, audit and ungate, none for serve)",
	"tls-server-name":          "server name to validate the API server's certificate with (default: the host contacted)",
	"insecure-skip-tls-verify": "do not check the API server's certificate (insecure)",
	"as":                       "user to impersonate: a regular user or system:serviceaccount:NAMESPACE:NAME",
	"as-group":                 "group to impersonate; repeatable",
	"as-user-extra":            "user extra to impersonate, KEY=VALUE; repeatable",
}

// addKubeFlags defines the connection flags on c. withNamespace adds -n/--namespace, the kubeconfig
// context's namespace unless given; a command whose --namespace means something else goes without.
func addKubeFlags(c *cobra.Command, withNamespace bool) *kubeFlags {
	cf := genericclioptions.NewConfigFlags(false)
	// No discovery cache: the commands ask for a few known kinds.
	cf.CacheDir = nil
	if !withNamespace {
		cf.Namespace = nil
	}
	fs := pflag.NewFlagSet("kube", pflag.ContinueOnError)
	cf.AddFlags(fs)
	fs.VisitAll(func(f *pflag.Flag) {
		if u, ok := shorterUsage[f.Name]; ok {
			f.Usage = u
		}
	})
	c.Flags().AddFlagSet(fs)
	_ = c.RegisterFlagCompletionFunc("context", kubeconfigNames(cf, "context"))
	_ = c.RegisterFlagCompletionFunc("cluster", kubeconfigNames(cf, "cluster"))
	_ = c.RegisterFlagCompletionFunc("user", kubeconfigNames(cf, "user"))
	return &kubeFlags{cf}
}

// kubeconfigNames completes --context, --cluster and --user from the kubeconfig, as kubectl does.
func kubeconfigNames(cf *genericclioptions.ConfigFlags, what string) cobra.CompletionFunc {
	return func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		raw, err := cf.ToRawKubeConfigLoader().RawConfig()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var names []string
		switch what {
		case "context":
			for n := range raw.Contexts {
				names = append(names, n)
			}
		case "cluster":
			for n := range raw.Clusters {
				names = append(names, n)
			}
		default:
			for n := range raw.AuthInfos {
				names = append(names, n)
			}
		}
		sort.Strings(names)
		return names, cobra.ShellCompDirectiveNoFileComp
	}
}

// restConfig is the client configuration kubectl would use with the same flags and environment:
// --kubeconfig, else $KUBECONFIG, else ~/.kube/config, else in-cluster; the context's cluster and user
// unless --context, --cluster, --user, --server, --token or --as say otherwise.
func (k *kubeFlags) restConfig() (*rest.Config, error) {
	raw, err := k.ToRawKubeConfigLoader().RawConfig()
	if err != nil {
		return nil, err
	}
	context := raw.CurrentContext
	if *k.Context != "" {
		context = *k.Context
	}
	// kubectl would try localhost:8080 here; nothing says where the cluster is.
	if context == "" && *k.APIServer == "" && !inClusterPossible() {
		if path := *k.KubeConfig; path != "" {
			return nil, fmt.Errorf("%s names no cluster (no current-context, or no such file): see kubectl config view --kubeconfig %s", path, path)
		}
		return nil, noKubeconfig()
	}
	cfg, err := k.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	// As controller-runtime does: no client-side rate limit (client-go's default is 5/s), the API
	// server's priority and fairness protects it.
	cfg.QPS = -1
	return cfg, nil
}

// inClusterPossible is client-go's test for an in-cluster configuration.
func inClusterPossible() bool {
	_, err := os.Stat("/var/run/secrets/kubernetes.io/serviceaccount/token")
	return os.Getenv("KUBERNETES_SERVICE_HOST") != "" && os.Getenv("KUBERNETES_SERVICE_PORT") != "" && err == nil
}

// noKubeconfig says what to do when nothing says where the cluster is: client-go's own message suggests
// KUBERNETES_MASTER, a variable kubectl no longer reads.
func noKubeconfig() error {
	if env := os.Getenv(clientcmd.RecommendedConfigPathEnvVar); env != "" {
		return fmt.Errorf("KUBECONFIG=%s names no cluster (no such file, or no current-context): point it at your kubeconfig, or pass --kubeconfig FILE", env)
	}
	return fmt.Errorf("no cluster to talk to: no kubeconfig at %s and not running in a pod; set KUBECONFIG, pass --kubeconfig FILE, or run wincompat in the cluster", clientcmd.RecommendedHomeFile)
}

// defaultRequestTimeout bounds each request of nodes, audit and ungate unless --request-timeout says
// otherwise, so that an unreachable cluster fails quickly.
const defaultRequestTimeout = 30 * time.Second

// newClient is the client of the commands that read the cluster (nodes, audit, ungate).
func (k *kubeFlags) newClient() (client.Client, error) {
	cfg, err := k.restConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = defaultRequestTimeout
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("%w (is the cluster reachable?)", err)
	}
	return c, nil
}
