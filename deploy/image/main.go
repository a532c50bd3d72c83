// Command image builds wincompat's container image without a container engine: one layer, made in
// memory from the static binary and the few files a non-root process expects, on an empty base. The
// same binary and SOURCE_DATE_EPOCH always give the same digest. See README.md.
//
//	go run ./deploy/image -binary bin/image/wincompat -o bin/image/oci -tarball bin/image/wincompat.tar
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"go.yaml.in/yaml/v3"
)

// defaultRepository is where the chart pulls from (values.yaml image.repository; the test keeps them equal).
const defaultRepository = "ghcr.io/wincompat/wincompat"

type options struct {
	binary  string // the static linux binary to ship
	layout  string // OCI image layout directory to write, or ""
	tarball string // docker-loadable tarball to write, or ""
	ref     name.Tag
	arch    string
	version string    // org.opencontainers.image.version
	epoch   time.Time // every timestamp in the image
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run returns the exit status: 0 on success, 1 when the build fails, 2 on usage errors.
func run(args []string, stdout, stderr io.Writer) int {
	opts, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "image: %v\n", err)
		return 2
	}
	digest, err := buildAndWrite(opts)
	if err != nil {
		fmt.Fprintf(stderr, "image: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "digest:    %s\nreference: %s\n", digest, opts.ref)
	return 0
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	fl := flag.NewFlagSet("image", flag.ContinueOnError)
	fl.SetOutput(stderr)
	binary := fl.String("binary", "", "the wincompat binary to ship: linux, static (CGO_ENABLED=0), built with the Makefile's flags (required)")
	layoutDir := fl.String("o", "", "write the image as an OCI image layout into this directory (replaced if it holds one)")
	tarballFile := fl.String("tarball", "", "also write a tarball that docker load and kind load image-archive read")
	ref := fl.String("ref", "", "the image reference (tag) to record (default: "+defaultRepository+":<appVersion of -chart>)")
	chart := fl.String("chart", filepath.Join("deploy", "helm", "wincompat"), "the Helm chart whose appVersion tags the image when -ref is empty")
	arch := fl.String("arch", runtime.GOARCH, "the binary's architecture: amd64 or arm64")
	version := fl.String("version", "", "org.opencontainers.image.version label (default: the tag of -ref)")
	epoch := fl.String("source-date-epoch", os.Getenv("SOURCE_DATE_EPOCH"), "Unix seconds for every timestamp in the image (default $SOURCE_DATE_EPOCH, else 0)")
	if err := fl.Parse(args); err != nil {
		return options{}, err
	}
	if fl.NArg() > 0 {
		return options{}, fmt.Errorf("unexpected argument %q (flags only)", fl.Arg(0))
	}
	if *binary == "" {
		return options{}, errors.New("-binary is required")
	}
	if *layoutDir == "" && *tarballFile == "" {
		return options{}, errors.New("nothing to write: give -o, -tarball or both")
	}
	if _, ok := elfMachines[*arch]; !ok {
		return options{}, fmt.Errorf("-arch %q: amd64 or arm64", *arch)
	}
	t, err := parseEpoch(*epoch)
	if err != nil {
		return options{}, err
	}
	if *ref == "" {
		if *ref, err = defaultRef(*chart); err != nil {
			return options{}, err
		}
	}
	tag, err := parseRef(*ref)
	if err != nil {
		return options{}, err
	}
	if *version == "" {
		*version = tag.TagStr()
	}
	return options{binary: *binary, layout: *layoutDir, tarball: *tarballFile, ref: tag, arch: *arch,
		version: *version, epoch: t}, nil
}

// parseEpoch reads SOURCE_DATE_EPOCH. An unset value means the Unix epoch rather than now, so that a
// build without it is still reproducible; a malformed one is an error rather than a silent 0.
func parseEpoch(s string) (time.Time, error) {
	if s == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	sec, err := strconv.ParseInt(s, 10, 64)
	if err != nil || sec < 0 {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH %q: want non-negative Unix seconds", s)
	}
	return time.Unix(sec, 0).UTC(), nil
}

// parseRef wants a full tagged reference: docker load names the image from the tag, and a defaulted
// registry or "latest" would load under a name nobody deploys.
func parseRef(s string) (name.Tag, error) {
	tag, err := name.NewTag(s, name.StrictValidation)
	if err != nil {
		return name.Tag{}, fmt.Errorf("-ref %q: want registry/repository:tag: %w", s, err)
	}
	return tag, nil
}

// defaultRef is the reference the chart deploys when image.tag is empty, so that a loaded image is the
// one a default install asks for.
func defaultRef(chartDir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
	if err != nil {
		return "", fmt.Errorf("default -ref: %w (run from the repository root, or give -ref or -chart)", err)
	}
	var chart struct {
		AppVersion string `yaml:"appVersion"`
	}
	if err := yaml.Unmarshal(b, &chart); err != nil {
		return "", fmt.Errorf("default -ref: %s: %w", chartDir, err)
	}
	if chart.AppVersion == "" {
		return "", fmt.Errorf("default -ref: %s/Chart.yaml has no appVersion", chartDir)
	}
	return defaultRepository + ":" + chart.AppVersion, nil
}
