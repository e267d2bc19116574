// Command website-controller is examples/website written as a controller-runtime controller: for
// each Website (example.com/v1, examples/website/samples/crd.yaml) it server-side applies a
// Deployment and a Service of the same name, owned by the Website, then the Website's status,
// and asks to be reconciled again after the recheck. It watches what the plugin's manifest
// declares: Websites (generation changes only) and the Deployments and Services they own. The
// website_peers bench (tests/benches/website_peers.rs) runs it beside reconcile-host running the
// same reconciler as a WebAssembly component.
//
// It is written the way a kubebuilder project would write it: a typed Website with a scheme
// registration, the manager's cached client, apply configurations for the children, and the
// manager's defaults (JSON on the wire, the priority queue) except where the plugin's manifest
// says otherwise (2 concurrent reconciles) and the client's rate limit, raised as the bench
// raises the host's. The field manager is "website", the name the host's plugin applies with,
// so either side's applies are no-ops on what the other wrote.
//
// Usage: website-controller [--namespace NS] [--metrics-bind-address ADDR] [--recheck DURATION]
//
// The API server comes from KUBECONFIG. Metrics (controller_runtime_reconcile_total and the
// rest) are served on ADDR.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

const (
	// fieldManager is the name the host's plugin applies with (its plugin name).
	fieldManager = "website"
	// nameLabel is the label on the Deployment, its pods and the Service.
	nameLabel = "app.kubernetes.io/name"
)

var groupVersion = schema.GroupVersion{Group: "example.com", Version: "v1"}

// Website is the custom resource, as far as this controller reads it.
type Website struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              WebsiteSpec   `json:"spec"`
	Status            WebsiteStatus `json:"status,omitempty"`
}

// WebsiteSpec is what the user asks for: which image to serve, with how many replicas.
type WebsiteSpec struct {
	Image    string `json:"image"`
	Replicas int32  `json:"replicas"`
}

// WebsiteStatus is what the controller reports.
type WebsiteStatus struct {
	ObservedGeneration int64  `json:"observedGeneration,omitempty"`
	Image              string `json:"image,omitempty"`
	Replicas           int32  `json:"replicas,omitempty"`
	Deployment         string `json:"deployment,omitempty"`
	Service            string `json:"service,omitempty"`
}

// WebsiteList is a list of Websites.
type WebsiteList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Website `json:"items"`
}

// DeepCopyObject copies the Website (what controller-gen would generate).
func (w *Website) DeepCopyObject() runtime.Object {
	out := *w
	w.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	return &out
}

// DeepCopyObject copies the list (what controller-gen would generate).
func (l *WebsiteList) DeepCopyObject() runtime.Object {
	out := *l
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	out.Items = make([]Website, len(l.Items))
	for i := range l.Items {
		out.Items[i] = *l.Items[i].DeepCopyObject().(*Website)
	}
	return &out
}

type reconciler struct {
	client.Client
	recheck time.Duration
}

func (r *reconciler) Reconcile(ctx context.Context, request ctrl.Request) (ctrl.Result, error) {
	var website Website
	if err := r.Get(ctx, request.NamespacedName, &website); err != nil {
		// Deleted: the Deployment and Service go by garbage collection (ownerReferences).
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	name, namespace := website.Name, website.Namespace
	labels := map[string]string{nameLabel: name}
	owner := metav1ac.OwnerReference().
		WithAPIVersion(groupVersion.String()).WithKind("Website").
		WithName(name).WithUID(website.UID).
		WithController(true).WithBlockOwnerDeletion(true)

	deployment := appsv1ac.Deployment(name, namespace).
		WithLabels(labels).WithOwnerReferences(owner).
		WithSpec(appsv1ac.DeploymentSpec().
			WithReplicas(website.Spec.Replicas).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(labels)).
			WithTemplate(corev1ac.PodTemplateSpec().
				WithLabels(labels).
				WithSpec(corev1ac.PodSpec().WithContainers(corev1ac.Container().
					WithName("web").WithImage(website.Spec.Image).
					WithPorts(corev1ac.ContainerPort().WithName("http").WithContainerPort(80))))))
	if err := r.Apply(ctx, deployment, client.FieldOwner(fieldManager), client.ForceOwnership); err != nil {
		return ctrl.Result{}, fmt.Errorf("failed to apply the Deployment: %w", err)
	}
	service := corev1ac.Service(name, namespace).
		WithLabels(labels).WithOwnerReferences(owner).
		WithSpec(corev1ac.ServiceSpec().
			WithSelector(labels).
			WithPorts(corev1ac.ServicePort().WithName("http").WithPort(80).WithTargetPort(intstr.FromInt32(80))))
	if err := r.Apply(ctx, service, client.FieldOwner(fieldManager), client.ForceOwnership); err != nil {
		return ctrl.Result{}, fmt.Errorf("failed to apply the Service: %w", err)
	}
	status := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": groupVersion.String(),
		"kind":       "Website",
		"metadata":   map[string]any{"name": name, "namespace": namespace},
		"status": map[string]any{
			"observedGeneration": website.Generation,
			"image":              website.Spec.Image,
			"replicas":           int64(website.Spec.Replicas),
			"deployment":         name,
			"service":            name,
		},
	}}
	if err := r.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(status),
		client.FieldOwner(fieldManager), client.ForceOwnership); err != nil {
		return ctrl.Result{}, fmt.Errorf("failed to apply the Website's status: %w", err)
	}
	return ctrl.Result{RequeueAfter: r.recheck}, nil
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "website-controller: "+format+"\n", args...)
	os.Exit(1)
}

func main() {
	namespace := flag.String("namespace", "", "watch only this namespace (default: every namespace)")
	metrics := flag.String("metrics-bind-address", "0", "where to serve metrics (0: off)")
	recheck := flag.Duration("recheck", 60*time.Second, "how often to look again without a change")
	flag.Parse()

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		fail("cannot register the built-in types: %v", err)
	}
	scheme.AddKnownTypes(groupVersion, &Website{}, &WebsiteList{})
	metav1.AddToGroupVersion(scheme, groupVersion)

	config, err := ctrl.GetConfig()
	if err != nil {
		fail("cannot load a kubeconfig: %v; set KUBECONFIG to a kubeconfig file", err)
	}
	config.QPS, config.Burst = 100000, 100000
	options := manager.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: *metrics},
		HealthProbeBindAddress: "0",
	}
	if *namespace != "" {
		options.Cache = cache.Options{DefaultNamespaces: map[string]cache.Config{*namespace: {}}}
	}
	mgr, err := ctrl.NewManager(config, options)
	if err != nil {
		fail("cannot create the manager: %v", err)
	}
	err = ctrl.NewControllerManagedBy(mgr).
		For(&Website{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&appsv1.Deployment{}).
		Owns(&corev1.Service{}).
		Named("website").
		WithOptions(controller.Options{MaxConcurrentReconciles: 2}).
		Complete(&reconciler{Client: mgr.GetClient(), recheck: *recheck})
	if err != nil {
		fail("cannot build the controller: %v", err)
	}
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		fail("the manager stopped: %v", err)
	}
}
