// Command controllers runs some of Kubernetes' own controllers against an API server, for the test
// control plane: what a real cluster's kube-controller-manager does with these is then done here too, by
// the same code.
//
//   - garbage-collector-controller (k8s.io/kubernetes/pkg/controller/garbagecollector): what a real
//     cluster deletes through ownerReferences is deleted here too;
//   - serviceaccount-controller (k8s.io/kubernetes/pkg/controller/serviceaccount): every namespace gets
//     its "default" ServiceAccount, without which the API server's ServiceAccount admission refuses
//     every pod that names none.
//
// kube-controller-manager would bring them, but building that binary pulls in the kubelet's and
// cAdvisor's modules; this hosts only these, wired as kube-controller-manager v1.37.2 wires them
// (cmd/kube-controller-manager/app: CreateControllerContext, newGarbageCollectorController and
// newServiceAccountController), with its defaults (20 garbage collector workers, events ignored,
// discovery every 30 s; one service account worker). --controllers names the ones to run, by
// kube-controller-manager's names or aliases. It answers /readyz with 200 once the informers of every
// controller it runs have synced, and stops on SIGTERM or SIGINT.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	cacheddiscovery "k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/controller-manager/pkg/clientbuilder"
	"k8s.io/controller-manager/pkg/informerfactory"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/controller/garbagecollector"
	serviceaccountcontroller "k8s.io/kubernetes/pkg/controller/serviceaccount"
)

// kube-controller-manager's defaults: --concurrent-gc-syncs, the service account controller's one worker
// (newServiceAccountController's, not a flag), its client's rate, the GC's discovery period, and
// --min-resync-period (the shared informers' resync; kube-controller-manager adds up to as much again at
// random).
const (
	gcWorkers    = 20
	saWorkers    = 1
	clientQPS    = 20 // --kube-api-qps
	clientBurst  = 30 // --kube-api-burst
	syncPeriod   = 30 * time.Second
	resyncPeriod = 12 * time.Hour
)

// The controllers this binary hosts, by kube-controller-manager's name, and their aliases.
const (
	garbageCollectorName = "garbage-collector-controller"
	serviceAccountName   = "serviceaccount-controller"
)

