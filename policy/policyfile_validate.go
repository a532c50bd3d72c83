package policy

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var validEffects = []string{string(corev1.TaintEffectNoSchedule), string(corev1.TaintEffectPreferNoSchedule), string(corev1.TaintEffectNoExecute)}

// Validate returns what is wrong with p, each problem at the path of its key in a policy file and saying
// what to write instead.
func (p *Policy) Validate() field.ErrorList {
	var errs field.ErrorList
	invalid := func(path *field.Path, value any, detail string, msgs ...string) {
		if len(msgs) > 0 {
			detail += ": " + strings.Join(msgs, "; ")
		}
		errs = append(errs, field.Invalid(path, value, detail))
	}
	oneOf := func(path *field.Path, value string, allowed ...string) {
		if !slices.Contains(allowed, value) {
			errs = append(errs, field.NotSupported(path, value, allowed))
		}
	}
	if p.Arch != "" && p.Arch != "amd64" && p.Arch != "arm64" {
		invalid(field.NewPath("arch"), p.Arch, `use amd64, arm64 or "" (do not pin)`)
	}
	if msgs := validation.IsDNS1123Label(p.RuntimeClassHandler); len(msgs) > 0 {
		invalid(field.NewPath("runtimeClassHandler"), p.RuntimeClassHandler, "a RuntimeClass handler is a DNS label such as runhcs-wcow-process", msgs...)
	}
	oneOf(field.NewPath("runtimeClassesFor"), p.RuntimeClassesFor, RuntimeClassesForCatalog, RuntimeClassesForPresent)
	if p.WindowsCompatibility != CompatibilityCompatible && p.WindowsCompatibility != CompatibilityExact {
		invalid(field.NewPath("windowsCompatibility"), p.WindowsCompatibility, "use "+CompatibilityCompatible+" (containerd 1.7.6 and later: a 2025 node runs 2022 images) or "+CompatibilityExact+" (the image's build must equal the node's)")
	}
	oneOf(field.NewPath("imagesWithoutWindows"), p.ImagesWithoutWindows, ImagesWithoutWindowsWarn, ImagesWithoutWindowsDeny)
	if p.Mode != ModeEnforce && p.Mode != ModeWarn {
		invalid(field.NewPath("mode"), p.Mode, "use "+ModeEnforce+" (change objects) or "+ModeWarn+" (change nothing, warn what would change)")
	}
	if p.NonRootUserName != "" && !validUserName(p.NonRootUserName) {
		invalid(field.NewPath("nonRootUserName"), p.NonRootUserName, `not a Windows user name: use USER or DOMAIN\USER, USER at most 104 characters and none of "/\:;|=,+*?<>@[]`)
	}
	if admin, why := adminUser(p.NonRootUserName); admin {
		invalid(field.NewPath("nonRootUserName"), p.NonRootUserName, "an administrator account ("+why+"): every rule that sets this user does so to keep a pod from running as one; use ContainerUser or another non-admin user")
	}
	if p.UserForRunAsNonRoot && p.NonRootUserName == "" {
		invalid(field.NewPath("userForRunAsNonRoot"), p.UserForRunAsNonRoot, "names nonRootUserName, which is empty: set nonRootUserName (ContainerUser) or turn this off")
	}
	if d := p.MemoryLimits.Default; d != "" {
		if _, msg := memoryLimit(d); msg != "" {
			invalid(field.NewPath("memoryLimits", "default"), d, msg)
		}
	}
	for i, t := range p.WindowsNodeTaints {
		at := field.NewPath("windowsNodeTaints").Index(i)
		if msgs := validation.IsQualifiedName(t.Key); len(msgs) > 0 {
			invalid(at.Child("key"), t.Key, "not a valid taint key", msgs...)
		}
		if msgs := validation.IsValidLabelValue(t.Value); len(msgs) > 0 {
			invalid(at.Child("value"), t.Value, "not a valid taint value", msgs...)
		}
		oneOf(at.Child("effect"), string(t.Effect), validEffects...)
	}
	for _, l := range []struct {
		key   string
		names []string
	}{{"excludedNamespaces", p.ExcludedNamespaces}, {"linuxByDefaultExcludedNamespaces", p.LinuxByDefaultExcludedNamespaces}} {
		for i, ns := range l.names {
			if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
				invalid(field.NewPath(l.key).Index(i), ns, "not a namespace name", msgs...)
			}
		}
	}
	for i, name := range p.InjectorOptOuts {
		if _, ok := injectorNamed(name); !ok {
			var known []string
			for _, in := range linuxOnlyInjectors {
				known = append(known, in.Name)
			}
			invalid(field.NewPath("injectorOptOuts").Index(i), name, "not an injector wincompat knows: use some of "+strings.Join(known, ", ")+", or [] for none")
		}
	}
	errs = append(errs, p.validateBuilds()...)
	errs = append(errs, p.validateMirrors()...)
	return errs
}

// validateBuilds checks the catalog: build numbers, RuntimeClass names, and that every name (and image
// tag) points to one build, case aside, as lookupBuild reads them.
func (p *Policy) validateBuilds() field.ErrorList {
	var errs field.ErrorList
	builds := field.NewPath("builds")
	if len(p.Builds) == 0 {
		errs = append(errs, field.Required(builds, "the catalog is empty: list at least one build (see the defaults)"))
	}
	seen := map[string]string{}
	for i, b := range p.Builds {
		at := builds.Index(i)
		if !buildNumber.MatchString(b.Number) {
			errs = append(errs, field.Invalid(at.Child("build"), b.Number, "not a Windows build number like 10.0.20348"))
		}
		if b.RuntimeClass != "" {
			if msgs := validation.IsDNS1123Subdomain(b.RuntimeClass); len(msgs) > 0 {
				errs = append(errs, field.Invalid(at.Child("runtimeClassName"), b.RuntimeClass, "not a valid RuntimeClass name: "+strings.Join(msgs, "; ")))
			}
		}
		check := func(path *field.Path, name string) {
			lower := strings.ToLower(name)
			if other, dup := seen[lower]; dup && other != b.Number {
				errs = append(errs, field.Invalid(path, name, "also names build "+other+": every name must point to one build"))
			}
			seen[lower] = b.Number
		}
		check(at.Child("build"), b.Number)
		for j, n := range b.Names {
			check(at.Child("names").Index(j), n)
		}
		for j, tag := range b.ImageTags {
			check(at.Child("imageTags").Index(j), tag)
		}
	}
	if p.DefaultBuild != "" {
		if _, ok := p.lookupBuild(p.DefaultBuild); !ok {
			errs = append(errs, field.Invalid(field.NewPath("defaultBuild"), p.DefaultBuild, "not in the catalog: use one of "+p.buildNames()))
		}
	}
	return errs
}
