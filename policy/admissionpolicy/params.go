package admissionpolicy

import (
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/wincompat/wincompat/policy"
)

// The policy's values reach the admission policies as params: a ConfigMap the bindings name
// (paramRef), whose data Params writes and the CEL reads. The policies themselves are then the same for
// every policy, so the chart installs them (and their bindings) as files, and wincompat's ServiceAccount
// needs no write access to admission policies: no admission control sees such writes, so RBAC is all
// that bounds them, and it cannot bound their content.
//
// Each value is a string CEL reads without parsing where it can: booleans "true" or "false", strings as
// they are, lists joined by commas (none of their items can hold one in a valid policy). A key that is
// missing is an evaluation error, and the policies fail closed (failurePolicy Fail).
const (
	// paramVersion: Options.Version, the wincompat.io/admission-policy marker.
	paramVersion = "version"
	// paramInferOS: inferOSFromNodeSelector.
	paramInferOS = "inferOSFromNodeSelector"
	// paramPodSecurityRestricted: podSecurityRestricted.
	paramPodSecurityRestricted = "podSecurityRestricted"
	// paramNonRootUserName: nonRootUserName; "" turns its rules off.
	paramNonRootUserName = "nonRootUserName"
	// paramUserForRunAsNonRoot: userForRunAsNonRoot.
	paramUserForRunAsNonRoot = "userForRunAsNonRoot"
	// paramMemoryFromRequests: memoryLimits.fromRequests.
	paramMemoryFromRequests = "memoryLimitsFromRequests"
	// paramDefaultMemoryLimit: memoryLimits.default as the API server writes a quantity
	// (Policy.DefaultMemoryLimit), or "".
	paramDefaultMemoryLimit = "memoryLimitsDefault"
	// paramInjectorOptOuts: injectorOptOuts joined by commas, "" for none.
	paramInjectorOptOuts = "injectorOptOuts"
	// paramWindowsNodeTaints: windowsNodeTaints, each key=value:effect (the value may be empty), joined
	// by commas; "" for none. Keys, values and effects of a valid policy hold no comma, colon or equals
	// sign, and need no escaping in JSON.
	paramWindowsNodeTaints = "windowsNodeTaints"
	// paramGate: "true" where a Windows pod that nothing pins to a build waits behind
	// policy.SchedulingGate for the webhook or the leader to decide it; "false" with Options.NoGate
	// (imageResolver.mode fallback, where the webhook never gates either).
	paramGate = "gate"
)

// Params is the data of the params ConfigMap that makes the policies do what pol (and opts, for the gate)
// says.
func Params(pol *policy.Policy, opts Options) map[string]string {
	var taints []string
	for _, t := range pol.WindowsNodeTaints {
		taints = append(taints, taintCode(t))
	}
	return map[string]string{
		paramVersion:               opts.Version,
		paramInferOS:               boolParam(pol.InferOSFromNodeSelector),
		paramPodSecurityRestricted: boolParam(pol.PodSecurityRestricted),
		paramNonRootUserName:       pol.NonRootUserName,
		paramUserForRunAsNonRoot:   boolParam(pol.UserForRunAsNonRoot),
		paramMemoryFromRequests:    boolParam(pol.MemoryLimits.FromRequests),
		paramDefaultMemoryLimit:    pol.DefaultMemoryLimit(),
		paramInjectorOptOuts:       strings.Join(pol.InjectorOptOuts, ","),
		paramWindowsNodeTaints:     strings.Join(taints, ","),
		paramGate:                  boolParam(!opts.NoGate),
	}
}

// taintCode is taint t as the record writes a toleration of it (policy.RecordedTo): key=value:effect.
func taintCode(t corev1.Taint) string {
	return t.Key + "=" + t.Value + ":" + string(t.Effect)
}

func boolParam(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

// param is the CEL of the params' value at key.
func param(key string) string { return "params.data." + key }

// paramOn is the CEL bool of the boolean param at key.
func paramOn(key string) string { return "(" + param(key) + " == 'true')" }

const (
	// userCEL is the policy's nonRootUserName, for the patch.
	userCEL = "params.data." + paramNonRootUserName
	// userSet is true when the policy names a non-root user: its rules are on.
	userSet = "(" + userCEL + " != '')"
)

// userJSON is the policy's nonRootUserName as a JSON string, for the record. A valid name may hold a
// backslash (DOMAIN\USER), so it is escaped as the object's strings are.
func userJSON() jsonValue { return escaped(userCEL).str() }

// injectorNamed is true when the policy's injectorOptOuts names the injector name.
func injectorNamed(name string) string {
	return "(',' + " + param(paramInjectorOptOuts) + " + ',').contains(" + quote(","+name+",") + ")"
}

// taintsExpr is the taints variable: the policy's windowsNodeTaints, each a map of its key, value,
// effect and code (key=value:effect, how the record writes its toleration).
var taintsExpr = "params.data." + paramWindowsNodeTaints + " == '' ? [] :\n  params.data." + paramWindowsNodeTaints +
	".split(',').map(c, {\"key\": c.split(':')[0].split('=')[0], \"value\": c.split(':')[0].split('=')[1], \"effect\": c.split(':')[1], \"code\": c})"
