package e2eutil

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// DeploymentArgs are the arguments of the chart's wincompat container as installed.
func DeploymentArgs(t *testing.T, c client.Client) []string {
	t.Helper()
	var d appsv1.Deployment
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: OwnNamespace, Name: "wincompat"}, &d); err != nil {
		t.Fatal(err)
	}
	return d.Spec.Template.Spec.Containers[0].Args
}

// PolicyConfigMap is the policy file the chart installed in ConfigMap name.
func PolicyConfigMap(t *testing.T, c client.Client, name string) string {
	t.Helper()
	var cm corev1.ConfigMap
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: OwnNamespace, Name: name}, &cm); err != nil {
		t.Fatal(err)
	}
	return cm.Data["policy.yaml"]
}
