package main

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

const (
	homepage = "https://github.com/wincompat/wincompat"

	shortDescription = "Rewrite and audit Windows pods in mixed clusters"

	description = `Off-the-shelf charts give Windows pods Linux-only fields (runAsUser, fsGroup,
seccompProfile, capabilities, ...) that the API server rejects, and no nodeSelector,
toleration or RuntimeClass for the Windows nodes. wincompat rewrites them instead:
it strips what Windows cannot honour, injects the scheduling for the right Windows
build and records every change. The plugin runs the same rewrite offline on your
manifests, and reports what the in-cluster webhook changed and what needs attention.
`

	caveats = `The admission webhook is not installed by this plugin: it runs in the cluster and is
installed with the Helm chart deploy/helm/wincompat (see
https://github.com/wincompat/wincompat#install-it). The plugin is the CLI:

  kubectl wincompat mutate   rewrite manifests offline (files, directories or stdin)
  kubectl wincompat audit    report what the webhook changed and what needs attention
  kubectl wincompat nodes    show the Windows builds, taints and RuntimeClasses
  kubectl wincompat policy   validate a policy file and print the effective policy

Run "kubectl wincompat <command> -h" for its flags. audit and nodes take kubectl's
flags (--context, --as, -n, ...). For "kubectl wincompat <TAB>" (kubectl 1.26 and
later), link the plugin as kubectl_complete-wincompat beside it:

  ln -s kubectl-wincompat "${KREW_ROOT:-$HOME/.krew}/bin/kubectl_complete-wincompat"
`
)

// defaultBaseURL is where a release's archives are downloaded from: its GitHub release.
func defaultBaseURL(version string) string {
	return homepage + "/releases/download/" + version + "/"
}

// buildManifest makes the plugin manifest of a release: one platform per entry of want, each from its
// archive's line in sums (other lines are ignored). It fails if version is not "v" + semver, if an
// archive of want is missing from sums, or if sums lists an archive of this version for a platform not
// in want (a manifest that silently left out a built platform).
func buildManifest(version, baseURL string, sums []checksum, want []osArch) (*Plugin, error) {
	if err := checkVersion(version); err != nil {
		return nil, fmt.Errorf("version: %w", err)
	}
	if baseURL == "" {
		baseURL = defaultBaseURL(version)
	}
	base, err := url.Parse(baseURL)
	if err != nil || !base.IsAbs() || base.Host == "" {
		return nil, fmt.Errorf("base URL %q is not an absolute URL", baseURL)
	}
	if !strings.HasSuffix(base.Path, "/") {
		base.Path += "/"
	}
	byName := map[string]string{}
	for _, c := range sums {
		byName[c.Name] = c.Sum
	}
	wanted := map[string]bool{}
	p := &Plugin{
		TypeMeta:   metav1.TypeMeta{APIVersion: krewAPIVersion, Kind: krewKind},
		ObjectMeta: metav1.ObjectMeta{Name: pluginName},
		Spec: PluginSpec{
			Version:          version,
			Homepage:         homepage,
			ShortDescription: shortDescription,
			Description:      description,
			Caveats:          caveats,
		},
	}
	for _, pl := range sortPlatforms(want) {
		name := archiveName(version, pl)
		wanted[name] = true
		sum, ok := byName[name]
		if !ok {
			return nil, fmt.Errorf("checksums list no %s (the %s archive)", name, pl)
		}
		bin := binName(pl.OS)
		p.Spec.Platforms = append(p.Spec.Platforms, Platform{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"os": pl.OS, "arch": pl.Arch}},
			URI:      base.JoinPath(name).String(),
			Sha256:   sum,
			Bin:      bin,
			Files:    []FileOperation{{From: bin, To: "."}, {From: licenseName, To: "."}},
		})
	}
	archiveRE := regexp.MustCompile(`^` + regexp.QuoteMeta(project+"_"+version+"_") + `[a-z0-9]+_[a-z0-9]+\.(tar\.gz|zip)$`)
	for _, c := range sums {
		if archiveRE.MatchString(c.Name) && !wanted[c.Name] {
			return nil, fmt.Errorf("checksums list %s, which is not one of the platforms asked for (%s)", c.Name, platformList(want))
		}
	}
	return p, nil
}

// sortPlatforms returns ps in releasePlatforms' order, without duplicates.
func sortPlatforms(ps []osArch) []osArch {
	in := map[osArch]bool{}
	for _, p := range ps {
		in[p] = true
	}
	var out []osArch
	for _, p := range releasePlatforms {
		if in[p] {
			out = append(out, p)
		}
	}
	return out
}

// renderManifest is the manifest's YAML.
func renderManifest(p *Plugin) ([]byte, error) {
	return yaml.Marshal(p)
}

// decodeManifest reads a manifest, refusing fields krew does not know.
func decodeManifest(data []byte) (*Plugin, error) {
	var p Plugin
	if err := yaml.UnmarshalStrict(data, &p); err != nil {
		return nil, err
	}
	return &p, nil
}
