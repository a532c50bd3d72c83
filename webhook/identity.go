package webhook

import (
	"context"
	"net/http"
)

type callerKey struct{}

// withCaller records in ctx whether the review came over a connection whose client certificate the
// server verified (serve --client-ca-file): only then is the review known to come from the API
// server, and only then may its namespace be trusted to choose whose pull secrets are read.
func withCaller(ctx context.Context, r *http.Request) context.Context {
	return withVerifiedCaller(ctx, r.TLS != nil && len(r.TLS.VerifiedChains) > 0)
}

func withVerifiedCaller(ctx context.Context, verified bool) context.Context {
	return context.WithValue(ctx, callerKey{}, verified)
}

// callerVerified reports what withCaller recorded; false when nothing was.
func callerVerified(ctx context.Context) bool {
	v, _ := ctx.Value(callerKey{}).(bool)
	return v
}
