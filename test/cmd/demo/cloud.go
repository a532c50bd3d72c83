package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/v1/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/wincompat/wincompat/policy"
	"github.com/wincompat/wincompat/webhook/scheduling/registry/registrytest"
)

// cloudRegistry: issue 28, item 1. A Windows image in a private ECR repository, under the name EKS
// gives it, read by `wincompat mutate --resolve-images` with IRSA's web identity and no pull secret:
// STS, the ECR API and the registry are fakes on loopback (registrytest.Cloud) that accept only that
// identity's tokens, reached by the SDKs' own endpoint variables and, for the registry's real name, an
// HTTPS proxy on loopback. Without --image-cloud-credentials the same image is unreadable.
func (d *demo) cloudRegistry(ctx context.Context) error {
	dir := filepath.Join(d.work, "cloud")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	cloud, err := registrytest.StartCloud(dir)
	if err != nil {
		return err
	}
	defer cloud.Close()
	if _, err := cloud.Registry.PushIndex("shop/api", "1.4.2", types.OCIImageIndex, registrytest.Windows(build2022+".2227"), registrytest.Linux("amd64")); err != nil {
		return err
	}
	image := cloud.ECRHost + "/shop/api:1.4.2"
	d.section("A private ECR image, read with wincompat's workload identity (IRSA), no pull secret")
	pod := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: shopNamespace},
		Spec: corev1.PodSpec{OS: &corev1.PodOS{Name: corev1.Windows}, Containers: []corev1.Container{{Name: "api", Image: image}}}}
	raw, err := yaml.Marshal(pod)
	if err != nil {
		return err
	}
	file := filepath.Join(dir, "api.yaml")
	if err := os.WriteFile(file, raw, 0o600); err != nil {
		return err
	}
	// AWS_REGION as IRSA sets it: wincompat gives its identity only to the ECR registries of its regions.
	env := append(os.Environ(), "DOCKER_CONFIG="+dir, "HOME="+dir, "AWS_REGION="+ecrRegion(cloud.ECRHost))
	for k, v := range cloud.Env() {
		env = append(env, k+"="+v)
	}
	for _, clouds := range []string{"ecr", ""} {
		args := []string{"mutate", "-f", file, "--resolve-images", "--image-lookup-timeout", "10s", "--image-cloud-credentials=" + clouds}
		out, stderr, err := d.mutate(ctx, env, args)
		if err != nil {
			return err
		}
		build, source := out.Annotations[policy.AnnotationBuild], out.Annotations[policy.AnnotationBuildSource]
		if clouds != "" {
			if !strings.HasPrefix(build, build2022) || source != policy.SourceImageManifest {
				return fmt.Errorf("with ECR credentials wincompat mutate gave build %q from %q, want %s from the manifest\n%s", build, source, build2022, stderr)
			}
			if cloud.STS.Load() != 1 || cloud.ECRToken.Load() != 1 {
				return fmt.Errorf("STS asked %d times and ECR %d, want once each", cloud.STS.Load(), cloud.ECRToken.Load())
			}
			d.say("%s", image)
			d.say("identity: %s, by its projected token (AWS_ROLE_ARN, AWS_WEB_IDENTITY_TOKEN_FILE, as EKS sets them)", cloud.RoleARN)
			d.say("STS AssumeRoleWithWebIdentity %d, ECR GetAuthorizationToken %d; the registry took only that token", cloud.STS.Load(), cloud.ECRToken.Load())
			d.say("--image-cloud-credentials=ecr: build %s, from %s", strings.ReplaceAll(build, ",", " or "), source)
			continue
		}
		warning := strings.TrimSpace(stderr)
		if build != "" || !strings.Contains(warning, "not readable") {
			return fmt.Errorf("without cloud credentials wincompat mutate gave build %q, warning %q: want none, and the image unreadable", build, warning)
		}
		d.say("--image-cloud-credentials=  : no build, and the warning: %s", readableWarning(warning, cloud.ECRHost))
	}
	return nil
}

// readableWarning is the part of mutate's warnings that says why the image was not read, from its host.
func readableWarning(warnings, host string) string {
	for line := range strings.SplitSeq(warnings, "\n") {
		if i := strings.Index(line, host+": "); i >= 0 && strings.Contains(line, "not readable") {
			return line[i:]
		}
	}
	return warnings
}

// ecrRegion is the region of an ECR registry host (ACCOUNT.dkr.ecr.REGION.amazonaws.com).
func ecrRegion(host string) string {
	_, rest, _ := strings.Cut(host, ".dkr.ecr.")
	region, _, _ := strings.Cut(rest, ".")
	return region
}
