package main

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/version"
)

// The rules krew applies to a plugin manifest, from its plugin-manifest documentation and its index
// checks: the manifest's own fields, the platforms' selectors, and what installing each platform's
// archive gives.

var (
	nameRE   = regexp.MustCompile(`^[\w-]+$`)
	sha256RE = regexp.MustCompile(`^[a-f0-9]{64}$`)
)

// krewPlatforms are the os/arch pairs krew itself is released for, the only ones a selector may match.
var krewPlatforms = []osArch{
	{"darwin", "386"}, {"darwin", "amd64"}, {"darwin", "arm64"},
	{"linux", "386"}, {"linux", "amd64"}, {"linux", "arm"}, {"linux", "arm64"}, {"linux", "ppc64le"},
	{"windows", "386"}, {"windows", "amd64"}, {"windows", "arm64"},
}

// selectorValues are the values the labels os and arch take on krewPlatforms.
func selectorValues() map[string][]string {
	seen := map[string]map[string]bool{"os": {}, "arch": {}}
	for _, p := range krewPlatforms {
		seen["os"][p.OS] = true
		seen["arch"][p.Arch] = true
	}
	vals := map[string][]string{}
	for k, set := range seen {
		for v := range set {
			vals[k] = append(vals[k], v)
		}
		sort.Strings(vals[k])
	}
	return vals
}

// licenseNames are the file names (case-insensitive) krew accepts as the plugin's license, in the
// install directory; a name starting with "licenses" (a LICENSES directory or file) also counts.
var licenseNames = []string{"license", "license.txt", "license.md", "copying", "copying.txt"}

// checkVersion accepts "v" followed by a semantic version, e.g. v1.2.3 or v1.2.3-rc.1.
func checkVersion(v string) error {
	if !strings.HasPrefix(v, "v") {
		return fmt.Errorf("%q must start with \"v\", e.g. v1.2.3", v)
	}
	if _, err := version.ParseSemantic(v); err != nil {
		return fmt.Errorf("%q is not a semantic version vX.Y.Z: %v", v, err)
	}
	return nil
}

// isWindowsReservedName says whether name cannot be a file name on Windows.
func isWindowsReservedName(name string) bool {
	switch n := strings.ToUpper(name); n {
	case "CON", "PRN", "AUX", "NUL":
		return true
	default:
		return len(n) == 4 && (strings.HasPrefix(n, "COM") || strings.HasPrefix(n, "LPT")) && n[3] >= '1' && n[3] <= '9'
	}
}

// validatePlugin checks p, read from (or to be written to) a file named manifestFile, against krew's
// rules. With archives non-nil, each platform's archive (the base name of its uri) is also read from
// it: its checksum, type and entries, and the files installing it gives. Every error names its field,
// e.g. "spec.platforms[2].sha256".
func validatePlugin(p *Plugin, manifestFile string, archives fs.FS) error {
	var errs field.ErrorList
	if p.APIVersion != krewAPIVersion {
		errs = append(errs, field.NotSupported(field.NewPath("apiVersion"), p.APIVersion, []string{krewAPIVersion}))
	}
	if p.Kind != krewKind {
		errs = append(errs, field.NotSupported(field.NewPath("kind"), p.Kind, []string{krewKind}))
	}
	errs = append(errs, validateName(p.Name, manifestFile)...)

	spec := field.NewPath("spec")
	if p.Spec.Version == "" {
		errs = append(errs, field.Required(spec.Child("version"), ""))
	} else if err := checkVersion(p.Spec.Version); err != nil {
		errs = append(errs, field.Invalid(spec.Child("version"), p.Spec.Version, err.Error()))
	}
	switch sd := p.Spec.ShortDescription; {
	case strings.TrimSpace(sd) == "":
		errs = append(errs, field.Required(spec.Child("shortDescription"), "a few words for kubectl krew search"))
	case strings.ContainsAny(sd, "\r\n"):
		errs = append(errs, field.Invalid(spec.Child("shortDescription"), sd, "must be one line"))
	}
	if strings.TrimSpace(p.Spec.Description) == "" {
		errs = append(errs, field.Required(spec.Child("description"), ""))
	}

	platforms := spec.Child("platforms")
	if len(p.Spec.Platforms) == 0 {
		errs = append(errs, field.Required(platforms, "at least one platform"))
	}
	for i := range p.Spec.Platforms {
		errs = append(errs, validatePlatform(&p.Spec.Platforms[i], platforms.Index(i), archives)...)
	}
	errs = append(errs, validateOverlaps(p.Spec.Platforms, platforms)...)
	return joinFieldErrors(errs)
}

