"""KServe: an InferenceService in RawDeployment mode becomes a Deployment and a Service for its predictor.

Written from the KServe documentation and the pinned CRD (serving.kserve.io v1beta1, apps/backends/render/crds):

- Deployment mode (https://kserve.github.io/website/docs/admin-guide/kubernetes-deployment/): the annotation
  `serving.kserve.io/deploymentMode: RawDeployment` (KServe 0.17 renamed it Standard and still accepts the old
  name, kserve/kserve#4608) makes the controller create plain Kubernetes objects; the default
  Serverless mode needs Knative, which the model never has, so such a service gets Ready=False with reason
  ServerlessModeRejected and nothing is created.
- Predictor (https://kserve.github.io/website/docs/model-serving/predictive-inference/frameworks/custom-predictor/):
  a custom predictor is `spec.predictor.containers` (the serving container is named `kserve-container`) plus the pod
  fields of the predictor (nodeSelector, tolerations, affinity, volumes, priorityClassName, ...). The validating
  webhook refuses a predictor that is neither a model nor containers. `minReplicas` (default 1) is the Deployment's
  replicas; `predictor.labels` / `annotations` go on its pods. The Deployment and Service are named
  `<name>-predictor`; pods carry `serving.kserve.io/inferenceservice: <name>` and `component: predictor`.
- Status: PredictorReady and Ready follow the predictor Deployment's Available condition; `status.url` and
  `status.address.url` are the predictor Service's cluster-local URL (no ingress: the model's clusters have no
  ingress domain), `status.deploymentMode` is RawDeployment.

Simplified: no Knative, no ingress / Gateway, no transformer or explainer, no storage initializer, no HPA or KEDA
object for `maxReplicas` / `autoScaling` (the replicas stay at minReplicas), no ServingRuntime resolution (a
predictor `model` is refused as unsupported here).
"""

from __future__ import annotations

import copy
from datetime import datetime

from tests.backends.k8s_fake.store import ApiError, timestamp

GROUP = "serving.kserve.io"
MODE = "serving.kserve.io/deploymentMode"
ISVC_LABEL = "serving.kserve.io/inferenceservice"
RAW_MODES = ("RawDeployment", "Standard")
POD_FIELDS = (
    "nodeSelector",
    "tolerations",
    "affinity",
    "volumes",
    "priorityClassName",
    "schedulerName",
    "serviceAccountName",
    "terminationGracePeriodSeconds",
    "imagePullSecrets",
    "securityContext",
    "runtimeClassName",
)


def _condition(kind: str, status: str, reason: str, message: str, now: datetime) -> dict:
    out = {"type": kind, "status": status, "lastTransitionTime": timestamp(now)}
    if reason:
        out["reason"] = reason
    if message:
        out["message"] = message
    return out


