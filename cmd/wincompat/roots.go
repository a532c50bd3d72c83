package main

// The container image ships no CA bundle (deploy/image/README.md), yet the image resolver reads
// manifests from registries over TLS. These are Mozilla's roots compiled in; Go uses them only when
// the system has none, so a bundle at SSL_CERT_FILE or in /etc/ssl/certs (a mounted volume, a distro
// base) still wins. Keep the module current: a stale copy misses new roots and keeps distrusted ones.
import _ "golang.org/x/crypto/x509roots/fallback"
