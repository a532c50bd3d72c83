package main

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const testVersion = "v1.2.3"

// The two platforms the tests build: one tar.gz, one zip.
var testPlatforms = []osArch{{"linux", "amd64"}, {"windows", "amd64"}}

// standIns writes a small stand-in binary and LICENSE (no cross-compiling in tests).
func standIns(t *testing.T) (bin, license string) {
	t.Helper()
	dir := t.TempDir()
	bin = filepath.Join(dir, "wincompat")
	license = filepath.Join(dir, "LICENSE")
	writeFile(t, bin, "#!/bin/sh\necho wincompat stand-in\n", 0o755)
	writeFile(t, license, "Apache License, Version 2.0 (stand-in)\n", 0o644)
	return bin, license
}

func writeFile(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

// release writes the archives of ps and checksums.txt into a new directory, as a release build would.
func release(t *testing.T, ps []osArch) string {
	t.Helper()
	dir := t.TempDir()
	bin, license := standIns(t)
	for _, p := range ps {
		c, err := createArchive(dir, testVersion, p, bin, license)
		if err != nil {
			t.Fatal(err)
		}
		if err := upsertChecksum(filepath.Join(dir, checksumsName), c); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// releaseManifest is the manifest of release(t, testPlatforms), and the release directory.
func releaseManifest(t *testing.T) (*Plugin, string) {
	t.Helper()
	dir := release(t, testPlatforms)
	sums := readChecksums(t, dir)
	p, err := buildManifest(testVersion, "", sums, testPlatforms)
	if err != nil {
		t.Fatal(err)
	}
	return p, dir
}

func readChecksums(t *testing.T, dir string) []checksum {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, checksumsName))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sums, err := parseChecksums(f)
	if err != nil {
		t.Fatal(err)
	}
	return sums
}

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// TestReleaseToManifest runs the commands as make release and make krew do, then checks the result
// with the validate command.
func TestReleaseToManifest(t *testing.T) {
	dir := t.TempDir()
	bin, license := standIns(t)
	var lines []string
	for _, p := range append(testPlatforms, testPlatforms[0]) { // linux twice: its line is replaced
		code, out, errOut := runCLI(t, "archive", "-bin", bin, "-os", p.OS, "-arch", p.Arch, "-version", testVersion, "-license", license, "-out", dir)
		if code != 0 {
			t.Fatalf("archive %s: exit %d: %s", p, code, errOut)
		}
		lines = append(lines, strings.TrimSpace(out))
	}
	if lines[0] != lines[2] {
		t.Errorf("the same archive twice printed %q then %q", lines[0], lines[2])
	}
	sums, err := os.ReadFile(filepath.Join(dir, checksumsName))
	if err != nil {
		t.Fatal(err)
	}
	if want := lines[0] + "\n" + lines[1] + "\n"; string(sums) != want {
		t.Errorf("checksums.txt:\n%s\nwant (sorted, one line per archive):\n%s", sums, want)
	}

	manifest := filepath.Join(dir, "wincompat.yaml")
	code, _, errOut := runCLI(t, "manifest", "-version", testVersion, "-checksums", filepath.Join(dir, checksumsName),
		"-platforms", "windows/amd64 linux/amd64", "-o", manifest)
	if code != 0 {
		t.Fatalf("manifest: exit %d: %s", code, errOut)
	}
	code, out, errOut := runCLI(t, "validate", "-archives", dir, manifest)
	if code != 0 || !strings.Contains(out, "manifest and archives valid") {
		t.Fatalf("validate: exit %d: %s%s", code, out, errOut)
	}

	data, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	p, err := decodeManifest(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Spec.Platforms) != 2 {
		t.Fatalf("%d platforms, want 2:\n%s", len(p.Spec.Platforms), data)
	}
	for i, want := range []struct{ os, line, bin string }{{"linux", lines[0], "kubectl-wincompat"}, {"windows", lines[1], "kubectl-wincompat.exe"}} {
		pl := p.Spec.Platforms[i]
		sum, name, _ := strings.Cut(want.line, "  ")
		if pl.Selector.MatchLabels["os"] != want.os || pl.Sha256 != sum || pl.Bin != want.bin ||
			pl.URI != "https://github.com/wincompat/wincompat/releases/download/v1.2.3/"+name {
			t.Errorf("platform %d: %+v, want os %s, sha256 %s, bin %s, uri of %s", i, pl, want.os, sum, want.bin, name)
		}
	}

	// Standard output when -o is not given; the base URL from -base-url, with or without its slash.
	code, out, errOut = runCLI(t, "manifest", "-version", testVersion, "-checksums", filepath.Join(dir, checksumsName),
		"-platforms", "linux/amd64,windows/amd64", "-base-url", "https://downloads.example.com/wincompat/v1.2.3")
	if code != 0 || !strings.Contains(out, "uri: https://downloads.example.com/wincompat/v1.2.3/wincompat_v1.2.3_linux_amd64.tar.gz\n") {
		t.Errorf("manifest -base-url: exit %d: %s%s", code, out, errOut)
	}
}

// TestArchiveDeterministic: the same contents give the same bytes, whatever the input files' times and
// modes or whether the binary is reached through a symlink; the entries are what krew extracts.
func TestArchiveDeterministic(t *testing.T) {
	bin, license := standIns(t)
	for _, p := range testPlatforms {
		t.Run(p.String(), func(t *testing.T) {
			var first bytes.Buffer
			if err := writeArchive(&first, p.OS, bin, license); err != nil {
				t.Fatal(err)
			}

			// The same contents, other times and modes, the binary through a symlink.
			dir := t.TempDir()
			bin2, license2 := filepath.Join(dir, "real-binary"), filepath.Join(dir, "COPYING")
			writeFile(t, bin2, readFile(t, bin), 0o700)
			writeFile(t, license2, readFile(t, license), 0o600)
			old := time.Date(2011, 3, 4, 5, 6, 7, 0, time.UTC)
			for _, f := range []string{bin2, license2} {
				if err := os.Chtimes(f, old, old); err != nil {
					t.Fatal(err)
				}
			}
			link := filepath.Join(dir, "kubectl-wincompat")
			if err := os.Symlink(bin2, link); err != nil {
				t.Fatal(err)
			}
			var second bytes.Buffer
			if err := writeArchive(&second, p.OS, link, license2); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(first.Bytes(), second.Bytes()) {
				t.Fatalf("the same inputs gave different archives (%d and %d bytes)", first.Len(), second.Len())
			}

			got := listArchive(t, first.Bytes())
			want := []string{
				"LICENSE 0644 " + archiveTime.Format(time.RFC3339),
				binName(p.OS) + " 0755 " + archiveTime.Format(time.RFC3339),
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("entries %q, want %q", got, want)
			}
			entries, err := archiveEntries(first.Bytes())
			if err != nil {
				t.Fatalf("krew's checks refuse the archive: %v", err)
			}
			if len(entries) != 2 {
				t.Errorf("entries %v", entries)
			}
		})
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// listArchive lists a tar.gz's or zip's entries in order as "name mode mtime", checking each is a
// regular file owned by root (tar).
func listArchive(t *testing.T, data []byte) []string {
	t.Helper()
	var out []string
	if zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data))); err == nil {
		for _, f := range zr.File {
			if !f.Mode().IsRegular() {
				t.Errorf("%s: mode %v", f.Name, f.Mode())
			}
			out = append(out, f.Name+" "+modeString(f.Mode().Perm())+" "+f.Modified.UTC().Format(time.RFC3339))
		}
		return out
	}
	gz, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if !gz.ModTime.IsZero() || gz.Name != "" {
		t.Errorf("gzip header carries a time or name: %+v", gz.Header)
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag != tar.TypeReg || h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" {
			t.Errorf("%s: type %c, owner %d:%d %q:%q", h.Name, h.Typeflag, h.Uid, h.Gid, h.Uname, h.Gname)
		}
		out = append(out, h.Name+" "+modeString(os.FileMode(h.Mode).Perm())+" "+h.ModTime.UTC().Format(time.RFC3339))
	}
	return out
}

