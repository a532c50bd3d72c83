package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"go.yaml.in/yaml/v3"
)

const (
	// testVersion is stamped into the test binary; the binary in the image must print it.
	testVersion = "v0.0.0-imagetest"
	// testEpoch is an arbitrary SOURCE_DATE_EPOCH (2024-05-01T00:00:00Z).
	testEpoch = 1714521600
	testRef   = "ghcr.io/wincompat/wincompat:imagetest"
	repoRoot  = "../.."
	chartDir  = "../helm/wincompat"
)

// buildFlags are `make build`'s GOFLAGS_BUILD with testVersion: TestDockerfileEquivalence holds the
// Makefile and the Dockerfile to them, so the binary tested here is built the way the image's is.
var buildFlags = []string{"-trimpath", "-ldflags", "-s -w -X main.version=" + testVersion}

// tmp holds what the tests share: the binary, built once, and the image every test reads.
var tmp string

func TestMain(m *testing.M) {
	var err error
	if tmp, err = os.MkdirTemp("", "wincompat-image-test-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(tmp)
	os.Exit(code)
}

var (
	binaryOnce sync.Once
	binaryPath string
	binaryErr  error
)

// testBinary builds cmd/wincompat once per run as the Makefile's image target does: static, linux, with
// the release flags. The Go build cache makes it a link step when `make build` or an earlier run
// compiled the same packages with -trimpath.
func testBinary(t *testing.T) string {
	t.Helper()
	binaryOnce.Do(func() {
		out := filepath.Join(tmp, "wincompat")
		args := append([]string{"build"}, buildFlags...)
		args = append(args, "-o", out, "./cmd/wincompat")
		cmd := exec.Command("go", args...)
		cmd.Dir = repoRoot
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
		if b, err := cmd.CombinedOutput(); err != nil {
			binaryErr = fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, b)
			return
		}
		binaryPath = out
	})
	if binaryErr != nil {
		t.Fatal(binaryErr)
	}
	return binaryPath
}

// built is one run of the builder and what it wrote.
type built struct {
	digest  string
	layout  string
	tarball string
}

// buildWith runs the command as `make image` does, with its flags, into a new directory.
func buildWith(t *testing.T, epoch int64) built {
	t.Helper()
	bin := testBinary(t)
	dir, err := os.MkdirTemp(tmp, "build-")
	if err != nil {
		t.Fatal(err)
	}
	b := built{layout: filepath.Join(dir, "oci"), tarball: filepath.Join(dir, "wincompat.tar")}
	var stdout, stderr bytes.Buffer
	args := []string{"-binary", bin, "-o", b.layout, "-tarball", b.tarball, "-ref", testRef,
		"-version", testVersion, "-source-date-epoch", strconv.FormatInt(epoch, 10)}
	if code := run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("run %q: exit %d\n%s", args, code, stderr.String())
	}
	m := regexp.MustCompile(`(?m)^digest:\s+(sha256:[0-9a-f]{64})\nreference:\s+(\S+)$`).FindStringSubmatch(stdout.String())
	if m == nil {
		t.Fatalf("stdout %q: want the digest and the reference", stdout.String())
	}
	if m[2] != testRef {
		t.Errorf("printed reference %s, want %s", m[2], testRef)
	}
	b.digest = m[1]
	return b
}

var (
	mainOnce  sync.Once
	mainBuild built
)

// testImage is the image at testEpoch, built once for the tests that only read it.
func testImage(t *testing.T) built {
	t.Helper()
	mainOnce.Do(func() { mainBuild = buildWith(t, testEpoch) })
	if mainBuild.digest == "" {
		t.Fatal("the shared image build failed (see the first test)")
	}
	return mainBuild
}

// readLayout returns the layout's only image and its index descriptor.
func readLayout(t *testing.T, dir string) (v1.Image, v1.Descriptor) {
	t.Helper()
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 {
		t.Fatalf("index.json lists %d manifests, want 1", len(im.Manifests))
	}
	img, err := idx.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	return img, im.Manifests[0]
}

