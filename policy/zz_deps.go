package policy

import (
	_ "github.com/containerd/platforms"
	_ "github.com/google/go-containerregistry/pkg/v1/remote"
	_ "github.com/google/go-containerregistry/pkg/registry"
	_ "github.com/google/go-containerregistry/pkg/authn/kubernetes"
	_ "golang.org/x/sync/singleflight"
)