func modeString(m os.FileMode) string { return fmt.Sprintf("%#o", m) }

// TestManifestGolden pins the manifest of all five release platforms for fixed checksums.
// UPDATE_GOLDEN=1 rewrites testdata/wincompat.yaml.
func TestManifestGolden(t *testing.T) {
	var b strings.Builder
	for _, p := range releasePlatforms {
		sum := sha256.Sum256([]byte(p.String()))
		b.WriteString(checksum{Sum: hex.EncodeToString(sum[:]), Name: archiveName(testVersion, p)}.String() + "\n")
	}
	b.WriteString(strings.Repeat("ab", 32) + "  wincompat_v1.2.3_sbom.spdx.json\n") // another release file: ignored
	sums, err := parseChecksums(strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	p, err := buildManifest(testVersion, "", sums, releasePlatforms)
	if err != nil {
		t.Fatal(err)
	}
	if err := validatePlugin(p, "wincompat.yaml", nil); err != nil {
		t.Fatalf("the generated manifest breaks krew's rules:\n%v", err)
	}
	got, err := renderManifest(p)
	if err != nil {
		t.Fatal(err)
	}
	back, err := decodeManifest(got)
	if err != nil || !reflect.DeepEqual(back, p) {
		t.Errorf("the YAML does not decode to the manifest: %v\n%+v\n%+v", err, back, p)
	}
	golden := filepath.Join("testdata", "wincompat.yaml")
	if os.Getenv("UPDATE_GOLDEN") == "1" {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("missing golden %s (run UPDATE_GOLDEN=1 go test ./deploy/krew and review it): %v", golden, err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is stale (run UPDATE_GOLDEN=1 go test ./deploy/krew and review the diff)\n--- got\n%s\n--- want\n%s", golden, got, want)
	}
}

func TestValidateRelease(t *testing.T) {
	p, dir := releaseManifest(t)
	if err := validatePlugin(p, filepath.Join(dir, "wincompat.yaml"), os.DirFS(dir)); err != nil {
		t.Fatalf("the release's manifest breaks krew's rules:\n%v", err)
	}
}

type tarEntry struct {
	hdr  tar.Header
	body string
}

// tarGz is an archive of the given entries, for archives the generator would never write.
func tarGz(t *testing.T, entries ...tarEntry) []byte {
	t.Helper()
	var b bytes.Buffer
	gz := gzip.NewWriter(&b)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		h := e.hdr
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(e.body))
		}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func file(name string) tarEntry {
	return tarEntry{hdr: tar.Header{Typeflag: tar.TypeReg, Name: name}, body: name + " contents\n"}
}

// useArchive writes data as the archive name into dir and points platform i at it.
func useArchive(t *testing.T, p *Plugin, dir string, i int, name string, data []byte) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	p.Spec.Platforms[i].Sha256 = hex.EncodeToString(sum[:])
	p.Spec.Platforms[i].URI = defaultBaseURL(testVersion) + name
}

