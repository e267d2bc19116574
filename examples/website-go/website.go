// Package website is the Go port of examples/website: it turns each Website (go.example.com/v1,
// the CRD in samples/crd.yaml) into a Deployment and a Service of the same name, owned by the
// Website so they are garbage collected with it, and reports what it applied in the Website's
// status.
package website

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"reconcile-host/guest"
	"reconcile-host/guest/client"
)

const (
	// APIVersion and Kind of the Website. The reconciler writes the apiVersion of the Website it
	// read, so the same component serves the CRD installed under another group (manifest `for`).
	APIVersion = "go.example.com/v1"
	Kind       = "Website"
	// nameLabel is the label on the Deployment, its pods and the Service.
	nameLabel = "app.kubernetes.io/name"
	// recheck is how often to look again without a change.
	recheck = 60 * time.Second
)

// Website is a Website as far as this reconciler reads it.
type Website struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              WebsiteSpec `json:"spec"`
}

// WebsiteSpec is what the user asks for: which image to serve, with how many replicas.
type WebsiteSpec struct {
	Image    string `json:"image"`
	Replicas int32  `json:"replicas"`
}

func init() { guest.Register(Reconcile) }

// Reconcile applies the Website's Deployment, Service and status, and looks again in a minute.
func Reconcile(ctx context.Context, req guest.Request) (guest.Action, error) {
	website, err := guest.Object[Website](req)
	if err != nil {
		return guest.Action{}, err
	}
	if website == nil {
		// Deleted: the Deployment and Service go by garbage collection (ownerReferences).
		return guest.Done(), nil
	}
	name, namespace := req.Name(), req.Namespace()
	if namespace == "" {
		return guest.Action{}, fmt.Errorf("a Website is namespaced")
	}
	owner, err := ownerReference(website)
	if err != nil {
		return guest.Action{}, err
	}
	if _, err := client.Apply(deployment(website, namespace, owner)); err != nil {
		return guest.Action{}, fmt.Errorf("failed to apply the Deployment: %w", err)
	}
	if _, err := client.Apply(service(name, namespace, owner)); err != nil {
		return guest.Action{}, fmt.Errorf("failed to apply the Service: %w", err)
	}
	status := map[string]any{
		"apiVersion": apiVersion(website),
		"kind":       Kind,
		"metadata":   map[string]any{"name": name, "namespace": namespace},
		"status": map[string]any{
			"observedGeneration": website.Generation,
			"image":              website.Spec.Image,
			"replicas":           website.Spec.Replicas,
			"deployment":         name,
			"service":            name,
		},
	}
	if _, err := client.ApplyStatus(status); err != nil {
		return guest.Action{}, fmt.Errorf("failed to apply the Website's status: %w", err)
	}
	slog.DebugContext(ctx, fmt.Sprintf("%s serves %s with %d replicas", req.Target, website.Spec.Image, website.Spec.Replicas))
	return guest.RequeueAfter(recheck), nil
}

// apiVersion is the Website's own (its group as installed), or APIVersion if it names none.
func apiVersion(website *Website) string {
	if website.APIVersion != "" {
		return website.APIVersion
	}
	return APIVersion
}

// ownerReference is the controller reference from a child to its Website, which makes the
// garbage collector delete the child with it.
func ownerReference(website *Website) (metav1.OwnerReference, error) {
	if website.Name == "" {
		return metav1.OwnerReference{}, fmt.Errorf("the Website has no name")
	}
	if website.UID == "" {
		return metav1.OwnerReference{}, fmt.Errorf("the Website has no uid")
	}
	yes := true
	return metav1.OwnerReference{
		APIVersion:         apiVersion(website),
		Kind:               Kind,
		Name:               website.Name,
		UID:                website.UID,
		Controller:         &yes,
		BlockOwnerDeletion: &yes,
	}, nil
}

// labels of everything a Website named name owns.
func labels(name string) map[string]string { return map[string]string{nameLabel: name} }

// childMetadata is the metadata of a child of the Website: same name and namespace, labelled,
// owned.
func childMetadata(name, namespace string, owner metav1.OwnerReference) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:            name,
		Namespace:       namespace,
		Labels:          labels(name),
		OwnerReferences: []metav1.OwnerReference{owner},
	}
}

// deployment serving the Website: spec.replicas pods of spec.image on port 80.
func deployment(website *Website, namespace string, owner metav1.OwnerReference) *appsv1.Deployment {
	name := owner.Name
	replicas := website.Spec.Replicas
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: childMetadata(name, namespace, owner),
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels(name)},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels(name)},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{
						Name:  "web",
						Image: website.Spec.Image,
						Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 80}},
					}},
				},
			},
		},
	}
}

// service in front of the Deployment's pods, port 80.
func service(name, namespace string, owner metav1.OwnerReference) *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: childMetadata(name, namespace, owner),
		Spec: corev1.ServiceSpec{
			Selector: labels(name),
			Ports: []corev1.ServicePort{{
				Name:       "http",
				Port:       80,
				TargetPort: intstr.FromInt32(80),
			}},
		},
	}
}