func fileDigest(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", sha256.Sum256(b))
}

// fileDigests maps every file under dir to its sha256.
func fileDigests(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[rel] = fileDigest(t, p)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestReproducible(t *testing.T) {
	a := testImage(t)
	b := buildWith(t, testEpoch)
	if a.digest != b.digest {
		t.Fatalf("two builds from the same binary and epoch: %s and %s", a.digest, b.digest)
	}
	// Not only the digest: every byte written, so that a pushed layout or a loaded tarball is the same too.
	if da, db := fileDigests(t, a.layout), fileDigests(t, b.layout); !maps.Equal(da, db) {
		t.Errorf("OCI layouts differ:\n%v\n%v", da, db)
	}
	if da, db := fileDigest(t, a.tarball), fileDigest(t, b.tarball); da != db {
		t.Errorf("tarballs differ: %s and %s", da, db)
	}
	img, desc := readLayout(t, a.layout)
	if desc.Digest.String() != a.digest {
		t.Errorf("printed digest %s, layout holds %s", a.digest, desc.Digest)
	}
	if d, _ := img.Digest(); d.String() != a.digest {
		t.Errorf("printed digest %s, image digest %s", a.digest, d)
	}

	// A build an hour later must differ: proof that the epoch reaches the image.
	if c := buildWith(t, testEpoch+3600); c.digest == a.digest {
		t.Errorf("epochs %d and %d gave the same digest %s", testEpoch, testEpoch+3600, a.digest)
	}
}

func TestConfig(t *testing.T) {
	b := testImage(t)
	img, desc := readLayout(t, b.layout)
	epoch := time.Unix(testEpoch, 0).UTC()

	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != "linux" || cf.Architecture != runtime.GOARCH {
		t.Errorf("platform %s/%s, want linux/%s", cf.OS, cf.Architecture, runtime.GOARCH)
	}
	if !cf.Created.Equal(epoch) {
		t.Errorf("created %s, want %s", cf.Created, epoch)
	}
	if len(cf.History) != 1 {
		t.Fatalf("history has %d entries, want 1 (one layer)", len(cf.History))
	}
	for i, h := range cf.History {
		if !h.Created.Equal(epoch) {
			t.Errorf("history[%d] created %s, want %s", i, h.Created, epoch)
		}
	}
	c := cf.Config
	if c.User != "65532:65532" {
		t.Errorf("user %q, want 65532:65532", c.User)
	}
	if uid, _, _ := strings.Cut(c.User, ":"); uid == "0" || uid == "" || uid == "root" {
		t.Errorf("user %q runs as root", c.User)
	}
	if !slices.Equal(c.Entrypoint, []string{"/wincompat"}) || len(c.Cmd) != 0 {
		t.Errorf("entrypoint %q cmd %q, want [/wincompat] and no cmd", c.Entrypoint, c.Cmd)
	}
	if c.WorkingDir != "/" {
		t.Errorf("working dir %q, want /", c.WorkingDir)
	}
	wantEnv := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"}
	if !slices.Equal(c.Env, wantEnv) {
		t.Errorf("env %q, want %q", c.Env, wantEnv)
	}
	wantLabels := map[string]string{
		"org.opencontainers.image.source":   "https://github.com/wincompat/wincompat",
		"org.opencontainers.image.version":  testVersion,
		"org.opencontainers.image.title":    "wincompat",
		"org.opencontainers.image.licenses": "Apache-2.0",
	}
	if !maps.Equal(c.Labels, wantLabels) {
		t.Errorf("labels %v, want %v", c.Labels, wantLabels)
	}

	// OCI media types throughout.
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.MediaType != types.OCIManifestSchema1 || m.Config.MediaType != types.OCIConfigJSON {
		t.Errorf("manifest %s, config %s: want OCI", m.MediaType, m.Config.MediaType)
	}
	if len(m.Layers) != 1 || m.Layers[0].MediaType != types.OCILayer {
		t.Errorf("layers %+v: want one %s", m.Layers, types.OCILayer)
	}

	// The layout names the image for skopeo (tag), ctr import and docker load (full name).
	wantAnn := map[string]string{"org.opencontainers.image.ref.name": "imagetest", "io.containerd.image.name": testRef}
	if !maps.Equal(desc.Annotations, wantAnn) {
		t.Errorf("index annotations %v, want %v", desc.Annotations, wantAnn)
	}
	if desc.Platform == nil || desc.Platform.OS != "linux" || desc.Platform.Architecture != runtime.GOARCH {
		t.Errorf("index platform %+v, want linux/%s", desc.Platform, runtime.GOARCH)
	}

	// The tarball is what docker load reads: tagged with the reference, with the same config.
	tm, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(b.tarball) })
	if err != nil {
		t.Fatal(err)
	}
	if len(tm) != 1 || !slices.Equal(tm[0].RepoTags, []string{testRef}) {
		t.Fatalf("tarball manifest %+v: want one image tagged %s", tm, testRef)
	}
	if tm[0].Config != m.Config.Digest.String() {
		t.Errorf("tarball config %s, layout config %s", tm[0].Config, m.Config.Digest)
	}
}