// TestValidateInvalid: each broken manifest or archive fails, naming the field.
func TestValidateInvalid(t *testing.T) {
	for _, tc := range []struct {
		name   string
		file   string // the manifest's file name; default wincompat.yaml
		break_ func(t *testing.T, p *Plugin, dir string)
		field  string
		says   string
	}{
		{name: "bad version", field: "spec.version", says: `must start with "v"`,
			break_: func(t *testing.T, p *Plugin, dir string) { p.Spec.Version = "1.0" }},
		{name: "version not semver", field: "spec.version", says: "not a semantic version",
			break_: func(t *testing.T, p *Plugin, dir string) { p.Spec.Version = "v1.0" }},
		{name: "no version", field: "spec.version", says: "Required",
			break_: func(t *testing.T, p *Plugin, dir string) { p.Spec.Version = "" }},
		{name: "uppercase sha256", field: "spec.platforms[1].sha256", says: "lowercase",
			break_: func(t *testing.T, p *Plugin, dir string) {
				p.Spec.Platforms[1].Sha256 = strings.ToUpper(p.Spec.Platforms[1].Sha256)
			}},
		{name: "sha256 of another archive", field: "spec.platforms[0].sha256", says: "has sha256",
			break_: func(t *testing.T, p *Plugin, dir string) { p.Spec.Platforms[0].Sha256 = strings.Repeat("0", 64) }},
		{name: "missing bin", field: "spec.platforms[0].bin", says: "Required",
			break_: func(t *testing.T, p *Plugin, dir string) { p.Spec.Platforms[0].Bin = "" }},
		{name: "bin not installed", field: "spec.platforms[0].bin", says: "no such file",
			break_: func(t *testing.T, p *Plugin, dir string) { p.Spec.Platforms[0].Bin = "wincompat" }},
		{name: "bin outside the install directory", field: "spec.platforms[0].bin", says: "inside the install directory",
			break_: func(t *testing.T, p *Plugin, dir string) { p.Spec.Platforms[0].Bin = "../kubectl-wincompat" }},
		{name: "windows bin not .exe", field: "spec.platforms[1].bin", says: ".exe",
			break_: func(t *testing.T, p *Plugin, dir string) { p.Spec.Platforms[1].Bin = "kubectl-wincompat" }},
		{name: "overlapping selectors", field: "spec.platforms[1].selector", says: "overlaps spec.platforms[0].selector: both match linux/amd64",
			break_: func(t *testing.T, p *Plugin, dir string) {
				p.Spec.Platforms[1].Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: "os", Operator: metav1.LabelSelectorOpIn, Values: []string{"linux", "windows"}},
					{Key: "arch", Operator: metav1.LabelSelectorOpIn, Values: []string{"amd64"}},
				}}
			}},
		{name: "unsupported arch", field: "spec.platforms[0].selector.matchLabels[arch]", says: `Unsupported value: "s390x"`,
			break_: func(t *testing.T, p *Plugin, dir string) { p.Spec.Platforms[0].Selector.MatchLabels["arch"] = "s390x" }},
		{name: "unsupported os in an expression", field: "spec.platforms[0].selector.matchExpressions[0].values[1]", says: `"plan9"`,
			break_: func(t *testing.T, p *Plugin, dir string) {
				p.Spec.Platforms[0].Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: "os", Operator: metav1.LabelSelectorOpIn, Values: []string{"linux", "plan9"}}}}
			}},
		{name: "unsupported pair", field: "spec.platforms[0].selector", says: "matches none of krew's platforms",
			break_: func(t *testing.T, p *Plugin, dir string) {
				p.Spec.Platforms[0].Selector.MatchLabels["arch"] = "ppc64le"
				p.Spec.Platforms[0].Selector.MatchLabels["os"] = "darwin"
			}},
		{name: "selector key other than os and arch", field: "spec.platforms[0].selector.matchLabels[distro]", says: "Unsupported value",
			break_: func(t *testing.T, p *Plugin, dir string) {
				p.Spec.Platforms[0].Selector.MatchLabels["distro"] = "debian"
			}},
		{name: "empty selector", field: "spec.platforms[0].selector", says: "Required",
			break_: func(t *testing.T, p *Plugin, dir string) { p.Spec.Platforms[0].Selector = &metav1.LabelSelector{} }},
		{name: "no selector", field: "spec.platforms[0].selector", says: "Required",
			break_: func(t *testing.T, p *Plugin, dir string) { p.Spec.Platforms[0].Selector = nil }},
		{name: "symlink in archive", field: "spec.platforms[0].uri", says: `entry "kubectl-wincompat" is a symlink`,
			break_: func(t *testing.T, p *Plugin, dir string) {
				useArchive(t, p, dir, 0, "symlink.tar.gz", tarGz(t, file("LICENSE"), file("real"),
					tarEntry{hdr: tar.Header{Typeflag: tar.TypeSymlink, Name: "kubectl-wincompat", Linkname: "real"}}))
			}},
		{name: "symlink in zip", field: "spec.platforms[1].uri", says: "is a symlink",
			break_: func(t *testing.T, p *Plugin, dir string) {
				var b bytes.Buffer
				zw := zip.NewWriter(&b)
				for _, f := range []struct {
					name string
					mode os.FileMode
				}{{"LICENSE", 0o644}, {"kubectl-wincompat.exe", os.ModeSymlink | 0o777}} {
					h := &zip.FileHeader{Name: f.name}
					h.SetMode(f.mode)
					w, err := zw.CreateHeader(h)
					if err != nil {
						t.Fatal(err)
					}
					io.WriteString(w, "x")
				}
				if err := zw.Close(); err != nil {
					t.Fatal(err)
				}
				useArchive(t, p, dir, 1, "symlink.zip", b.Bytes())
			}},
		{name: "dot-dot in archive", field: "spec.platforms[0].uri", says: `"../kubectl-wincompat"`,
			break_: func(t *testing.T, p *Plugin, dir string) {
				useArchive(t, p, dir, 0, "escape.tar.gz", tarGz(t, file("LICENSE"), file("../kubectl-wincompat")))
			}},
		{name: "absolute name in archive", field: "spec.platforms[0].uri", says: `"/kubectl-wincompat"`,
			break_: func(t *testing.T, p *Plugin, dir string) {
				useArchive(t, p, dir, 0, "absolute.tar.gz", tarGz(t, file("LICENSE"), file("/kubectl-wincompat")))
			}},
		{name: "archive neither zip nor tar.gz", field: "spec.platforms[0].uri", says: "only zip and tar.gz",
			break_: func(t *testing.T, p *Plugin, dir string) {
				useArchive(t, p, dir, 0, "plain.tar.gz", []byte("kubectl-wincompat\n"))
			}},
		{name: "uri not an archive", field: "spec.platforms[0].uri", says: ".tar.gz or .zip",
			break_: func(t *testing.T, p *Plugin, dir string) { p.Spec.Platforms[0].URI += ".bin" }},
		{name: "archive missing", field: "spec.platforms[0].uri", says: "archive not found",
			break_: func(t *testing.T, p *Plugin, dir string) {
				p.Spec.Platforms[0].URI = strings.Replace(p.Spec.Platforms[0].URI, "v1.2.3_linux", "v1.2.4_linux", 1)
			}},
		{name: "archive without LICENSE", field: "spec.platforms[0].files[1].from", says: "matches nothing",
			break_: func(t *testing.T, p *Plugin, dir string) {
				useArchive(t, p, dir, 0, "nolicense.tar.gz", tarGz(t, file("kubectl-wincompat")))
			}},
		{name: "no license installed", field: "spec.platforms[0].files", says: "no license file",
			break_: func(t *testing.T, p *Plugin, dir string) { p.Spec.Platforms[0].Files = p.Spec.Platforms[0].Files[:1] }},
		{name: "no license in archive, default files", field: "spec.platforms[0].files", says: "installed: README.md, kubectl-wincompat",
			break_: func(t *testing.T, p *Plugin, dir string) {
				useArchive(t, p, dir, 0, "readme.tar.gz", tarGz(t, file("kubectl-wincompat"), file("README.md")))
				p.Spec.Platforms[0].Files = nil
			}},
		{name: "files empty", field: "spec.platforms[0].files", says: "Required",
			break_: func(t *testing.T, p *Plugin, dir string) { p.Spec.Platforms[0].Files = []FileOperation{} }},
		{name: "files entry without to", field: "spec.platforms[0].files[1].to", says: "Required",
			break_: func(t *testing.T, p *Plugin, dir string) { p.Spec.Platforms[0].Files[1].To = "" }},
		{name: "files entry without from", field: "spec.platforms[1].files[0].from", says: "Required",
			break_: func(t *testing.T, p *Plugin, dir string) { p.Spec.Platforms[1].Files[0].From = "" }},
		{name: "files to not clean", field: "spec.platforms[0].files[0].to", says: `clean relative path`,
			break_: func(t *testing.T, p *Plugin, dir string) { p.Spec.Platforms[0].Files[0].To = "./kubectl-wincompat" }},
		{name: "name mismatch", file: "kubectl-wincompat.yaml", field: "metadata.name", says: "must equal the manifest's file name",
			break_: func(t *testing.T, p *Plugin, dir string) {}},
		{name: "name with a dot", file: "win.compat.yaml", field: "metadata.name", says: "only letters",
			break_: func(t *testing.T, p *Plugin, dir string) { p.Name = "win.compat" }},
		{name: "Windows reserved name", file: "com1.yaml", field: "metadata.name", says: "reserved",
			break_: func(t *testing.T, p *Plugin, dir string) { p.Name = "com1" }},
		{name: "two-line shortDescription", field: "spec.shortDescription", says: "one line",
			break_: func(t *testing.T, p *Plugin, dir string) {
				p.Spec.ShortDescription = "Rewrite Windows pods\nand audit them"
			}},
		{name: "no shortDescription", field: "spec.shortDescription", says: "Required",
			break_: func(t *testing.T, p *Plugin, dir string) { p.Spec.ShortDescription = " " }},
		{name: "no description", field: "spec.description", says: "Required",
			break_: func(t *testing.T, p *Plugin, dir string) { p.Spec.Description = "" }},
		{name: "no platforms", field: "spec.platforms", says: "at least one platform",
			break_: func(t *testing.T, p *Plugin, dir string) { p.Spec.Platforms = nil }},
		{name: "apiVersion", field: "apiVersion", says: "Unsupported value",
			break_: func(t *testing.T, p *Plugin, dir string) {
				p.APIVersion = "krew.googlecontainertools.github.com/v1alpha1"
			}},
		{name: "kind", field: "kind", says: "Unsupported value",
			break_: func(t *testing.T, p *Plugin, dir string) { p.Kind = "KrewPlugin" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, dir := releaseManifest(t)
			tc.break_(t, p, dir)
			file := tc.file
			if file == "" {
				file = "wincompat.yaml"
			}
			err := validatePlugin(p, file, os.DirFS(dir))
			if err == nil {
				t.Fatal("valid, want an error")
			}
			var found bool
			for _, line := range strings.Split(err.Error(), "\n") {
				if strings.HasPrefix(line, tc.field+": ") && strings.Contains(line, tc.says) {
					found = true
				}
			}
			if !found {
				t.Errorf("no error for %s saying %q; got:\n%v", tc.field, tc.says, err)
			}
		})
	}
}

