package main

import (
	"archive/tar"
	"archive/zip"
	"bufio"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
)

// What a release build produces: for each platform an archive wincompat_<version>_<os>_<arch>.tar.gz
// (.zip for Windows) holding the binary, named kubectl-wincompat (kubectl-wincompat.exe), and LICENSE;
// and checksums.txt, one "<sha256>  <archive>" line per archive as sha256sum writes them.

const (
	pluginName    = "wincompat"
	project       = "wincompat"
	binBase       = "kubectl-" + pluginName
	licenseName   = "LICENSE"
	checksumsName = "checksums.txt"
)

// archiveTime is every archive entry's modification time, so that the same inputs give the same bytes.
var archiveTime = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// osArch is one release platform.
type osArch struct{ OS, Arch string }

func (p osArch) String() string { return p.OS + "/" + p.Arch }

// releasePlatforms are the platforms a release builds, in the order the manifest lists them.
var releasePlatforms = []osArch{
	{"darwin", "amd64"}, {"darwin", "arm64"},
	{"linux", "amd64"}, {"linux", "arm64"},
	{"windows", "amd64"},
}

// parsePlatform reads "os/arch", one of releasePlatforms.
func parsePlatform(s string) (osArch, error) {
	for _, p := range releasePlatforms {
		if p.String() == s {
			return p, nil
		}
	}
	return osArch{}, fmt.Errorf("platform %q is not one a release builds (%s)", s, platformList(releasePlatforms))
}

func platformList(ps []osArch) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ", ")
}

// parsePlatforms reads a list of "os/arch" separated by commas or spaces.
func parsePlatforms(s string) ([]osArch, error) {
	var ps []osArch
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' }) {
		p, err := parsePlatform(f)
		if err != nil {
			return nil, err
		}
		ps = append(ps, p)
	}
	if len(ps) == 0 {
		return nil, fmt.Errorf("no platforms")
	}
	return ps, nil
}

// binName is the plugin executable's name in the archive and the install directory.
func binName(goos string) string {
	if goos == "windows" {
		return binBase + ".exe"
	}
	return binBase
}

// archiveName is the file name of a platform's archive.
func archiveName(version string, p osArch) string {
	ext := ".tar.gz"
	if p.OS == "windows" {
		ext = ".zip"
	}
	return fmt.Sprintf("%s_%s_%s_%s%s", project, version, p.OS, p.Arch, ext)
}

// archiveFile is one file to archive: its name in the archive, its mode and where to read it.
type archiveFile struct {
	name string
	mode int64
	path string
}

// writeArchive writes the archive of binPath and licensePath for goos to w: a zip for Windows, a
// tar.gz otherwise. The output depends only on the files' contents: entries sorted by name, regular
// files only (a symlinked input is archived as the file it points to), fixed times, owners and modes.
func writeArchive(w io.Writer, goos, binPath, licensePath string) error {
	files := []archiveFile{
		{name: binName(goos), mode: 0o755, path: binPath},
		{name: licenseName, mode: 0o644, path: licensePath},
	}
	sort.Slice(files, func(i, j int) bool { return files[i].name < files[j].name })
	if goos == "windows" {
		return writeZip(w, files)
	}
	return writeTarGz(w, files)
}

// openRegular opens path, which must be (or link to) a regular file, and returns its size.
func openRegular(path string) (*os.File, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, 0, fmt.Errorf("%s is not a regular file", path)
	}
	return f, fi.Size(), nil
}

func writeTarGz(w io.Writer, files []archiveFile) error {
	gz, err := gzip.NewWriterLevel(w, gzip.BestCompression)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(gz)
	for _, af := range files {
		f, size, err := openRegular(af.path)
		if err != nil {
			return err
		}
		hdr := &tar.Header{
			Typeflag: tar.TypeReg,
			Name:     af.name,
			Mode:     af.mode,
			Size:     size,
			ModTime:  archiveTime,
			Format:   tar.FormatUSTAR,
		}
		err = tw.WriteHeader(hdr)
		if err == nil {
			_, err = io.Copy(tw, f)
		}
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", af.path, err)
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}

func writeZip(w io.Writer, files []archiveFile) error {
	zw := zip.NewWriter(w)
	for _, af := range files {
		f, _, err := openRegular(af.path)
		if err != nil {
			return err
		}
		hdr := &zip.FileHeader{Name: af.name, Method: zip.Deflate, Modified: archiveTime}
		hdr.SetMode(os.FileMode(af.mode))
		fw, err := zw.CreateHeader(hdr)
		if err == nil {
			_, err = io.Copy(fw, f)
		}
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", af.path, err)
		}
	}
	return zw.Close()
}

// createArchive writes the archive of platform p into dir and returns its checksum line. It writes a
// temporary file first, so a failed run leaves no partial archive under the final name.
func createArchive(dir, version string, p osArch, binPath, licensePath string) (checksum, error) {
	name := archiveName(version, p)
	tmp, err := os.CreateTemp(dir, "."+name+".*")
	if err != nil {
		return checksum{}, err
	}
	defer os.Remove(tmp.Name()) // after the rename, a no-op
	h := sha256.New()
	err = writeArchive(io.MultiWriter(tmp, h), p.OS, binPath, licensePath)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(dir, name))
	}
	if err != nil {
		return checksum{}, fmt.Errorf("writing %s: %w", name, err)
	}
	return checksum{Sum: hex.EncodeToString(h.Sum(nil)), Name: name}, nil
}

// checksum is one line of checksums.txt.
type checksum struct{ Sum, Name string }

func (c checksum) String() string { return c.Sum + "  " + c.Name }

// checksumLine is sha256sum's format: the digest, a space, then a space (text mode) or "*" (binary
// mode), then the file name.
var checksumLine = regexp.MustCompile(`^([0-9a-fA-F]{64}) [ *](.+)$`)

// parseChecksums reads checksums.txt. Digests are returned lowercase, as krew wants them.
func parseChecksums(r io.Reader) ([]checksum, error) {
	var sums []checksum
	seen := map[string]bool{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimRight(sc.Text(), "\r")
		if line == "" {
			continue
		}
		m := checksumLine.FindStringSubmatch(line)
		if m == nil {
			return nil, fmt.Errorf("line %d: %q is not \"<sha256>  <file>\"", n, line)
		}
		if seen[m[2]] {
			return nil, fmt.Errorf("line %d: %s listed twice", n, m[2])
		}
		seen[m[2]] = true
		sums = append(sums, checksum{Sum: strings.ToLower(m[1]), Name: m[2]})
	}
	return sums, sc.Err()
}

// formatChecksums writes the lines sorted by file name, so that the file does not depend on the order
// the archives were built in.
func formatChecksums(sums []checksum) []byte {
	sorted := append([]checksum(nil), sums...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	var b strings.Builder
	for _, c := range sorted {
		b.WriteString(c.String())
		b.WriteByte('\n')
	}
	return []byte(b.String())
}

// upsertChecksum sets c's line in the checksums file at path (created if missing), replacing an
// earlier line for the same file: building an archive again does not list it twice.
func upsertChecksum(path string, c checksum) error {
	var sums []checksum
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		if sums, err = parseChecksums(strings.NewReader(string(data))); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	case !os.IsNotExist(err):
		return err
	}
	replaced := false
	for i := range sums {
		if sums[i].Name == c.Name {
			sums[i], replaced = c, true
		}
	}
	if !replaced {
		sums = append(sums, c)
	}
	return os.WriteFile(path, formatChecksums(sums), 0o644)
}
