package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const (
	// nonroot is distroless's non-root user and group, which the Dockerfile and the chart's
	// securityContext (runAsUser/runAsGroup 65532) already use.
	nonroot = 65532
	// user is numeric so that the kubelet can check runAsNonRoot without reading /etc/passwd.
	user       = "65532:65532"
	entrypoint = "/wincompat"

	// gzipLevel is fixed because the layer digest is a digest of the compressed bytes: a library
	// default that changed would change it. 6 compresses the binary within 1% of 9 in a third of the time.
	gzipLevel = 6

	// createdBy documents in the image history how the layer was made.
	createdBy = "go run ./deploy/image"
)

// elfMachines are the supported -arch values and the ELF machine their binaries must have.
var elfMachines = map[string]elf.Machine{
	"amd64": elf.EM_X86_64,
	"arm64": elf.EM_AARCH64,
}

// env matches distroless static's, so that nothing that worked on the Dockerfile's base notices the
// difference. No file exists at SSL_CERT_FILE: Go then uses the Mozilla roots compiled into the binary
// (cmd/wincompat/roots.go), and a bundle mounted there replaces them.
var env = []string{
	"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt",
}

// Accounts as in distroless static, minus the groups nothing here uses. Present so that anything that
// maps uid 65532 to a name or a home (os/user, logs, debugging tools) finds one.
const (
	passwd = "root:x:0:0:root:/root:/sbin/nologin\n" +
		"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
		"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	group = "root:x:0:\n" +
		"nobody:x:65534:\n" +
		"nonroot:x:65532:\n"
	// Without this file Go's resolver may ask DNS before /etc/hosts, which the kubelet writes.
	nsswitch = "passwd: files\n" +
		"group: files\n" +
		"hosts: files dns\n"
)

// file is one entry of the layer. Directories end in "/". Owners and modes are explicit so that nothing
// of the build machine (its umask, its uid, a file's mtime) reaches the image.
type file struct {
	name     string
	mode     int64
	uid, gid int
	data     []byte
}

// rootfs is everything in the image: the binary, the account files, a writable /tmp and the non-root
// user's home. No shell and no package database: nothing to exec into and nothing for a scanner to flag.
func rootfs(binary []byte) []file {
	return []file{
		{name: "etc/", mode: 0o755},
		{name: "etc/group", mode: 0o644, data: []byte(group)},
		{name: "etc/nsswitch.conf", mode: 0o644, data: []byte(nsswitch)},
		{name: "etc/passwd", mode: 0o644, data: []byte(passwd)},
		{name: "home/", mode: 0o755},
		{name: "home/nonroot/", mode: 0o700, uid: nonroot, gid: nonroot},
		// Sticky and world-writable like any /tmp; the chart mounts a read-only root, so this matters
		// only where the image runs without the chart.
		{name: "tmp/", mode: 0o1777},
		// Read and execute only: the process cannot rewrite itself, whoever it runs as.
		{name: "wincompat", mode: 0o555, data: binary},
	}
}