// TestInstall: krew's file operations as its documentation shows them.
func TestInstall(t *testing.T) {
	entries := map[string]entry{
		"LICENSE": {}, "kubectl-restart-1.0": {dir: true}, "kubectl-restart-1.0/restart.sh": {},
		"kubectl-restart-1.0/lib": {dir: true}, "kubectl-restart-1.0/lib/a.sh": {}, "bin": {dir: true}, "bin/foo-windows.exe": {},
	}
	for _, tc := range []struct {
		ops  []FileOperation
		want string
	}{
		{nil, "installed: LICENSE, bin/, bin/foo-windows.exe, kubectl-restart-1.0/, kubectl-restart-1.0/lib/, kubectl-restart-1.0/lib/a.sh, kubectl-restart-1.0/restart.sh"},
		// A glob's matches go into the directory "to" (so the docs' sample, with to "./restart.sh", does
		// not give the file restart.sh); a path that names an entry is copied to "to".
		{[]FileOperation{{"kubectl-restart-*/restart.sh", "restart.sh"}, {"LICENSE", "."}}, "installed: LICENSE, restart.sh/, restart.sh/restart.sh"},
		{[]FileOperation{{"kubectl-restart-1.0/restart.sh", "restart.sh"}, {"LICENSE", "."}}, "installed: LICENSE, restart.sh"},
		{[]FileOperation{{"bin/foo-windows.exe", "foo.exe"}, {"*/lib", "."}}, "installed: foo.exe, lib/, lib/a.sh"},
		{[]FileOperation{{"*/*.sh", "."}}, "installed: restart.sh"},
	} {
		installed, errs := install(entries, tc.ops, nil, "test.tar.gz")
		if len(errs) > 0 {
			t.Errorf("%v: %v", tc.ops, errs)
		}
		if got := listEntries(installed); got != tc.want {
			t.Errorf("%v:\n got %s\nwant %s", tc.ops, got, tc.want)
		}
	}
}

