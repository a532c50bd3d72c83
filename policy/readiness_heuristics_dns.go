package policy

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// A Windows pod's DNS client has one search suffix, its namespace's <namespace>.svc.<cluster domain>,
// and takes every name with a dot as fully qualified: it resolves a Service's bare name and its full
// name, and none of the names in between (<name>.<namespace>, <name>.<namespace>.svc). Of those, only
// <name>.<namespace>.svc can be told from a name outside the cluster: <name>.<namespace> is spelled like
// example.com. So the forms recognised are names whose last label is svc, and only where the pod
// connects to them: a URL, a gRPC dns:/// target, or host:port. A bare name is left alone, since it
// may be a certificate's name (cert-manager's --dynamic-serving-dns-names, ingress-nginx's --host).

// serviceNameForm is one row of the table of places a partial Service name is recognised in.
type serviceNameForm struct {
	form    string
	example string
}

// serviceNameForms documents what matchServiceToken recognises, in its order; the tests hold every
// example to it.
var serviceNameForms = []serviceNameForm{
	{"a URL: scheme://[user@]host[:port][/...]", "http://grafana.monitoring.svc:3000/api"},
	{"a gRPC DNS target: dns:///host[:port]", "dns:///etcd.db.svc:2379"},
	{"host:port[/...]", "redis-master.cache.svc:6379"},
}

// partialServiceNames finds container env values, commands and args that connect to a Service by a
// partial name (<name>.<namespace>.svc, with a port or in a URL), which a Windows pod cannot resolve.
// One finding per field: the env var by name, command and args by index. The value recorded is the
// host and port alone, never the whole field, which may carry a password in a URL.
func partialServiceNames(spec *corev1.PodSpec) []readinessFinding {
	var found findingList
	eachContainer(spec, func(at containerAt, c *corev1.Container) bool {
		for _, e := range c.Env {
			if name, ok := findPartialServiceName(e.Value); ok && !found.add(at.path(".env["+clipName(e.Name)+"].value"), recordString(name)) {
				return false
			}
		}
		for _, list := range [...]struct {
			field string
			argv  []string
		}{{"command", c.Command}, {"args", c.Args}} {
			for i, arg := range list.argv {
				if name, ok := findPartialServiceName(arg); ok && !found.add(indexed(at.path("."+list.field), i), recordString(name)) {
					return false
				}
			}
		}
		return true
	})
	return found
}

// findPartialServiceName returns the first host[:port] in s that names a Service partially. s is split
// into tokens at whitespace and at characters no URL authority holds unescaped ("--url=http://..." and
// "a:1,b:2" split too); each token is matched as a whole. Linear in len(s).
func findPartialServiceName(s string) (string, bool) {
	start := -1
	for i := 0; i <= len(s); i++ {
		if i < len(s) && !isNameSeparator(s[i]) {
			if start < 0 {
				start = i
			}
			continue
		}
		if start >= 0 {
			if name, ok := matchServiceToken(s[start:i]); ok {
				return name, true
			}
			start = -1
		}
	}
	return "", false
}

func isNameSeparator(b byte) bool {
	switch b {
	case ' ', '\t', '\n', '\r', '\v', '\f', ',', ';', '"', '\'', '`', '=', '<', '>', '|', '{', '}', '[', ']', '\\':
		return true
	}
	return false
}

// matchServiceToken matches one token against serviceNameForms and returns its host[:port].
func matchServiceToken(tok string) (string, bool) {
	if i := strings.Index(tok, "://"); i >= 0 {
		if !validScheme(tok[:i]) {
			return "", false
		}
		authority := tok[i+3:]
		if strings.EqualFold(tok[:i], "dns") {
			authority = strings.TrimPrefix(authority, "/") // dns:///name:port names no DNS server
		}
		if end := strings.IndexAny(authority, "/?#"); end >= 0 {
			authority = authority[:end]
		}
		if at := strings.LastIndexByte(authority, '@'); at >= 0 {
			authority = authority[at+1:] // user:password is not part of the name, nor recorded
		}
		host, port, hasPort := strings.Cut(authority, ":")
		if partialServiceHost(host) && (!hasPort || validPort(port)) {
			return authority, true
		}
		return "", false
	}
	if end := strings.IndexByte(tok, '/'); end >= 0 {
		tok = tok[:end]
	}
	host, port, hasPort := strings.Cut(tok, ":")
	if hasPort && validPort(port) && partialServiceHost(host) {
		return tok, true
	}
	return "", false
}

// validScheme accepts URL schemes, also nested ones such as jdbc:postgresql.
func validScheme(s string) bool {
	if s == "" || !isASCIILetter(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if b := s[i]; !isASCIILetter(b) && !isDigit(b) && b != '+' && b != '-' && b != '.' && b != ':' {
			return false
		}
	}
	return true
}

// validPort accepts a port number or a $(VAR) the kubelet expands.
func validPort(s string) bool {
	if isVarRef(s) {
		return true
	}
	if s == "" || len(s) > 5 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return true
}

// partialServiceHost says whether host is <name>.<namespace>.svc or <pod>.<name>.<namespace>.svc (a
// StatefulSet pod behind a headless Service), with or without a trailing dot: DNS labels, or $(VAR)
// references the kubelet expands (cert-manager-webhook.$(POD_NAMESPACE).svc).
func partialServiceHost(host string) bool {
	host = strings.TrimSuffix(host, ".")
	last := strings.LastIndexByte(host, '.')
	if last < 0 || !strings.EqualFold(host[last+1:], "svc") {
		return false
	}
	labels := 1 // svc
	for rest := host[:last]; ; {
		dot := strings.LastIndexByte(rest, '.')
		if !validLabel(rest[dot+1:]) {
			return false
		}
		labels++
		if dot < 0 {
			break
		}
		rest = rest[:dot]
	}
	return labels >= 3
}

// validLabel accepts a DNS label (RFC 1123, in any case: DNS ignores it) or a $(VAR) reference.
func validLabel(l string) bool {
	if isVarRef(l) {
		return true
	}
	if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
		return false
	}
	for i := 0; i < len(l); i++ {
		if b := l[i]; !isASCIILetter(b) && !isDigit(b) && b != '-' {
			return false
		}
	}
	return true
}

// isVarRef says whether s is exactly $(NAME), a reference the kubelet expands in env values, command
// and args.
func isVarRef(s string) bool {
	if len(s) < 4 || !strings.HasPrefix(s, "$(") || s[len(s)-1] != ')' {
		return false
	}
	for i := 2; i < len(s)-1; i++ {
		if b := s[i]; !isASCIILetter(b) && !isDigit(b) && b != '_' && b != '-' {
			return false
		}
	}
	return true
}

func isDigit(b byte) bool { return '0' <= b && b <= '9' }
