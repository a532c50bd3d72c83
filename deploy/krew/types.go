package main

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The types of a krew plugin manifest, as krew's documentation describes them (apiVersion
// krew.googlecontainertools.github.com/v1alpha2, kind Plugin). They are written here because the krew
// module cannot be a dependency (README.md, "The rules checked"); the JSON names are the manifest's
// field names.

const (
	krewAPIVersion = "krew.googlecontainertools.github.com/v1alpha2"
	krewKind       = "Plugin"
	manifestExt    = ".yaml"
)

// Plugin is one krew plugin manifest: the file plugins/<name>.yaml of a krew index.
type Plugin struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`

	Spec PluginSpec `json:"spec"`
}

// PluginSpec says what the plugin is and where each platform downloads it from.
type PluginSpec struct {
	// Version is "v" followed by a semantic version.
	Version string `json:"version,omitempty"`
	// ShortDescription is the one line shown by "kubectl krew search".
	ShortDescription string `json:"shortDescription,omitempty"`
	// Description explains the plugin at a high level.
	Description string `json:"description,omitempty"`
	// Caveats are shown once, after the first install.
	Caveats string `json:"caveats,omitempty"`
	// Homepage is usually the plugin's repository.
	Homepage string `json:"homepage,omitempty"`

	Platforms []Platform `json:"platforms,omitempty"`
}

// Platform is one download for the os/arch pairs its selector matches (labels "os" and "arch").
type Platform struct {
	// URI is the archive (.tar.gz or .zip) to download.
	URI string `json:"uri,omitempty"`
	// Sha256 is the archive's SHA-256, lowercase hex.
	Sha256 string `json:"sha256,omitempty"`
	// Selector matches the labels os and arch of the machine krew runs on.
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
	// Files copies files out of the extracted archive into the install directory; krew's default when
	// it is omitted is every top-level entry, [{from: "*", to: "."}].
	Files []FileOperation `json:"files,omitempty"`
	// Bin is the executable's path in the install directory; krew links kubectl-<name> to it.
	Bin string `json:"bin,omitempty"`
}

// FileOperation copies From (a path or glob in the extracted archive) to To (a path in the install
// directory; "." keeps the base name).
type FileOperation struct {
	From string `json:"from,omitempty"`
	To   string `json:"to,omitempty"`
}
