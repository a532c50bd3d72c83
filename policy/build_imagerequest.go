package policy

// ImageRequest is what one review asks of the registries before Decide: the answers come back as
// Facts.Images. It is a policy type, not the registry client's, so that the admission core can ask
// through an interface without linking the client and its cloud SDKs.
type ImageRequest struct {
	// Namespace is the pod's namespace, where its pull secrets are.
	Namespace string
	// PullSecrets are the names of the pod's imagePullSecrets (ImageLookup.PullSecrets), read only
	// when the registry client is given a way to read them, and only the first few.
	PullSecrets []string
	// Authenticated says the review came from a caller known to be the API server, so that Namespace
	// is the pod's own: the pod's pull secrets are read only then.
	Authenticated bool
	// Images are references as the pod spells them; duplicates are answered once.
	Images []string
	// Mirrors are the policy's registryMirrors: where each registry's images are read.
	Mirrors []RegistryMirror
}
