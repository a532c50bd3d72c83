package registrytest

import (
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

func TestTag(t *testing.T) {
	reg := Start()
	defer reg.Close()
	src, err := reg.PushIndex("shop/api", "1.0", types.DockerManifestList, Windows("10.0.20348.2227"))
	if err != nil {
		t.Fatal(err)
	}
	want := digest(t, src)
	refs, err := reg.Tag(src, "a", "b")
	if err != nil {
		t.Fatal(err)
	}
	if len(refs) != 2 || refs[0] != reg.Host+"/shop/api:a" || refs[1] != reg.Host+"/shop/api:b" {
		t.Fatalf("references %v", refs)
	}
	for _, ref := range refs {
		if got := digest(t, ref); got != want {
			t.Errorf("%s is %s, want %s", ref, got, want)
		}
	}
	if _, err := reg.Tag(reg.Host+"/shop/none:1.0", "c"); err == nil {
		t.Error("tagging a manifest the registry does not hold succeeded")
	}
}

func digest(t *testing.T, ref string) string {
	t.Helper()
	parsed, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	desc, err := remote.Get(parsed)
	if err != nil {
		t.Fatal(err)
	}
	return desc.Digest.String()
}