class KServe:
    def __init__(self, plane):
        self.plane = plane

    @property
    def services(self):
        return self.plane.resource(GROUP, "v1beta1", "inferenceservices")

    def admit(self, resource, obj: dict) -> None:
        """The validating webhook: a predictor must say what serves (exactly one of a model or custom containers)."""
        if (resource.group, resource.kind) != (GROUP, "InferenceService"):
            return
        predictor = (obj.get("spec") or {}).get("predictor") or {}
        implementations = [k for k in ("model", "containers") if predictor.get(k)]
        if len(implementations) != 1:
            raise ApiError(
                400,
                "BadRequest",
                'admission webhook "inferenceservice.kserve-webhook-server.validator" denied the request: exactly '
                "one of [Custom, ONNX, Tensorflow, Triton, SKLearn, XGBoost, model] must be specified in PredictorSpec",
            )

    def _pod_template(self, isvc: dict) -> dict:
        predictor = isvc["spec"]["predictor"]
        name = isvc["metadata"]["name"]
        spec = {key: copy.deepcopy(predictor[key]) for key in POD_FIELDS if key in predictor}
        spec["containers"] = copy.deepcopy(predictor["containers"])
        labels = {
            **(predictor.get("labels") or {}),
            ISVC_LABEL: name,
            "component": "predictor",
            "app": f"isvc.{name}-predictor",
        }
        metadata: dict = {"labels": labels}
        if predictor.get("annotations"):
            metadata["annotations"] = dict(predictor["annotations"])
        return {"metadata": metadata, "spec": spec}

    def reconcile(self, now: datetime) -> bool:
        changed = False
        deployments = self.plane.resource("apps", "v1", "deployments")
        services = self.plane.resource("", "v1", "services")
        for isvc in self.plane.store.all(GROUP, "inferenceservices"):
            if isvc["metadata"].get("deletionTimestamp"):
                continue
            name, ns = isvc["metadata"]["name"], isvc["metadata"]["namespace"]
            predictor = isvc["spec"]["predictor"]
            mode = (isvc["metadata"].get("annotations") or {}).get(MODE, "Serverless")
            status = isvc.get("status") or {}
            raw = mode in RAW_MODES
            if not raw or not predictor.get("containers"):
                reason = "RuntimeNotRecognized" if raw else "ServerlessModeRejected"
                message = (
                    "It is not possible to use Serverless deployment mode when Knative Services are not available"
                    if not raw
                    else "the model's predictor supports custom containers only"
                )
                new = {"conditions": [_condition("Ready", "False", reason, message, now)]}
                if _summary(status) != _summary(new):
                    isvc["status"] = new
                    self.plane.save(self.services, isvc)
                    changed = True
                continue
            component = f"{name}-predictor"
            deploy = self.plane.store.bucket(deployments).get((ns, component))
            template = self._pod_template(isvc)
            replicas = predictor.get("minReplicas", 1)
            if replicas == 0:
                replicas = 1  # raw deployment mode does not scale to zero
            wanted_spec = {
                "replicas": replicas,
                "selector": {"matchLabels": {"app": f"isvc.{component}"}},
                "template": template,
            }
            if deploy is None:
                deploy = {
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    "metadata": {
                        "name": component,
                        "labels": {ISVC_LABEL: name, "component": "predictor"},
                        "ownerReferences": [self.plane.owner_ref(isvc)],
                    },
                    "spec": wanted_spec,
                }
                self.plane.admit(deployments, ns, deploy)
                deploy = self.plane.store.create(deployments, ns, deploy)
                changed = True
            elif deploy["spec"] != {**deploy["spec"], **wanted_spec}:
                deploy["spec"].update(wanted_spec)
                self.plane.save(deployments, deploy)
                changed = True
            if self.plane.store.bucket(services).get((ns, component)) is None:
                port = next(
                    (p.get("containerPort") for c in template["spec"]["containers"] for p in c.get("ports") or []), 8080
                )
                self.plane.store.create(
                    services,
                    ns,
                    {
                        "metadata": {"name": component, "ownerReferences": [self.plane.owner_ref(isvc)]},
                        "spec": {
                            "selector": {"app": f"isvc.{component}"},
                            "ports": [{"name": "http", "port": 80, "targetPort": port}],
                        },
                    },
                )
                changed = True
            available = any(
                c["type"] == "Available" and c["status"] == "True"
                for c in (deploy.get("status") or {}).get("conditions") or []
            )
            ready = "True" if available else "False"
            reason = "" if available else "MinimumReplicasUnavailable"
            message = "" if available else "Deployment does not have minimum availability."
            url = f"http://{component}.{ns}.svc.cluster.local"
            new = {
                "conditions": [
                    _condition("PredictorReady", ready, reason, message, now),
                    _condition("Ready", ready, reason, message, now),
                ],
                "deploymentMode": "RawDeployment",
                "observedGeneration": isvc["metadata"].get("generation", 1),
            }
            if available:
                new["url"] = url
                new["address"] = {"url": url}
                new["components"] = {"predictor": {"url": url}}
            if _summary(status) != _summary(new):
                isvc["status"] = new
                self.plane.save(self.services, isvc)
                changed = True
        return changed


def _summary(status: dict) -> tuple:
    conditions = [(c["type"], c["status"], c.get("reason")) for c in status.get("conditions") or []]
    return conditions, status.get("url"), status.get("deploymentMode")