// joinFieldErrors is nil for no errors, else one error with a line per field error.
func joinFieldErrors(errs field.ErrorList) error {
	es := make([]error, len(errs))
	for i, e := range errs {
		es[i] = e
	}
	return errors.Join(es...)
}

func validateName(name, manifestFile string) field.ErrorList {
	fp := field.NewPath("metadata", "name")
	var errs field.ErrorList
	switch {
	case name == "":
		return append(errs, field.Required(fp, ""))
	case !nameRE.MatchString(name):
		errs = append(errs, field.Invalid(fp, name, "only letters, digits, '_' and '-'"))
	case isWindowsReservedName(name):
		errs = append(errs, field.Invalid(fp, name, "a reserved file name on Windows"))
	}
	if want := strings.TrimSuffix(path.Base(strings.ReplaceAll(manifestFile, `\`, "/")), manifestExt); name != want || !strings.HasSuffix(manifestFile, manifestExt) {
		errs = append(errs, field.Invalid(fp, name, fmt.Sprintf("must equal the manifest's file name without %s (the file is %s)", manifestExt, manifestFile)))
	}
	return errs
}

func validatePlatform(pl *Platform, fp *field.Path, archives fs.FS) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateSelector(pl.Selector, fp.Child("selector"))...)
	if pl.URI == "" {
		errs = append(errs, field.Required(fp.Child("uri"), ""))
	}
	if pl.Sha256 == "" {
		errs = append(errs, field.Required(fp.Child("sha256"), ""))
	} else if !sha256RE.MatchString(pl.Sha256) {
		errs = append(errs, field.Invalid(fp.Child("sha256"), pl.Sha256, "must be 64 lowercase hex digits"))
	}
	bin := fp.Child("bin")
	if pl.Bin == "" {
		errs = append(errs, field.Required(bin, "the plugin executable's path in the install directory"))
	} else {
		if !isLocalPath(pl.Bin) {
			errs = append(errs, field.Invalid(bin, pl.Bin, "must be a relative path inside the install directory"))
		}
		if selectorMatchesOS(pl.Selector, "windows") && !strings.HasSuffix(strings.ToLower(pl.Bin), ".exe") {
			errs = append(errs, field.Invalid(bin, pl.Bin, "krew runs only .exe entrypoints on Windows"))
		}
	}
	files := fp.Child("files")
	if pl.Files != nil && len(pl.Files) == 0 {
		errs = append(errs, field.Required(files, "omit files for krew's default, or list at least one"))
	}
	for j, f := range pl.Files {
		if f.From == "" {
			errs = append(errs, field.Required(files.Index(j).Child("from"), ""))
		} else if !isLocalPath(f.From) {
			errs = append(errs, field.Invalid(files.Index(j).Child("from"), f.From, "must be a relative path inside the archive"))
		}
		if f.To == "" {
			errs = append(errs, field.Required(files.Index(j).Child("to"), ""))
		} else if !isLocalPath(f.To) || path.Clean(f.To) != f.To {
			errs = append(errs, field.Invalid(files.Index(j).Child("to"), f.To, fmt.Sprintf("must be a clean relative path inside the install directory (%q)", path.Clean(f.To))))
		}
	}
	if archives != nil && len(errs) == 0 { // the archive is read only for a platform otherwise valid
		errs = append(errs, validateArchive(pl, fp, archives)...)
	}
	return errs
}

// isLocalPath says whether p, a slash or backslash path, stays inside the directory it is relative to.
func isLocalPath(p string) bool {
	p = strings.ReplaceAll(p, `\`, "/")
	if strings.HasPrefix(p, "/") || (len(p) >= 2 && p[1] == ':') {
		return false
	}
	c := path.Clean(p)
	return c != ".." && !strings.HasPrefix(c, "../")
}

func validateSelector(sel *metav1.LabelSelector, fp *field.Path) field.ErrorList {
	if sel == nil || (len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0) {
		return field.ErrorList{field.Required(fp, "matchLabels or matchExpressions on os and arch")}
	}
	if sel.MatchLabels != nil && len(sel.MatchLabels) == 0 {
		return field.ErrorList{field.Required(fp.Child("matchLabels"), "omit it or give os and/or arch")}
	}
	if sel.MatchExpressions != nil && len(sel.MatchExpressions) == 0 {
		return field.ErrorList{field.Required(fp.Child("matchExpressions"), "omit it or give at least one")}
	}
	var errs field.ErrorList
	values := selectorValues()
	keys := make([]string, 0, len(sel.MatchLabels))
	for k := range sel.MatchLabels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := sel.MatchLabels[k]
		kp := fp.Child("matchLabels").Key(k)
		if _, ok := values[k]; !ok {
			errs = append(errs, field.NotSupported(kp, k, []string{"os", "arch"}))
		} else if !contains(values[k], v) {
			errs = append(errs, field.NotSupported(kp, v, values[k]))
		}
	}
	for i, e := range sel.MatchExpressions {
		ep := fp.Child("matchExpressions").Index(i)
		if _, ok := values[e.Key]; !ok {
			errs = append(errs, field.NotSupported(ep.Child("key"), e.Key, []string{"os", "arch"}))
			continue
		}
		for j, v := range e.Values {
			if !contains(values[e.Key], v) {
				errs = append(errs, field.NotSupported(ep.Child("values").Index(j), v, values[e.Key]))
			}
		}
	}
	if len(errs) > 0 {
		return errs
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return field.ErrorList{field.Invalid(fp, metav1.FormatLabelSelector(sel), err.Error())}
	}
	if len(matchedPlatforms(s)) == 0 {
		errs = append(errs, field.Invalid(fp, metav1.FormatLabelSelector(sel), "matches none of krew's platforms ("+platformList(krewPlatforms)+")"))
	}
	return errs
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// matchedPlatforms are the krew platforms s matches.
func matchedPlatforms(s labels.Selector) []osArch {
	var out []osArch
	for _, p := range krewPlatforms {
		if s.Matches(labels.Set{"os": p.OS, "arch": p.Arch}) {
			out = append(out, p)
		}
	}
	return out
}

// selectorMatchesOS says whether sel matches some krew platform of goos.
func selectorMatchesOS(sel *metav1.LabelSelector, goos string) bool {
	if sel == nil {
		return false
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return false
	}
	for _, p := range matchedPlatforms(s) {
		if p.OS == goos {
			return true
		}
	}
	return false
}

// validateOverlaps reports every platform whose selector matches a krew platform an earlier one matches:
// krew would install whichever comes first.
func validateOverlaps(ps []Platform, fp *field.Path) field.ErrorList {
	var errs field.ErrorList
	owner := map[osArch]int{}
	for i, pl := range ps {
		if pl.Selector == nil {
			continue
		}
		s, err := metav1.LabelSelectorAsSelector(pl.Selector)
		if err != nil {
			continue // reported by validateSelector
		}
		var shared []string
		first := -1
		for _, m := range matchedPlatforms(s) {
			if j, ok := owner[m]; ok {
				shared = append(shared, m.String())
				if first < 0 {
					first = j
				}
				continue
			}
			owner[m] = i
		}
		if len(shared) > 0 {
			errs = append(errs, field.Invalid(fp.Index(i).Child("selector"), metav1.FormatLabelSelector(pl.Selector),
				fmt.Sprintf("overlaps %s: both match %s", fp.Index(first).Child("selector"), strings.Join(shared, ", "))))
		}
	}
	return errs
}

// entry is an archive member or a file installed from it.
type entry struct{ dir bool }

// validateArchive reads the archive pl.URI names from archives and checks what krew checks when it
// downloads and installs it.
func validateArchive(pl *Platform, fp *field.Path, archives fs.FS) field.ErrorList {
	uriPath := fp.Child("uri")
	u, err := url.Parse(pl.URI)
	if err != nil {
		return field.ErrorList{field.Invalid(uriPath, pl.URI, err.Error())}
	}
	name := path.Base(u.Path)
	if !strings.HasSuffix(name, ".tar.gz") && !strings.HasSuffix(name, ".zip") {
		return field.ErrorList{field.Invalid(uriPath, pl.URI, "must name a .tar.gz or .zip archive")}
	}
	data, err := fs.ReadFile(archives, name)
	if err != nil {
		return field.ErrorList{field.Invalid(uriPath, pl.URI, "archive not found: "+err.Error())}
	}
	sum := sha256.Sum256(data)
	if got := hex.EncodeToString(sum[:]); got != pl.Sha256 {
		return field.ErrorList{field.Invalid(fp.Child("sha256"), pl.Sha256, fmt.Sprintf("%s has sha256 %s", name, got))}
	}
	entries, err := archiveEntries(data)
	if err != nil {
		return field.ErrorList{field.Invalid(uriPath, pl.URI, fmt.Sprintf("%s: %v", name, err))}
	}
	installed, errs := install(entries, pl.Files, fp.Child("files"), name)
	if len(errs) > 0 {
		return errs
	}
	bin := path.Clean(strings.ReplaceAll(pl.Bin, `\`, "/"))
	if e, ok := installed[bin]; !ok || e.dir {
		errs = append(errs, field.Invalid(fp.Child("bin"), pl.Bin, fmt.Sprintf("no such file once %s is installed (%s)", name, listEntries(installed))))
	}
	if !hasLicense(installed) {
		errs = append(errs, field.Invalid(fp.Child("files"), describeFiles(pl.Files), fmt.Sprintf("installing %s gives no license file (%s, or LICENSES*): %s",
			name, strings.Join(licenseNames, ", "), listEntries(installed))))
	}
	return errs
}

// archiveEntries lists a zip's or tar.gz's members (their type told by their content, as krew does):
// only regular files and directories, named inside the extraction directory. Parent directories are
// listed too.
func archiveEntries(data []byte) (map[string]entry, error) {
	entries := map[string]entry{}
	add := func(name string, dir bool) error {
		if strings.Contains(name, "..") || strings.HasPrefix(name, "/") || strings.HasPrefix(name, `\`) {
			return fmt.Errorf("entry %q: names with \"..\" or starting with / or \\ are refused", name)
		}
		name = path.Clean(strings.ReplaceAll(name, `\`, "/"))
		if name == "." {
			return nil
		}
		entries[name] = entry{dir: dir}
		for d := path.Dir(name); d != "."; d = path.Dir(d) {
			entries[d] = entry{dir: true}
		}
		return nil
	}
	switch t := http.DetectContentType(data); t {
	case "application/zip":
		zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
		if err != nil && !errors.Is(err, zip.ErrInsecurePath) { // insecure names are refused below
			return nil, err
		}
		for _, f := range zr.File {
			m := f.Mode()
			if !m.IsRegular() && !m.IsDir() {
				return nil, fmt.Errorf("entry %q is %s: only regular files and directories are extracted", f.Name, fileType(m))
			}
			if err := add(f.Name, m.IsDir()); err != nil {
				return nil, err
			}
		}
	case "application/x-gzip":
		gz, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, err
		}
		tr := tar.NewReader(gz)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil && !errors.Is(err, tar.ErrInsecurePath) { // insecure names are refused below
				return nil, err
			}
			switch h.Typeflag {
			case tar.TypeXGlobalHeader:
				continue
			case tar.TypeReg, tar.TypeDir:
			default:
				return nil, fmt.Errorf("entry %q is %s: only regular files and directories are extracted", h.Name, fileType(h.FileInfo().Mode()))
			}
			if err := add(h.Name, h.Typeflag == tar.TypeDir); err != nil {
				return nil, err
			}
		}
	default:
		return nil, fmt.Errorf("content is %s: krew extracts only zip and tar.gz", t)
	}
	return entries, nil
}

func fileType(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "a symlink"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	default:
		return "not a regular file (" + m.Type().String() + ")"
	}
}

// install gives the install directory's contents after krew's file operations on the extracted
// archive: a from naming an entry copies it to "to" (to "." keeps its base name); otherwise from is a
// glob and each match goes into the directory "to" under its base name. Directories move with their
// contents; nothing is copied twice. No operations means krew's default, every top-level entry to ".".
func install(entries map[string]entry, ops []FileOperation, fp *field.Path, archive string) (map[string]entry, field.ErrorList) {
	if ops == nil {
		ops = []FileOperation{{From: "*", To: "."}}
	}
	left := map[string]entry{}
	for k, v := range entries {
		left[k] = v
	}
	installed := map[string]entry{}
	move := func(from, to string) {
		for name, e := range left {
			rel, ok := strings.CutPrefix(name, from)
			if !ok || (rel != "" && !strings.HasPrefix(rel, "/")) {
				continue
			}
			delete(left, name)
			dst := path.Join(to, rel)
			installed[dst] = e
			for d := path.Dir(dst); d != "."; d = path.Dir(d) {
				installed[d] = entry{dir: true}
			}
		}
	}
	var errs field.ErrorList
	for j, op := range ops {
		from := path.Clean(strings.ReplaceAll(op.From, `\`, "/"))
		if _, ok := left[from]; ok {
			to := op.To
			if to == "." {
				to = path.Base(from)
			}
			move(from, to)
			continue
		}
		if _, err := path.Match(from, ""); err != nil {
			errs = append(errs, field.Invalid(fp.Index(j).Child("from"), op.From, err.Error()))
			continue
		}
		var matches []string
		for name := range left {
			if ok, _ := path.Match(from, name); ok {
				matches = append(matches, name)
			}
		}
		if len(matches) == 0 {
			errs = append(errs, field.Invalid(fp.Index(j).Child("from"), op.From, fmt.Sprintf("matches nothing in %s", archive)))
			continue
		}
		sort.Strings(matches)
		for _, m := range matches {
			move(m, path.Join(op.To, path.Base(m)))
		}
	}
	return installed, errs
}

// describeFiles shows file operations as "from -> to, ...".
func describeFiles(ops []FileOperation) string {
	if ops == nil {
		return "(omitted: * -> .)"
	}
	s := make([]string, len(ops))
	for i, op := range ops {
		s[i] = op.From + " -> " + op.To
	}
	return strings.Join(s, ", ")
}

func hasLicense(installed map[string]entry) bool {
	for name := range installed {
		if strings.Contains(name, "/") {
			continue
		}
		n := strings.ToLower(name)
		if contains(licenseNames, n) || strings.HasPrefix(n, "licenses") {
			return true
		}
	}
	return false
}

func listEntries(m map[string]entry) string {
	if len(m) == 0 {
		return "nothing installed"
	}
	names := make([]string, 0, len(m))
	for n, e := range m {
		if e.dir {
			n += "/"
		}
		names = append(names, n)
	}
	sort.Strings(names)
	return "installed: " + strings.Join(names, ", ")
}
