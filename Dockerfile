# syntax=docker/dockerfile:1
# Static binary on distroless, non-root, no shell. Build flags match the Makefile's `build` target.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY cmd ./cmd
COPY patch ./patch
COPY policy ./policy
COPY webhook ./webhook
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/wincompat ./cmd/wincompat

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/wincompat /wincompat
USER 65532:65532
ENTRYPOINT ["/wincompat"]