// entry is a tar header as the runtime sees it.
type entry struct {
	name     string
	typ      byte
	mode     int64
	uid, gid int
}

// layerFiles reads the image's only layer: its headers in order, and the regular files' contents.
func layerFiles(t *testing.T, img v1.Image) ([]entry, map[string][]byte) {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 {
		t.Fatalf("%d layers, want 1", len(layers))
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var entries []entry
	files := map[string][]byte{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if !h.ModTime.Equal(time.Unix(testEpoch, 0)) {
			t.Errorf("%s: mtime %s, want the epoch", h.Name, h.ModTime.UTC())
		}
		if h.Uname != "" || h.Gname != "" || len(h.PAXRecords) != 0 {
			t.Errorf("%s: names %q/%q or PAX records %v from the build machine", h.Name, h.Uname, h.Gname, h.PAXRecords)
		}
		entries = append(entries, entry{h.Name, h.Typeflag, h.Mode, h.Uid, h.Gid})
		if h.Typeflag == tar.TypeReg {
			if files[h.Name], err = io.ReadAll(tr); err != nil {
				t.Fatal(err)
			}
		}
	}
	return entries, files
}

func TestFilesystem(t *testing.T) {
	img, _ := readLayout(t, testImage(t).layout)
	entries, files := layerFiles(t, img)

	want := []entry{
		{"etc/", tar.TypeDir, 0o755, 0, 0},
		{"etc/group", tar.TypeReg, 0o644, 0, 0},
		{"etc/nsswitch.conf", tar.TypeReg, 0o644, 0, 0},
		{"etc/passwd", tar.TypeReg, 0o644, 0, 0},
		{"home/", tar.TypeDir, 0o755, 0, 0},
		{"home/nonroot/", tar.TypeDir, 0o700, 65532, 65532},
		{"tmp/", tar.TypeDir, 0o1777, 0, 0},
		{"wincompat", tar.TypeReg, 0o555, 0, 0},
	}
	if !slices.Equal(entries, want) {
		t.Errorf("layer entries:\n%v\nwant:\n%v", entries, want)
	}
	for _, e := range entries {
		if base := filepath.Base(e.name); e.name == "bin/" || strings.HasPrefix(e.name, "bin/") || base == "sh" || base == "busybox" {
			t.Errorf("%s: the image must have no shell", e.name)
		}
	}

	wantPasswd := "root:x:0:0:root:/root:/sbin/nologin\n" +
		"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
		"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	if got := string(files["etc/passwd"]); got != wantPasswd {
		t.Errorf("/etc/passwd:\n%s\nwant:\n%s", got, wantPasswd)
	}
	wantGroup := "root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n"
	if got := string(files["etc/group"]); got != wantGroup {
		t.Errorf("/etc/group:\n%s\nwant:\n%s", got, wantGroup)
	}
	if got := string(files["etc/nsswitch.conf"]); !regexp.MustCompile(`(?m)^hosts:\s+files dns$`).MatchString(got) {
		t.Errorf("/etc/nsswitch.conf has no 'hosts: files dns':\n%s", got)
	}
	bin, err := os.ReadFile(testBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(files["wincompat"], bin) {
		t.Error("/wincompat is not the binary given with -binary")
	}
}

func TestBinaryRuns(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the image's binary is a linux binary")
	}
	img, _ := readLayout(t, testImage(t).layout)
	_, files := layerFiles(t, img)
	exe := filepath.Join(t.TempDir(), "wincompat")
	if err := os.WriteFile(exe, files["wincompat"], 0o555); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(exe, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s version: %v\n%s", exe, err, out)
	}
	if got := strings.TrimSpace(string(out)); got != testVersion {
		t.Errorf("wincompat version printed %q, want %q", got, testVersion)
	}
	// The image has no CA bundle: registry lookups rely on the roots compiled in (cmd/wincompat/roots.go),
	// where the Dockerfile's distroless base ships Debian's bundle. Function names survive -s -w.
	if !bytes.Contains(files["wincompat"], []byte("golang.org/x/crypto/x509roots/fallback")) {
		t.Error("the binary has no fallback roots: registry lookups over TLS would fail in the image")
	}
}

