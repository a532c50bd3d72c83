package registry

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"time"
)

// Pod authors choose the hosts a registry lookup connects to, and so does any registry they name,
// through redirects and token realms. The egress policy is checked on the address actually dialled,
// after DNS, so that a name that resolves (or later re-resolves) to a forbidden address is refused.

// addrClass is what the egress policy makes of one IP address.
type addrClass int

const (
	classPublic addrClass = iota
	// classPrivate: loopback, unspecified, RFC 1918, unique local, CGNAT and benchmarking addresses;
	// dialled only with Config.AllowPrivateNetworks.
	classPrivate
	// classForbidden: link-local, cloud metadata services, multicast and reserved addresses; never
	// dialled.
	classForbidden
)

func mustPrefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

// forbiddenPrefixes are never dialled, whatever the operator allows. Checked before privatePrefixes:
// some metadata addresses sit inside private ranges.
var forbiddenPrefixes = mustPrefixes(
	// Link-local: AWS, GCP, Azure, Oracle, DigitalOcean and OpenStack metadata (169.254.169.254), ECS
	// task metadata (169.254.170.2), and whatever a node's link-local neighbours serve.
	"169.254.0.0/16", "fe80::/10",
	"fd00:ec2::254/128",       // AWS instance metadata over IPv6 (inside fc00::/7)
	"fd00:ec2::23/128",        // the EKS Pod Identity agent over IPv6: it hands out the pods' AWS credentials
	"100.100.100.200/32",      // Alibaba Cloud metadata (inside 100.64.0.0/10)
	"168.63.129.16/32",        // Azure WireServer (a public address reachable only from Azure hosts)
	"192.0.0.0/24",            // IETF protocol assignments; 192.0.0.192 was Oracle Cloud Classic's metadata
	"0.0.0.0/8",               // "this network": 0.0.0.0 itself dials the local host on Linux
	"224.0.0.0/4", "ff00::/8", // multicast
	"240.0.0.0/4",   // reserved, and broadcast
	"::/96",         // IPv4-compatible IPv6 (deprecated); :: and ::1 are handled first
	"100::/64",      // discard-only
	"2001:db8::/32", // documentation
)

// privatePrefixes are dialled only when the operator allows private networks.
var privatePrefixes = mustPrefixes(
	"127.0.0.0/8", "::1/128", // loopback: wincompat's own pod
	"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", // RFC 1918
	"100.64.0.0/10", // CGNAT, used by some clusters for pods and services
	"198.18.0.0/15", // benchmarking
	"fc00::/7",      // unique local
	"fec0::/10",     // site-local (deprecated)
)

// Prefixes that embed an IPv4 address, which is what they reach: NAT64 (RFC 6052 well-known and RFC
// 8215 local-use) and 6to4.
var (
	nat64     = mustPrefixes("64:ff9b::/96", "64:ff9b:1::/48")
	sixToFour = netip.MustParsePrefix("2002::/16")
)

// classify says what the policy makes of a.
func classify(a netip.Addr) addrClass {
	a = a.Unmap()
	if a.Zone() != "" {
		// A zone names an interface: only link-local addresses carry one.
		return classForbidden
	}
	if a.IsUnspecified() || a.IsLoopback() {
		return classPrivate
	}
	if a.Is6() {
		b := a.As16()
		for _, p := range nat64 {
			if p.Contains(a) {
				return classify(netip.AddrFrom4([4]byte(b[12:16])))
			}
		}
		if sixToFour.Contains(a) {
			return classify(netip.AddrFrom4([4]byte(b[2:6])))
		}
	}
	for _, p := range forbiddenPrefixes {
		if p.Contains(a) {
			return classForbidden
		}
	}
	for _, p := range privatePrefixes {
		if p.Contains(a) {
			return classPrivate
		}
	}
	return classPublic
}

// egressError is a connection the egress policy refused.
type egressError struct {
	addr      netip.Addr
	forbidden bool
}

func (e *egressError) Error() string {
	if e.forbidden {
		return fmt.Sprintf("egress to %s refused: link-local, metadata and reserved addresses are never contacted", e.addr)
	}
	return fmt.Sprintf("egress to %s refused: private and loopback addresses need --image-allow-private-networks (the chart's imageResolver.allowPrivateNetworks), for a registry or a mirror alike", e.addr)
}

// egress dials registries under the policy.
type egress struct {
	allowPrivate bool
	// lookup resolves a host name; tests map names to addresses of their choosing.
	lookup func(ctx context.Context, host string) ([]netip.Addr, error)
	// dial connects to an address the policy allowed; tests replace it to dial nothing.
	dial func(ctx context.Context, network, address string) (net.Conn, error)
}

func newEgress(allowPrivate bool) *egress {
	e := &egress{allowPrivate: allowPrivate}
	e.lookup = func(ctx context.Context, host string) ([]netip.Addr, error) {
		return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	}
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second,
		// The address the socket connects to, checked once more: whatever path led here (a future
		// transport's own resolution, say), no forbidden address is connected to.
		Control: func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("egress: unexpected address %q", address)
			}
			return e.check(ap.Addr())
		}}
	e.dial = d.DialContext
	return e
}

func (e *egress) check(a netip.Addr) error {
	switch classify(a) {
	case classForbidden:
		return &egressError{addr: a, forbidden: true}
	case classPrivate:
		if !e.allowPrivate {
			return &egressError{addr: a}
		}
	}
	return nil
}

// DialContext resolves address's host itself, so that every address is checked before it is dialled,
// and dials the allowed ones in turn.
func (e *egress) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else if addrs, err = e.lookup(ctx, host); err != nil {
		return nil, err
	}
	var errs []error
	for _, a := range addrs {
		if err := e.check(a); err != nil {
			errs = append(errs, err)
			continue
		}
		conn, err := e.dial(ctx, network, net.JoinHostPort(a.Unmap().String(), port))
		if err == nil {
			return conn, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	if len(errs) == 0 {
		return nil, &net.DNSError{Err: "no addresses", Name: host, IsNotFound: true}
	}
	// A refusal by the policy is the first error to tell: it is what the operator can change.
	for _, err := range errs {
		var eg *egressError
		if errors.As(err, &eg) {
			return nil, &net.OpError{Op: "dial", Net: network, Err: err}
		}
	}
	return nil, errs[0]
}