// layerTar writes files as a tar with a fixed order and fixed headers, the part of reproducibility
// that go-containerregistry leaves to the caller. Parents come before children because some
// extractors create a missing parent with their own defaults, which the later entry then cannot fix.
func layerTar(files []file, mtime time.Time) ([]byte, error) {
	files = slices.Clone(files)
	slices.SortFunc(files, func(a, b file) int { return strings.Compare(a.name, b.name) })
	dirs := map[string]bool{".": true}
	seen := map[string]bool{}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		clean := strings.TrimSuffix(f.name, "/")
		if seen[clean] {
			return nil, fmt.Errorf("layer: %s twice", clean)
		}
		seen[clean] = true
		if parent := path.Dir(clean); !dirs[parent] {
			return nil, fmt.Errorf("layer: %s has no parent directory %s/ before it", f.name, parent)
		}
		hdr := &tar.Header{
			Name:    f.name,
			Mode:    f.mode,
			Uid:     f.uid,
			Gid:     f.gid,
			ModTime: mtime,
			// USTAR has no room for access times, PAX records or sub-second times that could differ.
			Format: tar.FormatUSTAR,
		}
		if strings.HasSuffix(f.name, "/") {
			hdr.Typeflag = tar.TypeDir
			dirs[clean] = true
		} else {
			hdr.Typeflag = tar.TypeReg
			hdr.Size = int64(len(f.data))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("layer: %s: %w", f.name, err)
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, fmt.Errorf("layer: %s: %w", f.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// imageConfig is what the runtime reads. User and Entrypoint are the Dockerfile's (the test compares).
func imageConfig(version string) v1.Config {
	return v1.Config{
		Entrypoint: []string{entrypoint},
		Env:        slices.Clone(env),
		User:       user,
		WorkingDir: "/",
		Labels: map[string]string{
			"org.opencontainers.image.source":   "https://github.com/wincompat/wincompat",
			"org.opencontainers.image.version":  version,
			"org.opencontainers.image.title":    "wincompat",
			"org.opencontainers.image.licenses": "Apache-2.0",
		},
	}
}

// buildImage puts the layer on an empty base with OCI media types throughout (registries, containerd
// and Docker 25+ all read them; the Docker manifest types of empty.Image are legacy). Every timestamp
// is the epoch: go-containerregistry would otherwise leave the zero time in the history, and a build
// date would differ on every run.
func buildImage(binary []byte, o options) (v1.Image, error) {
	tb, err := layerTar(rootfs(binary), o.epoch)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(
		func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(tb)), nil },
		tarball.WithMediaType(types.OCILayer),
		tarball.WithCompressionLevel(gzipLevel),
		// The digest, the layout and the tarball each read the compressed layer: gzip it once.
		tarball.WithCompressedCaching,
	)
	if err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:   layer,
		History: v1.History{Created: v1.Time{Time: o.epoch}, CreatedBy: createdBy},
	})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS = "linux"
	cf.Architecture = o.arch
	cf.Created = v1.Time{Time: o.epoch}
	cf.Config = imageConfig(o.version)
	return mutate.ConfigFile(img, cf)
}

// checkBinary refuses what would only fail when the pod starts: a binary for another OS or
// architecture, or one linked against a libc that the image does not have.
func checkBinary(b []byte, arch string) error {
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("not a linux ELF binary: %w", err)
	}
	defer f.Close()
	if f.OSABI != elf.ELFOSABI_NONE && f.OSABI != elf.ELFOSABI_LINUX {
		return fmt.Errorf("built for %s, not linux", f.OSABI)
	}
	if f.Machine != elfMachines[arch] {
		return fmt.Errorf("built for %s, not -arch %s", f.Machine, arch)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return errors.New("dynamically linked: build it with CGO_ENABLED=0, the image has no libc")
		}
	}
	return nil
}

// buildAndWrite builds the image from o.binary, writes what o asks for and returns the image digest.
func buildAndWrite(o options) (v1.Hash, error) {
	bin, err := os.ReadFile(o.binary)
	if err != nil {
		return v1.Hash{}, err
	}
	if err := checkBinary(bin, o.arch); err != nil {
		return v1.Hash{}, fmt.Errorf("%s: %w", o.binary, err)
	}
	img, err := buildImage(bin, o)
	if err != nil {
		return v1.Hash{}, err
	}
	if o.layout != "" {
		if err := writeLayout(o.layout, img, o); err != nil {
			return v1.Hash{}, fmt.Errorf("%s: %w", o.layout, err)
		}
	}
	if o.tarball != "" {
		if err := os.MkdirAll(filepath.Dir(o.tarball), 0o755); err != nil {
			return v1.Hash{}, err
		}
		if err := tarball.WriteToFile(o.tarball, o.ref, img); err != nil {
			return v1.Hash{}, fmt.Errorf("%s: %w", o.tarball, err)
		}
	}
	return img.Digest()
}

// writeLayout writes a layout holding this image alone. A previous layout in dir is removed first, or
// its blobs would pile up; any other non-empty directory is refused rather than deleted.
func writeLayout(dir string, img v1.Image, o options) error {
	if err := clearLayout(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	return p.AppendImage(img,
		layout.WithAnnotations(map[string]string{
			// The tag alone, as the image-layout spec's grammar has it (skopeo's oci:DIR:TAG).
			"org.opencontainers.image.ref.name": o.ref.TagStr(),
			// The full name, which ctr import and docker load of a layout use to name the image.
			"io.containerd.image.name": o.ref.String(),
		}),
		layout.WithPlatform(v1.Platform{OS: "linux", Architecture: o.arch}),
	)
}

func clearLayout(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) || (err == nil && len(entries) == 0) {
		return nil
	}
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(dir, "oci-layout")); err != nil {
		return errors.New("not empty and not an OCI image layout: refusing to replace it")
	}
	return os.RemoveAll(dir)
}