var aliases = map[string]string{
	garbageCollectorName: garbageCollectorName, "garbagecollector": garbageCollectorName,
	serviceAccountName: serviceAccountName, "serviceaccount": serviceAccountName,
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the API server")
	readyAddr := flag.String("ready-address", "127.0.0.1:0", "address of /readyz; the port chosen is printed as `ready: HOST:PORT`")
	controllers := flag.String("controllers", garbageCollectorName, "comma-separated controllers to run: "+garbageCollectorName+" (alias garbagecollector), "+serviceAccountName+" (alias serviceaccount)")
	klog.InitFlags(nil)
	flag.Parse()
	run, err := parseControllers(*controllers)
	if err != nil {
		fmt.Fprintln(os.Stderr, "controllers:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := runControllers(ctx, *kubeconfig, *readyAddr, run); err != nil {
		fmt.Fprintln(os.Stderr, "controllers:", err)
		os.Exit(1)
	}
}

// parseControllers returns the set of controllers a --controllers value names.
func parseControllers(value string) (map[string]bool, error) {
	run := map[string]bool{}
	for _, name := range strings.Split(value, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		canonical, ok := aliases[name]
		if !ok {
			known := make([]string, 0, len(aliases))
			for a := range aliases {
				known = append(known, a)
			}
			sort.Strings(known)
			return nil, fmt.Errorf("--controllers: unknown controller %.100q; known: %s", name, strings.Join(known, ", "))
		}
		run[canonical] = true
	}
	if len(run) == 0 {
		return nil, fmt.Errorf("--controllers names no controller")
	}
	return run, nil
}

func runControllers(ctx context.Context, kubeconfig, readyAddr string, run map[string]bool) error {
	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	config.QPS, config.Burst = clientQPS, clientBurst
	// The shared informers use the root client; each controller a client of its own, named after it
	// (its user agent), as ControllerContext.NewClient gives it.
	clientBuilder := clientbuilder.SimpleControllerClientBuilder{ClientConfig: config}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return err
	}
	// The shared informers and the graph builder's metadata informers, with managed fields trimmed, as
	// CreateControllerContext makes them.
	trim := func(obj any) (any, error) {
		if accessor, err := meta.Accessor(obj); err == nil && accessor.GetManagedFields() != nil {
			accessor.SetManagedFields(nil)
		}
		return obj, nil
	}
	sharedInformers := informers.NewSharedInformerFactoryWithOptions(client, resyncPeriod, informers.WithTransform(trim))
	informerMetadataClient, err := metadata.NewForConfig(config)
	if err != nil {
		return err
	}
	metadataInformers := metadatainformer.NewSharedInformerFactoryWithOptions(informerMetadataClient, resyncPeriod, metadatainformer.WithTransform(trim))
	objectOrMetadataInformers := informerfactory.NewInformerFactory(sharedInformers, metadataInformers)
	informersStarted := make(chan struct{})

	var (
		synced  []func() bool
		runners []func(context.Context)
	)
	if run[garbageCollectorName] {
		isSynced, runGC, err := newGarbageCollector(ctx, config, client, informerMetadataClient, objectOrMetadataInformers, informersStarted)
		if err != nil {
			return err
		}
		synced, runners = append(synced, isSynced), append(runners, runGC...)
	}
	if run[serviceAccountName] {
		saClient, err := clientBuilder.Client("service-account-controller")
		if err != nil {
			return fmt.Errorf("creating the client of %s: %w", serviceAccountName, err)
		}
		sa, ns := sharedInformers.Core().V1().ServiceAccounts(), sharedInformers.Core().V1().Namespaces()
		sac, err := serviceaccountcontroller.NewServiceAccountsController(klog.FromContext(ctx), sa, ns, saClient,
			serviceaccountcontroller.DefaultServiceAccountsControllerOptions())
		if err != nil {
			return fmt.Errorf("creating the ServiceAccount controller: %w", err)
		}
		informersSynced := []cache.InformerSynced{sa.Informer().HasSynced, ns.Informer().HasSynced}
		synced = append(synced, func() bool {
			for _, s := range informersSynced {
				if !s() {
					return false
				}
			}
			return true
		})
		runners = append(runners, func(ctx context.Context) { sac.Run(ctx, saWorkers) })
	}

	l, err := net.Listen("tcp", readyAddr)
	if err != nil {
		return err
	}
	defer l.Close()
	mux := http.NewServeMux()
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		for _, s := range synced {
			if !s() {
				http.Error(w, "informers not synced yet", http.StatusServiceUnavailable)
				return
			}
		}
		fmt.Fprintln(w, "ok")
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	defer srv.Close()
	fmt.Printf("ready: %s\n", l.Addr())

	var wg sync.WaitGroup
	for _, r := range runners {
		wg.Go(func() { r(ctx) })
	}
	// Informers start after the controllers are set up, as kube-controller-manager's Run does.
	sharedInformers.Start(ctx.Done())
	defer sharedInformers.Shutdown()
	objectOrMetadataInformers.Start(ctx.Done())
	close(informersStarted)
	<-ctx.Done()
	wg.Wait()
	return nil
}

// newGarbageCollector sets up the garbage collector as newGarbageCollectorController does, and returns
// whether it has synced and the loops to run.
func newGarbageCollector(ctx context.Context, config *rest.Config, client kubernetes.Interface, informerMetadataClient metadata.Interface,
	objectOrMetadataInformers informerfactory.InformerFactory, informersStarted chan struct{}) (func() bool, []func(context.Context), error) {
	discoveryClient, err := discovery.NewDiscoveryClientForConfig(config)
	if err != nil {
		return nil, nil, err
	}
	restMapper := restmapper.NewDeferredDiscoveryRESTMapper(cacheddiscovery.NewMemCacheClient(discoveryClient))
	go wait.Until(restMapper.Reset, syncPeriod, ctx.Done())

	graphBuilder := garbagecollector.NewDependencyGraphBuilder(ctx, informerMetadataClient, restMapper,
		garbagecollector.DefaultIgnoredResources(), objectOrMetadataInformers, informersStarted)

	// Each deletion takes two requests: twice the client's rate, as newGarbageCollectorController gives it.
	gcConfig := *config
	gcConfig.QPS *= 2
	metadataClient, err := metadata.NewForConfig(&gcConfig)
	if err != nil {
		return nil, nil, err
	}
	gc, err := garbagecollector.NewComposedGarbageCollector(ctx, client, metadataClient, restMapper, graphBuilder)
	if err != nil {
		return nil, nil, fmt.Errorf("creating the garbage collector: %w", err)
	}
	logger := klog.FromContext(ctx)
	return func() bool { return gc.IsSynced(logger) }, []func(context.Context){
		func(ctx context.Context) { gc.Run(ctx, gcWorkers, syncPeriod) },
		func(ctx context.Context) { gc.Sync(ctx, discoveryClient, syncPeriod) },
	}, nil
}