func TestParseChecksums(t *testing.T) {
	a, b := strings.Repeat("a", 64), strings.Repeat("B", 64)
	sums, err := parseChecksums(strings.NewReader(a + "  x.tar.gz\n" + b + " *y.zip\r\n\n"))
	if err != nil {
		t.Fatal(err)
	}
	if want := []checksum{{a, "x.tar.gz"}, {strings.ToLower(b), "y.zip"}}; !reflect.DeepEqual(sums, want) {
		t.Errorf("%v, want %v", sums, want)
	}
	for in, says := range map[string]string{
		a + " x.tar.gz\n":                     "line 1",
		"abc  x.tar.gz\n":                     "line 1",
		a + "  x.tar.gz\n" + a + "  x.tar.gz": "line 2: x.tar.gz listed twice",
	} {
		if _, err := parseChecksums(strings.NewReader(in)); err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("%q: %v, want an error with %q", in, err, says)
		}
	}
}

// TestCommandErrors: what the commands refuse, and their exit status.
func TestCommandErrors(t *testing.T) {
	dir := release(t, testPlatforms)
	sums := filepath.Join(dir, checksumsName)
	bin, license := standIns(t)
	for _, tc := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{}, 2, "Usage"},
		{[]string{"publish"}, 2, `unknown command "publish"`},
		{[]string{"manifest"}, 2, "-version is required"},
		{[]string{"manifest", "-version", "1.0", "-checksums", sums, "-platforms", "linux/amd64,windows/amd64"}, 1, `version: "1.0" must start with "v"`},
		{[]string{"manifest", "-version", testVersion, "-checksums", sums}, 1, "checksums list no wincompat_v1.2.3_darwin_amd64.tar.gz"},
		{[]string{"manifest", "-version", testVersion, "-checksums", sums, "-platforms", "linux/amd64"}, 1, "checksums list wincompat_v1.2.3_windows_amd64.zip, which is not one of the platforms asked for"},
		{[]string{"manifest", "-version", testVersion, "-checksums", sums, "-platforms", "linux/s390x"}, 1, "not one a release builds"},
		{[]string{"manifest", "-version", testVersion, "-checksums", sums, "-platforms", "linux/amd64,windows/amd64", "-o", filepath.Join(t.TempDir(), "plugin.yaml")}, 1, "metadata.name"},
		{[]string{"manifest", "-version", testVersion, "-checksums", sums, "-platforms", "linux/amd64,windows/amd64", "-archives", t.TempDir()}, 1, "spec.platforms[0].uri"},
		{[]string{"archive", "-bin", bin, "-os", "plan9", "-arch", "amd64", "-version", testVersion, "-license", license, "-out", t.TempDir()}, 1, `platform "plan9/amd64"`},
		{[]string{"archive", "-bin", bin, "-os", "linux", "-arch", "amd64", "-version", "1.2.3", "-license", license, "-out", t.TempDir()}, 1, "-version"},
		{[]string{"archive", "-bin", t.TempDir(), "-os", "linux", "-arch", "amd64", "-version", testVersion, "-license", license, "-out", t.TempDir()}, 1, "not a regular file"},
		{[]string{"archive", "-os", "linux"}, 2, "required"},
		{[]string{"validate"}, 2, "one manifest file"},
	} {
		code, out, errOut := runCLI(t, tc.args...)
		if code != tc.code || !strings.Contains(out+errOut, tc.says) {
			t.Errorf("%q: exit %d: %s%s\nwant exit %d saying %q", tc.args, code, out, errOut, tc.code, tc.says)
		}
	}
	// A failed archive leaves nothing behind.
	out := t.TempDir()
	runCLI(t, "archive", "-bin", bin, "-os", "linux", "-arch", "amd64", "-version", testVersion, "-license", filepath.Join(out, "missing"), "-out", out)
	if names := dirNames(t, out); len(names) != 0 {
		t.Errorf("a failed archive left %v", names)
	}
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names
}
