// Command krew makes wincompat's release archives and its krew plugin manifest, and checks manifests
// against krew's rules. Run it from the repository root: go run ./deploy/krew <command> [flags].
// See README.md in this directory.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

const usage = `Usage:
  go run ./deploy/krew archive  -bin FILE -os OS -arch ARCH -version vX.Y.Z [-license LICENSE] [-out DIR] [-checksums FILE]
      write DIR/wincompat_<version>_<os>_<arch>.tar.gz (.zip for windows) holding the binary as
      kubectl-wincompat[.exe] and LICENSE; print its checksum line and set it in checksums.txt
  go run ./deploy/krew manifest -version vX.Y.Z [-checksums FILE] [-archives DIR] [-base-url URL] [-platforms LIST] [-o FILE]
      write the krew plugin manifest for the archives listed in checksums.txt, checked first
  go run ./deploy/krew validate [-archives DIR] FILE.yaml
      check a plugin manifest (and, with -archives, its archives) against krew's rules
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// errUsage marks errors in how the command was called (exit status 2).
var errUsage = errors.New("usage")

// run returns the exit status: 0 on success, 1 on failure, 2 on usage errors.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "archive":
		err = runArchive(args[1:], stdout, stderr)
	case "manifest":
		err = runManifest(args[1:], stdout, stderr)
	case "validate":
		err = runValidate(args[1:], stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		err = fmt.Errorf("%w: unknown command %q", errUsage, args[0])
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "krew: %v\n\n%s", err, usage)
		return 2
	default:
		fmt.Fprintf(stderr, "krew %s: %v\n", args[0], err)
		return 1
	}
}

func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fl := flag.NewFlagSet(name, flag.ContinueOnError)
	fl.SetOutput(stderr)
	return fl
}

// parseFlags parses args, refusing positional arguments beyond maxArgs.
func parseFlags(fl *flag.FlagSet, args []string, maxArgs int) error {
	if err := fl.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fl.NArg() > maxArgs {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fl.Args()[maxArgs:])
	}
	return nil
}

func runArchive(args []string, stdout, stderr io.Writer) error {
	fl := newFlagSet("archive", stderr)
	bin := fl.String("bin", "", "the built binary (for -os/-arch)")
	goos := fl.String("os", "", "the binary's GOOS")
	goarch := fl.String("arch", "", "the binary's GOARCH")
	ver := fl.String("version", "", "the release version, vX.Y.Z")
	license := fl.String("license", licenseName, "the license file to ship")
	out := fl.String("out", ".", "the directory to write the archive into")
	sums := fl.String("checksums", "", "the checksums file to set the archive's line in (default <out>/"+checksumsName+")")
	if err := parseFlags(fl, args, 0); err != nil {
		return err
	}
	if *bin == "" || *goos == "" || *goarch == "" || *ver == "" {
		return fmt.Errorf("%w: -bin, -os, -arch and -version are required", errUsage)
	}
	p, err := parsePlatform(*goos + "/" + *goarch)
	if err != nil {
		return err
	}
	if err := checkVersion(*ver); err != nil {
		return fmt.Errorf("-version: %w", err)
	}
	if *sums == "" {
		*sums = filepath.Join(*out, checksumsName)
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	c, err := createArchive(*out, *ver, p, *bin, *license)
	if err != nil {
		return err
	}
	if err := upsertChecksum(*sums, c); err != nil {
		return err
	}
	_, err = fmt.Fprintln(stdout, c)
	return err
}

func runManifest(args []string, stdout, stderr io.Writer) error {
	fl := newFlagSet("manifest", stderr)
	ver := fl.String("version", "", "the release version, vX.Y.Z")
	sumsPath := fl.String("checksums", filepath.Join("bin", "release", checksumsName), "the release's checksums file")
	archives := fl.String("archives", "", "the directory holding the archives, to check them (default: the checksums file's)")
	baseURL := fl.String("base-url", "", "where the archives are downloaded from (default "+defaultBaseURL("<version>")+")")
	platforms := fl.String("platforms", platformList(releasePlatforms), "the platforms the manifest must list: os/arch, separated by commas or spaces")
	out := fl.String("o", "-", "the manifest file, named "+pluginName+manifestExt+" ('-': standard output)")
	if err := parseFlags(fl, args, 0); err != nil {
		return err
	}
	if *ver == "" {
		return fmt.Errorf("%w: -version is required", errUsage)
	}
	want, err := parsePlatforms(*platforms)
	if err != nil {
		return fmt.Errorf("-platforms: %w", err)
	}
	data, err := os.ReadFile(*sumsPath)
	if err != nil {
		return err
	}
	sums, err := parseChecksums(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("%s: %w", *sumsPath, err)
	}
	p, err := buildManifest(*ver, *baseURL, sums, want)
	if err != nil {
		return err
	}
	if *archives == "" {
		*archives = filepath.Dir(*sumsPath)
	}
	file := *out
	if file == "-" {
		file = pluginName + manifestExt
	}
	if err := validatePlugin(p, file, os.DirFS(*archives)); err != nil {
		return fmt.Errorf("the manifest breaks krew's rules:\n%w", err)
	}
	y, err := renderManifest(p)
	if err != nil {
		return err
	}
	if *out == "-" {
		_, err = stdout.Write(y)
		return err
	}
	return os.WriteFile(*out, y, 0o644)
}

func runValidate(args []string, stdout, stderr io.Writer) error {
	fl := newFlagSet("validate", stderr)
	archives := fl.String("archives", "", "the directory holding the archives the uris name (default: archives are not checked)")
	if err := parseFlags(fl, args, 1); err != nil {
		return err
	}
	if fl.NArg() != 1 {
		return fmt.Errorf("%w: validate takes one manifest file", errUsage)
	}
	file := fl.Arg(0)
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	p, err := decodeManifest(data)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	var dir fs.FS // nil: archives not checked
	checked := "manifest"
	if *archives != "" {
		dir, checked = os.DirFS(*archives), "manifest and archives"
	}
	if err := validatePlugin(p, file, dir); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	_, err = fmt.Fprintf(stdout, "%s: %s valid for krew (%s %s, %d platforms)\n", file, checked, p.Name, p.Spec.Version, len(p.Spec.Platforms))
	return err
}