// shellWords splits a command line as sh does for the plain words and double quotes these files use.
func shellWords(s string) []string {
	var words []string
	var w strings.Builder
	inWord, quoted := false, false
	for _, r := range s {
		switch {
		case r == '"':
			quoted, inWord = !quoted, true
		case !quoted && (r == ' ' || r == '\t'):
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		default:
			w.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words
}

// goBuildFlags returns the flags of the `go build` in words, between "build" and "-o", with the
// version variable however spelled replaced by testVersion, and the environment assignments before it.
func goBuildFlags(words []string) (env, flags []string) {
	i := slices.Index(words, "go")
	if i < 0 || i+1 >= len(words) || words[i+1] != "build" {
		return nil, nil
	}
	env = words[:i]
	for _, w := range words[i+2:] {
		if w == "-o" {
			break
		}
		w = strings.NewReplacer("${VERSION}", testVersion, "$(VERSION)", testVersion).Replace(w)
		flags = append(flags, w)
	}
	return env, flags
}

// TestDockerfileEquivalence holds the Dockerfile, the Makefile and this builder to the same image: a
// static binary built with the same flags, run as the same non-root user by the same entrypoint. What
// differs is by design (README.md): the Dockerfile's base adds Debian's CA bundle, tzdata and the like;
// this image relies on the roots compiled into the binary.
func TestDockerfileEquivalence(t *testing.T) {
	df, err := os.ReadFile(filepath.Join(repoRoot, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var final []string // instructions of the last stage, the image
	var buildEnv, buildFlagsDF []string
	for _, line := range strings.Split(string(df), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasPrefix(line, "FROM ") {
			final = nil
		}
		final = append(final, line)
		if rest, ok := strings.CutPrefix(line, "RUN "); ok && strings.Contains(rest, "go build") {
			buildEnv, buildFlagsDF = goBuildFlags(shellWords(rest))
		}
	}
	instr := func(kw string) string {
		var v string
		for _, l := range final {
			if rest, ok := strings.CutPrefix(l, kw+" "); ok {
				v = strings.TrimSpace(rest) // the last one counts
			}
		}
		return v
	}

	if got := instr("USER"); got != user {
		t.Errorf("Dockerfile USER %q, the builder's %q", got, user)
	}
	if got, want := instr("ENTRYPOINT"), fmt.Sprintf("[%q]", entrypoint); got != want {
		t.Errorf("Dockerfile ENTRYPOINT %s, the builder's %s", got, want)
	}
	if copyArgs := strings.Fields(instr("COPY")); len(copyArgs) == 0 || copyArgs[len(copyArgs)-1] != entrypoint {
		t.Errorf("Dockerfile copies the binary to %v, the builder's entrypoint is %s", copyArgs, entrypoint)
	}
	// Both are static and non-root: distroless static has no libc to link against, and its :nonroot
	// flavour plus USER mean uid 65532, as the builder's checkBinary and config guarantee for its image.
	if base := instr("FROM"); !strings.Contains(base, "distroless/static") || !strings.HasSuffix(base, ":nonroot") {
		t.Errorf("Dockerfile base %q: want distroless static :nonroot", base)
	}
	if !slices.Contains(buildEnv, "CGO_ENABLED=0") {
		t.Errorf("Dockerfile go build environment %q: want CGO_ENABLED=0", buildEnv)
	}
	if !slices.Equal(buildFlagsDF, buildFlags) {
		t.Errorf("Dockerfile go build flags %q, want %q", buildFlagsDF, buildFlags)
	}

	mk, err := os.ReadFile(filepath.Join(repoRoot, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^GOFLAGS_BUILD\s*:?=\s*(.*)$`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("Makefile: no GOFLAGS_BUILD")
	}
	if _, flags := goBuildFlags(append([]string{"go", "build"}, shellWords(string(m[1]))...)); !slices.Equal(flags, buildFlags) {
		t.Errorf("Makefile GOFLAGS_BUILD %q, want %q", flags, buildFlags)
	}
	if !regexp.MustCompile(`(?m)^export CGO_ENABLED \?= 0$`).Match(mk) {
		t.Error("Makefile: no 'export CGO_ENABLED ?= 0'")
	}

	// The builder's side of "static": it refuses a dynamically linked or foreign binary outright.
	bin, err := os.ReadFile(testBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := checkBinary(bin, runtime.GOARCH); err != nil {
		t.Errorf("the CGO_ENABLED=0 binary: %v", err)
	}
	other := map[string]string{"amd64": "arm64", "arm64": "amd64"}[runtime.GOARCH]
	if other != "" {
		if err := checkBinary(bin, other); err == nil {
			t.Errorf("a %s binary passed as -arch %s", runtime.GOARCH, other)
		}
	}
	// And a dynamically linked one, such as the host's shell where it is one (Debian's is).
	if sh, err := os.ReadFile("/bin/sh"); err == nil && bytes.Contains(sh, []byte("/ld-linux")) {
		if err := checkBinary(sh, runtime.GOARCH); err == nil || !strings.Contains(err.Error(), "dynamically linked") {
			t.Errorf("/bin/sh: checkBinary returned %v, want dynamically linked", err)
		}
	}
}

// TestChart: loaded with the default reference, the image is the one a default chart install pulls.
func TestChart(t *testing.T) {
	var values struct {
		Image struct {
			Repository string `yaml:"repository"`
			Tag        string `yaml:"tag"`
		} `yaml:"image"`
	}
	var chart struct {
		AppVersion string `yaml:"appVersion"`
	}
	for file, into := range map[string]any{"values.yaml": &values, "Chart.yaml": &chart} {
		b, err := os.ReadFile(filepath.Join(chartDir, file))
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(b, into); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
	}
	if values.Image.Tag != "" {
		t.Errorf("values.yaml image.tag %q: the chart should default to its appVersion", values.Image.Tag)
	}
	// The rule the deployment applies (through the wincompat.image helper, which only puts
	// global.imageRegistry in front); if it changes, defaultRef must follow.
	for file, rule := range map[string]string{
		"deployment.yaml": `image: {{ include "wincompat.image" . | quote }}`,
		"_helpers.tpl":    `{{- printf "%s:%v" $repository (.Values.image.tag | default .Chart.AppVersion) -}}`,
	} {
		b, err := os.ReadFile(filepath.Join(chartDir, "templates", file))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(b, []byte(rule)) {
			t.Errorf("%s no longer says %s", file, rule)
		}
	}

	want := values.Image.Repository + ":" + chart.AppVersion
	got, err := defaultRef(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("default reference %s, the chart deploys %s", got, want)
	}
	o, err := parseFlags([]string{"-binary", "x", "-o", "y", "-chart", chartDir}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.ref.String() != want || o.version != chart.AppVersion {
		t.Errorf("without -ref: reference %s version %s, want %s and %s", o.ref, o.version, want, chart.AppVersion)
	}
}

func TestFlags(t *testing.T) {
	t.Setenv("SOURCE_DATE_EPOCH", "")
	base := []string{"-binary", "x", "-o", "y", "-ref", testRef}
	o, err := parseFlags(base, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !o.epoch.Equal(time.Unix(0, 0)) || o.arch != runtime.GOARCH || o.version != "imagetest" {
		t.Errorf("defaults: epoch %s arch %s version %s", o.epoch, o.arch, o.version)
	}
	t.Setenv("SOURCE_DATE_EPOCH", "1714521600")
	if o, err := parseFlags(base, io.Discard); err != nil || o.epoch.Unix() != 1714521600 {
		t.Errorf("SOURCE_DATE_EPOCH=1714521600: epoch %v, %v", o.epoch, err)
	}
	if o, err := parseFlags(append(base, "-source-date-epoch", "5", "-arch", "arm64"), io.Discard); err != nil || o.epoch.Unix() != 5 || o.arch != "arm64" {
		t.Errorf("-source-date-epoch 5 -arch arm64: %+v, %v", o, err)
	}
	for _, bad := range [][]string{
		{"-o", "y"}, // no -binary
		{"-binary", "x"},
		append(slices.Clone(base), "-arch", "s390x"),
		append(slices.Clone(base), "-source-date-epoch", "yesterday"),
		append(slices.Clone(base), "-source-date-epoch", "-1"),
		{"-binary", "x", "-o", "y", "-ref", "wincompat"},                          // no registry, no tag
		{"-binary", "x", "-o", "y", "-ref", "ghcr.io/wincompat/wincompat"},        // no tag
		{"-binary", "x", "-o", "y", "-ref", testRef, "extra"},                     // positional
		{"-binary", "x", "-o", "y", "-chart", filepath.Join(t.TempDir(), "none")}, // no Chart.yaml
	} {
		if _, err := parseFlags(bad, io.Discard); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	if _, err := name.NewTag(testRef, name.StrictValidation); err != nil {
		t.Fatal(err)
	}
}

func TestLayerTarRejects(t *testing.T) {
	for _, files := range [][]file{
		{{name: "etc/passwd", mode: 0o644}},                             // parent missing
		{{name: "tmp/", mode: 0o1777}, {name: "tmp/", mode: 0o755}},     // twice
		{{name: "etc", mode: 0o644}, {name: "etc/passwd", mode: 0o644}}, // parent is a file
	} {
		if _, err := layerTar(files, time.Unix(0, 0)); err == nil {
			t.Errorf("%v: no error", files)
		}
	}
	// Order of the input does not matter: parents are sorted before their children.
	a, err := layerTar([]file{{name: "b/", mode: 0o755}, {name: "b/c", mode: 0o644}, {name: "a", mode: 0o644}}, time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	b, err := layerTar([]file{{name: "b/c", mode: 0o644}, {name: "a", mode: 0o644}, {name: "b/", mode: 0o755}}, time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Error("the same files in another order gave another tar")
	}
}

func TestWriteLayoutRefusesOtherDirectories(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "precious"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := clearLayout(dir); err == nil {
		t.Error("a non-empty directory that is not a layout would be removed")
	}
	if _, err := os.Stat(filepath.Join(dir, "precious")); err != nil {
		t.Error(err)
	}
}
