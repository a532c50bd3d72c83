// Command garbagecollector runs Kubernetes' own garbage collector controller
// (k8s.io/kubernetes/pkg/controller/garbagecollector) against an API server, for the test control plane:
// what a real cluster deletes through ownerReferences is then deleted here too, by the same code.
//
// kube-controller-manager would bring it, but building that binary pulls in the kubelet's and cAdvisor's
// modules; this hosts only the one controller, wired as kube-controller-manager v1.37.2 wires it
// (cmd/kube-controller-manager/app: CreateControllerContext and newGarbageCollectorController), with its
// defaults (20 workers, events ignored, discovery every 30 s). It answers /readyz with 200 once the
// collector's informers have synced, and stops on SIGTERM or SIGINT.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
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
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/controller-manager/pkg/informerfactory"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/controller/garbagecollector"
)

// kube-controller-manager's defaults: --concurrent-gc-syncs, its client's rate, the GC's discovery period, and
// --min-resync-period (the shared informers' resync; kube-controller-manager adds up to as much again at
// random).
const (
	workers      = 20
	clientQPS    = 20 // --kube-api-qps
	clientBurst  = 30 // --kube-api-burst
	syncPeriod   = 30 * time.Second
	resyncPeriod = 12 * time.Hour
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the API server")
	readyAddr := flag.String("ready-address", "127.0.0.1:0", "address of /readyz; the port chosen is printed as `ready: HOST:PORT`")
	klog.InitFlags(nil)
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx, *kubeconfig, *readyAddr); err != nil {
		fmt.Fprintln(os.Stderr, "garbagecollector:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, kubeconfig, readyAddr string) error {
	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	config.QPS, config.Burst = clientQPS, clientBurst
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

	discoveryClient, err := discovery.NewDiscoveryClientForConfig(config)
	if err != nil {
		return err
	}
	restMapper := restmapper.NewDeferredDiscoveryRESTMapper(cacheddiscovery.NewMemCacheClient(discoveryClient))
	go wait.Until(restMapper.Reset, syncPeriod, ctx.Done())

	informersStarted := make(chan struct{})
	graphBuilder := garbagecollector.NewDependencyGraphBuilder(ctx, informerMetadataClient, restMapper,
		garbagecollector.DefaultIgnoredResources(), objectOrMetadataInformers, informersStarted)

	// Each deletion takes two requests: twice the client's rate, as newGarbageCollectorController gives it.
	gcConfig := *config
	gcConfig.QPS *= 2
	metadataClient, err := metadata.NewForConfig(&gcConfig)
	if err != nil {
		return err
	}
	gc, err := garbagecollector.NewComposedGarbageCollector(ctx, client, metadataClient, restMapper, graphBuilder)
	if err != nil {
		return fmt.Errorf("creating the garbage collector: %w", err)
	}

	l, err := net.Listen("tcp", readyAddr)
	if err != nil {
		return err
	}
	defer l.Close()
	logger := klog.FromContext(ctx)
	mux := http.NewServeMux()
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !gc.IsSynced(logger) {
			http.Error(w, "garbage collector not synced yet", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	defer srv.Close()
	fmt.Printf("ready: %s\n", l.Addr())

	done := make(chan struct{}, 2)
	go func() { gc.Run(ctx, workers, syncPeriod); done <- struct{}{} }()
	go func() { gc.Sync(ctx, discoveryClient, syncPeriod); done <- struct{}{} }()
	// Informers start after the controller is set up, as kube-controller-manager's Run does.
	sharedInformers.Start(ctx.Done())
	defer sharedInformers.Shutdown()
	objectOrMetadataInformers.Start(ctx.Done())
	close(informersStarted)
	<-ctx.Done()
	<-done
	<-done
	return nil
}
