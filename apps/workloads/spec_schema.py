"""STAND-IN, to be deleted: the JSON Schema of each spec kind, until `apps.workloads.specs.json_schema` lands.

The submit form is generated from `apps.workloads.specs.json_schema(kind)` (pydantic's `model_json_schema`, draft
2020-12), which the `schema` branch adds with the pydantic spec models. Until it is on main, `schema_for` answers
with this copy of that function's output as the branch produced it (titles and descriptions marked for translation
here, as the models mark them there). Once it lands `schema_for` uses it and this module goes.
"""

from __future__ import annotations

from apps.core.text import gettext_noop


def schema_for(kind: str) -> dict:
    """The JSON Schema of `kind` ("training" or "inference") that the form is generated from."""
    import copy

    from apps.workloads import specs

    generated = getattr(specs, "json_schema", None)
    if generated is not None:
        return generated(kind)
    return copy.deepcopy(_TRAINING if kind == "training" else _INFERENCE)


_TRAINING = {
    "$defs": {
        "ElasticModel": {
            "additionalProperties": False,
            "properties": {
                "min_workers": {
                    "description": gettext_noop("torchrun keeps running down to this many"),
                    "maximum": 10000,
                    "minimum": 1,
                    "title": gettext_noop("Minimum workers"),
                    "type": "integer",
                    "x-group": "resources",
                },
                "max_workers": {
                    "description": gettext_noop("torchrun grows up to this many"),
                    "maximum": 10000,
                    "minimum": 1,
                    "title": gettext_noop("Maximum workers"),
                    "type": "integer",
                    "x-group": "resources",
                },
                "checkpoint_path": {
                    "description": gettext_noop(
                        "Where the job saves and resumes from (on a volume); set as CHECKPOINT_PATH"
                    ),
                    "maxLength": 1024,
                    "title": gettext_noop("Checkpoint path"),
                    "type": "string",
                    "x-group": "resources",
                },
            },
            "required": ["min_workers", "max_workers", "checkpoint_path"],
            "title": gettext_noop("Elastic"),
            "type": "object",
        },
        "SecretEnvModel": {
            "additionalProperties": False,
            "properties": {
                "name": {
                    "description": gettext_noop("The environment variable, e.g. HF_TOKEN"),
                    "maxLength": 128,
                    "pattern": "^[A-Za-z_][A-Za-z0-9_]*$",
                    "title": gettext_noop("Variable"),
                    "type": "string",
                    "x-group": "container",
                },
                "secret": {
                    "description": gettext_noop("The Secret's name in the workload's namespace"),
                    "maxLength": 253,
                    "title": gettext_noop("Secret"),
                    "type": "string",
                    "x-group": "container",
                },
                "key": {
                    "description": gettext_noop("The key in the Secret's data"),
                    "maxLength": 253,
                    "title": gettext_noop("Key"),
                    "type": "string",
                    "x-group": "container",
                },
            },
            "required": ["name", "secret", "key"],
            "title": gettext_noop("SecretEnv"),
            "type": "object",
        },
        "SharingModel": {
            "additionalProperties": False,
            "properties": {
                "mode": {
                    "default": "whole",
                    "description": gettext_noop(
                        "whole GPUs; mig: one MIG instance; time-slice: a time-sliced replica; hami: a HAMi vGPU"
                    ),
                    "enum": ["whole", "mig", "time-slice", "hami"],
                    "title": gettext_noop("Mode"),
                    "type": "string",
                    "x-group": "sharing",
                },
                "mig_profile": {
                    "default": "",
                    "description": gettext_noop("With mig: a profile of the GPU model, e.g. 1g.10gb"),
                    "maxLength": 32,
                    "title": gettext_noop("MIG profile"),
                    "type": "string",
                    "x-group": "sharing",
                },
                "replicas": {
                    "anyOf": [
                        {
                            "maximum": 64,
                            "minimum": 2,
                            "type": "integer",
                        },
                        {
                            "type": "null",
                        },
                    ],
                    "default": None,
                    "description": gettext_noop("With time-slice: the replicas per GPU the node pool advertises"),
                    "title": gettext_noop("Replicas per GPU"),
                    "x-group": "sharing",
                },
                "gpumem_mib": {
                    "anyOf": [
                        {
                            "maximum": 1048576,
                            "minimum": 1,
                            "type": "integer",
                        },
                        {
                            "type": "null",
                        },
                    ],
                    "default": None,
                    "description": gettext_noop("With hami: device memory per worker"),
                    "title": gettext_noop("vGPU memory (MiB)"),
                    "x-group": "sharing",
                },
                "gpucores": {
                    "anyOf": [
                        {
                            "maximum": 100,
                            "minimum": 1,
                            "type": "integer",
                        },
                        {
                            "type": "null",
                        },
                    ],
                    "default": None,
                    "description": gettext_noop("With hami: percent of the GPU's compute"),
                    "title": gettext_noop("vGPU compute (%)"),
                    "x-group": "sharing",
                },
            },
            "title": gettext_noop("Sharing"),
            "type": "object",
        },
        "TolerationModel": {
            "additionalProperties": False,
            "properties": {
                "key": {
                    "description": gettext_noop("The key of the taint to tolerate, e.g. dedicated or example.com/spot"),
                    "maxLength": 317,
                    "title": gettext_noop("Taint key"),
                    "type": "string",
                    "x-group": "advanced",
                },
                "operator": {
                    "default": "Equal",
                    "description": gettext_noop(
                        "Equal: the taint with this key and value; Exists: any value of the key"
                    ),
                    "enum": ["Equal", "Exists"],
                    "title": gettext_noop("Operator"),
                    "type": "string",
                    "x-group": "advanced",
                },
                "value": {
                    "default": "",
                    "description": gettext_noop("With Equal; empty with Exists"),
                    "maxLength": 63,
                    "title": gettext_noop("Taint value"),
                    "type": "string",
                    "x-group": "advanced",
                },
                "effect": {
                    "default": "",
                    "description": gettext_noop("The taint effect tolerated; empty: every effect"),
                    "enum": ["", "NoSchedule", "PreferNoSchedule", "NoExecute"],
                    "title": gettext_noop("Effect"),
                    "type": "string",
                    "x-group": "advanced",
                },
            },
            "required": ["key"],
            "title": gettext_noop("Toleration"),
            "type": "object",
        },
        "VolumeModel": {
            "additionalProperties": False,
            "properties": {
                "claim": {
                    "description": gettext_noop("A PersistentVolumeClaim in the workload's namespace"),
                    "maxLength": 63,
                    "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
                    "title": gettext_noop("Claim"),
                    "type": "string",
                    "x-group": "advanced",
                },
                "mount_path": {
                    "description": gettext_noop("An absolute, normalised path in the container"),
                    "maxLength": 1024,
                    "title": gettext_noop("Mount path"),
                    "type": "string",
                    "x-group": "advanced",
                },
                "read_only": {
                    "default": False,
                    "description": gettext_noop("Mount it read-only"),
                    "title": gettext_noop("Read-only"),
                    "type": "boolean",
                    "x-group": "advanced",
                },
            },
            "required": ["claim", "mount_path"],
            "title": gettext_noop("Volume"),
            "type": "object",
        },
    },
    "additionalProperties": False,
    "description": gettext_noop(
        "A distributed training job: `workers` pods (or Slurm nodes), each running torchrun over its GPUs."
    ),
    "properties": {
        "kind": {
            "const": "training",
            "default": "training",
            "description": gettext_noop("training or inference; when given, the same as the kind it is submitted as"),
            "title": gettext_noop("Kind"),
            "type": "string",
            "x-group": "basics",
        },
        "name": {
            "description": gettext_noop("The workload's name: a DNS-1123 label, unique in its queue"),
            "maxLength": 63,
            "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
            "title": gettext_noop("Name"),
            "type": "string",
            "x-group": "basics",
        },
        "tenant": {
            "description": gettext_noop("The slug of the tenant it runs for"),
            "maxLength": 63,
            "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
            "title": gettext_noop("Tenant"),
            "type": "string",
            "x-group": "basics",
        },
        "queue": {
            "description": gettext_noop("The tenant's queue whose quota it uses"),
            "maxLength": 63,
            "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
            "title": gettext_noop("Queue"),
            "type": "string",
            "x-group": "basics",
        },
        "tier": {
            "default": "training",
            "description": gettext_noop("Decides its priority and whether it may be preempted"),
            "maxLength": 63,
            "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
            "title": gettext_noop("Priority tier"),
            "type": "string",
            "x-group": "basics",
        },
        "cluster": {
            "default": "",
            "description": gettext_noop("One of the queue's clusters; empty: placement picks one"),
            "maxLength": 63,
            "title": gettext_noop("Cluster"),
            "type": "string",
            "x-group": "basics",
        },
        "image": {
            "description": gettext_noop(
                "A pinned image reference: [registry[:port]/]repository:tag or @sha256: digest"
            ),
            "maxLength": 512,
            "title": gettext_noop("Container image"),
            "type": "string",
            "x-group": "container",
        },
        "command": {
            "description": gettext_noop('The program and its arguments, e.g. ["python", "train.py"]'),
            "items": {
                "maxLength": 8192,
                "type": "string",
            },
            "maxItems": 256,
            "minItems": 1,
            "title": gettext_noop("Command"),
            "type": "array",
            "x-group": "container",
        },
        "args": {
            "default": [],
            "description": gettext_noop("Appended to the command"),
            "items": {
                "maxLength": 8192,
                "type": "string",
            },
            "maxItems": 256,
            "title": gettext_noop("Arguments"),
            "type": "array",
            "x-group": "container",
        },
        "env": {
            "default": {},
            "description": gettext_noop(
                "Variables NAME: value set in every container; names the console sets itself are reserved"
            ),
            "maxProperties": 128,
            "patternProperties": {
                "^[A-Za-z_][A-Za-z0-9_]*$": {
                    "maxLength": 32768,
                    "type": "string",
                },
            },
            "propertyNames": {
                "maxLength": 128,
            },
            "title": gettext_noop("Environment"),
            "type": "object",
            "x-group": "container",
        },
        "secret_env": {
            "default": [],
            "description": gettext_noop(
                "Variables whose values stay in Kubernetes Secrets of the workload's namespace: {name, secret, key}"
            ),
            "items": {
                "$ref": "#/$defs/SecretEnvModel",
            },
            "maxItems": 64,
            "title": gettext_noop("Secret environment"),
            "type": "array",
            "x-group": "container",
        },
        "gpu_model": {
            "description": gettext_noop("A GPU model code of the catalog, e.g. h100"),
            "maxLength": 64,
            "title": gettext_noop("GPU model"),
            "type": "string",
            "x-group": "resources",
        },
        "workers": {
            "default": 1,
            "description": gettext_noop("Pods (or Slurm nodes), each running torchrun"),
            "maximum": 10000,
            "minimum": 1,
            "title": gettext_noop("Workers"),
            "type": "integer",
            "x-group": "resources",
        },
        "gpus_per_worker": {
            "default": 1,
            "description": gettext_noop("Whole GPUs of one node; 1 when the GPU is shared"),
            "maximum": 64,
            "minimum": 1,
            "title": gettext_noop("GPUs per worker"),
            "type": "integer",
            "x-group": "resources",
        },
        "gang_min": {
            "anyOf": [
                {
                    "maximum": 10000,
                    "minimum": 1,
                    "type": "integer",
                },
                {
                    "type": "null",
                },
            ],
            "default": None,
            "description": gettext_noop(
                "Workers admitted together before any starts; empty: all workers, or the elastic minimum"
            ),
            "title": gettext_noop("Gang minimum"),
            "x-group": "resources",
        },
        "topology": {
            "default": "any",
            "description": gettext_noop(
                "any; node: every worker on one node; nvlink: in one NVLink domain; leaf: under one leaf switch"
            ),
            "enum": ["any", "node", "nvlink", "leaf"],
            "title": gettext_noop("Topology"),
            "type": "string",
            "x-group": "resources",
        },
        "elastic": {
            "anyOf": [
                {
                    "$ref": "#/$defs/ElasticModel",
                },
                {
                    "type": "null",
                },
            ],
            "default": None,
            "description": gettext_noop("torchrun's elastic range, resuming from checkpoints; empty: a fixed size"),
            "title": gettext_noop("Elastic range"),
            "x-group": "resources",
        },
        "cpu": {
            "anyOf": [
                {
                    "maximum": 1024,
                    "minimum": 1,
                    "type": "integer",
                },
                {
                    "type": "null",
                },
            ],
            "default": None,
            "description": gettext_noop("Per worker or pod; empty: the renderer's default"),
            "title": gettext_noop("CPU cores"),
            "x-group": "resources",
        },
        "memory_gib": {
            "anyOf": [
                {
                    "maximum": 16384,
                    "minimum": 1,
                    "type": "integer",
                },
                {
                    "type": "null",
                },
            ],
            "default": None,
            "description": gettext_noop("Per worker or pod; empty: the renderer's default"),
            "title": gettext_noop("Memory (GiB)"),
            "x-group": "resources",
        },
        "max_runtime_s": {
            "default": 86400,
            "description": gettext_noop("The run ends TIMED_OUT when it reaches it"),
            "maximum": 31536000,
            "minimum": 60,
            "title": gettext_noop("Maximum runtime (s)"),
            "type": "integer",
            "x-group": "resources",
        },
        "sharing": {
            "$ref": "#/$defs/SharingModel",
            "default": {
                "mode": "whole",
                "mig_profile": "",
                "replicas": None,
                "gpumem_mib": None,
                "gpucores": None,
            },
            "description": gettext_noop('How a worker holds its GPU; "mig" is short for {"mode": "mig"}'),
            "title": gettext_noop("GPU sharing"),
            "x-group": "sharing",
        },
        "retries": {
            "default": 3,
            "description": gettext_noop("Restarts after a failure"),
            "maximum": 100,
            "minimum": 0,
            "title": gettext_noop("Retries"),
            "type": "integer",
            "x-group": "advanced",
        },
        "volumes": {
            "default": [],
            "description": gettext_noop("PersistentVolumeClaims mounted into every worker"),
            "items": {
                "$ref": "#/$defs/VolumeModel",
            },
            "maxItems": 16,
            "title": gettext_noop("Volumes"),
            "type": "array",
            "x-group": "advanced",
        },
        "tolerations": {
            "default": [],
            "description": gettext_noop("Taints it tolerates besides its node pool's, as Kubernetes takes them"),
            "items": {
                "$ref": "#/$defs/TolerationModel",
            },
            "maxItems": 16,
            "title": gettext_noop("Tolerations"),
            "type": "array",
            "x-group": "advanced",
        },
    },
    "required": ["name", "tenant", "queue", "image", "command", "gpu_model"],
    "title": gettext_noop("TrainingJobSpec"),
    "type": "object",
}


_INFERENCE = {
    "$defs": {
        "AutoscalingModel": {
            "additionalProperties": False,
            "properties": {
                "enabled": {
                    "default": False,
                    "description": gettext_noop("Replicas follow the engine's waiting requests (KEDA and Prometheus)"),
                    "title": gettext_noop("Enabled"),
                    "type": "boolean",
                    "x-group": "serving",
                },
                "min_replicas": {
                    "default": 1,
                    "description": gettext_noop("At least 1: one stays warm"),
                    "maximum": 1000,
                    "minimum": 0,
                    "title": gettext_noop("Minimum replicas"),
                    "type": "integer",
                    "x-group": "serving",
                },
                "max_replicas": {
                    "anyOf": [
                        {
                            "maximum": 1000,
                            "minimum": 1,
                            "type": "integer",
                        },
                        {
                            "type": "null",
                        },
                    ],
                    "default": None,
                    "description": gettext_noop("Required when autoscaling is enabled"),
                    "title": gettext_noop("Maximum replicas"),
                    "x-group": "serving",
                },
                "waiting_threshold": {
                    "default": 5,
                    "description": gettext_noop("Waiting requests per replica before another replica is added"),
                    "maximum": 100000,
                    "minimum": 1,
                    "title": gettext_noop("Waiting threshold"),
                    "type": "integer",
                    "x-group": "serving",
                },
                "prometheus_server_address": {
                    "default": "http://prometheus-operated.monitoring.svc:9090",
                    "description": gettext_noop("Where KEDA reads the engine's metrics"),
                    "maxLength": 2048,
                    "title": gettext_noop("Prometheus address"),
                    "type": "string",
                    "x-group": "serving",
                },
            },
            "title": gettext_noop("Autoscaling"),
            "type": "object",
        },
        "ReadinessModel": {
            "additionalProperties": False,
            "properties": {
                "initial_delay_s": {
                    "default": 600,
                    "description": gettext_noop("How long loading the weights may take"),
                    "maximum": 7200,
                    "minimum": 0,
                    "title": gettext_noop("Initial delay (s)"),
                    "type": "integer",
                    "x-group": "serving",
                },
                "period_s": {
                    "default": 10,
                    "description": gettext_noop("How often health is checked"),
                    "maximum": 300,
                    "minimum": 1,
                    "title": gettext_noop("Period (s)"),
                    "type": "integer",
                    "x-group": "serving",
                },
            },
            "title": gettext_noop("Readiness"),
            "type": "object",
        },
        "SecretEnvModel": {
            "additionalProperties": False,
            "properties": {
                "name": {
                    "description": gettext_noop("The environment variable, e.g. HF_TOKEN"),
                    "maxLength": 128,
                    "pattern": "^[A-Za-z_][A-Za-z0-9_]*$",
                    "title": gettext_noop("Variable"),
                    "type": "string",
                    "x-group": "container",
                },
                "secret": {
                    "description": gettext_noop("The Secret's name in the workload's namespace"),
                    "maxLength": 253,
                    "title": gettext_noop("Secret"),
                    "type": "string",
                    "x-group": "container",
                },
                "key": {
                    "description": gettext_noop("The key in the Secret's data"),
                    "maxLength": 253,
                    "title": gettext_noop("Key"),
                    "type": "string",
                    "x-group": "container",
                },
            },
            "required": ["name", "secret", "key"],
            "title": gettext_noop("SecretEnv"),
            "type": "object",
        },
        "ShutdownModel": {
            "additionalProperties": False,
            "properties": {
                "termination_grace_period_s": {
                    "default": 120,
                    "description": gettext_noop("From SIGTERM to the end of the pod"),
                    "maximum": 3600,
                    "minimum": 1,
                    "title": gettext_noop("Termination grace period (s)"),
                    "type": "integer",
                    "x-group": "serving",
                },
                "drain_seconds": {
                    "default": 60,
                    "description": gettext_noop("For the requests in flight; at least 10 s less than the grace period"),
                    "maximum": 3600,
                    "minimum": 0,
                    "title": gettext_noop("Drain (s)"),
                    "type": "integer",
                    "x-group": "serving",
                },
            },
            "title": gettext_noop("Shutdown"),
            "type": "object",
        },
        "TolerationModel": {
            "additionalProperties": False,
            "properties": {
                "key": {
                    "description": gettext_noop("The key of the taint to tolerate, e.g. dedicated or example.com/spot"),
                    "maxLength": 317,
                    "title": gettext_noop("Taint key"),
                    "type": "string",
                    "x-group": "advanced",
                },
                "operator": {
                    "default": "Equal",
                    "description": gettext_noop(
                        "Equal: the taint with this key and value; Exists: any value of the key"
                    ),
                    "enum": ["Equal", "Exists"],
                    "title": gettext_noop("Operator"),
                    "type": "string",
                    "x-group": "advanced",
                },
                "value": {
                    "default": "",
                    "description": gettext_noop("With Equal; empty with Exists"),
                    "maxLength": 63,
                    "title": gettext_noop("Taint value"),
                    "type": "string",
                    "x-group": "advanced",
                },
                "effect": {
                    "default": "",
                    "description": gettext_noop("The taint effect tolerated; empty: every effect"),
                    "enum": ["", "NoSchedule", "PreferNoSchedule", "NoExecute"],
                    "title": gettext_noop("Effect"),
                    "type": "string",
                    "x-group": "advanced",
                },
            },
            "required": ["key"],
            "title": gettext_noop("Toleration"),
            "type": "object",
        },
        "WeightsModel": {
            "additionalProperties": False,
            "properties": {
                "claim": {
                    "description": gettext_noop("A PersistentVolumeClaim in the workload's namespace"),
                    "maxLength": 63,
                    "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
                    "title": gettext_noop("Claim"),
                    "type": "string",
                    "x-group": "serving",
                },
                "mount_path": {
                    "default": "/models",
                    "description": gettext_noop("An absolute, normalised path in the container"),
                    "maxLength": 1024,
                    "title": gettext_noop("Mount path"),
                    "type": "string",
                    "x-group": "serving",
                },
            },
            "required": ["claim"],
            "title": gettext_noop("Weights"),
            "type": "object",
        },
    },
    "additionalProperties": False,
    "description": gettext_noop("An OpenAI-compatible serving deployment of one model with vLLM or SGLang."),
    "properties": {
        "kind": {
            "const": "inference",
            "default": "inference",
            "description": gettext_noop("training or inference; when given, the same as the kind it is submitted as"),
            "title": gettext_noop("Kind"),
            "type": "string",
            "x-group": "basics",
        },
        "name": {
            "description": gettext_noop("The workload's name: a DNS-1123 label, unique in its queue"),
            "maxLength": 63,
            "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
            "title": gettext_noop("Name"),
            "type": "string",
            "x-group": "basics",
        },
        "tenant": {
            "description": gettext_noop("The slug of the tenant it runs for"),
            "maxLength": 63,
            "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
            "title": gettext_noop("Tenant"),
            "type": "string",
            "x-group": "basics",
        },
        "queue": {
            "description": gettext_noop("The tenant's queue whose quota it uses"),
            "maxLength": 63,
            "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
            "title": gettext_noop("Queue"),
            "type": "string",
            "x-group": "basics",
        },
        "tier": {
            "default": "online-inference",
            "description": gettext_noop("Decides its priority and whether it may be preempted"),
            "maxLength": 63,
            "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
            "title": gettext_noop("Priority tier"),
            "type": "string",
            "x-group": "basics",
        },
        "cluster": {
            "default": "",
            "description": gettext_noop("One of the queue's clusters; empty: placement picks one"),
            "maxLength": 63,
            "title": gettext_noop("Cluster"),
            "type": "string",
            "x-group": "basics",
        },
        "engine": {
            "default": "vllm",
            "description": gettext_noop("The serving engine"),
            "enum": ["vllm", "sglang"],
            "title": gettext_noop("Engine"),
            "type": "string",
            "x-group": "serving",
        },
        "model": {
            "description": gettext_noop(
                "A Hugging Face model id (org/name) or an absolute path under the weights volume"
            ),
            "maxLength": 1024,
            "title": gettext_noop("Model"),
            "type": "string",
            "x-group": "serving",
        },
        "image": {
            "default": "vllm/vllm-openai:v0.11.0",
            "description": gettext_noop("A pinned image reference; by default the engine's pinned release"),
            "maxLength": 512,
            "title": gettext_noop("Container image"),
            "type": "string",
            "x-group": "container",
        },
        "env": {
            "default": {},
            "description": gettext_noop(
                "Variables NAME: value set in every container; names the console sets itself are reserved"
            ),
            "maxProperties": 128,
            "patternProperties": {
                "^[A-Za-z_][A-Za-z0-9_]*$": {
                    "maxLength": 32768,
                    "type": "string",
                },
            },
            "propertyNames": {
                "maxLength": 128,
            },
            "title": gettext_noop("Environment"),
            "type": "object",
            "x-group": "container",
        },
        "secret_env": {
            "default": [],
            "description": gettext_noop(
                "Variables whose values stay in Kubernetes Secrets of the workload's namespace: {name, secret, key}"
            ),
            "items": {
                "$ref": "#/$defs/SecretEnvModel",
            },
            "maxItems": 64,
            "title": gettext_noop("Secret environment"),
            "type": "array",
            "x-group": "container",
        },
        "gpu_model": {
            "description": gettext_noop("A GPU model code of the catalog, e.g. h100"),
            "maxLength": 64,
            "title": gettext_noop("GPU model"),
            "type": "string",
            "x-group": "resources",
        },
        "tensor_parallel": {
            "default": 1,
            "description": gettext_noop("GPUs a layer is split over"),
            "maximum": 256,
            "minimum": 1,
            "title": gettext_noop("Tensor parallel"),
            "type": "integer",
            "x-group": "serving",
        },
        "pipeline_parallel": {
            "default": 1,
            "description": gettext_noop("Stages the layers are split into"),
            "maximum": 64,
            "minimum": 1,
            "title": gettext_noop("Pipeline parallel"),
            "type": "integer",
            "x-group": "serving",
        },
        "data_parallel": {
            "default": 1,
            "description": gettext_noop("SGLang only: engine copies within a replica"),
            "maximum": 64,
            "minimum": 1,
            "title": gettext_noop("Data parallel"),
            "type": "integer",
            "x-group": "serving",
        },
        "replicas": {
            "default": 1,
            "description": gettext_noop("Independent copies of the service"),
            "maximum": 1000,
            "minimum": 1,
            "title": gettext_noop("Replicas"),
            "type": "integer",
            "x-group": "serving",
        },
        "max_model_len": {
            "anyOf": [
                {
                    "maximum": 10000000,
                    "minimum": 16,
                    "type": "integer",
                },
                {
                    "type": "null",
                },
            ],
            "default": None,
            "description": gettext_noop("Tokens; empty: the model's own"),
            "title": gettext_noop("Maximum context length"),
            "x-group": "serving",
        },
        "gpu_memory_utilization": {
            "default": 0.9,
            "description": gettext_noop("The share of GPU memory the engine may use"),
            "exclusiveMinimum": 0,
            "maximum": 1,
            "title": gettext_noop("GPU memory utilization"),
            "type": "number",
            "x-group": "serving",
        },
        "port": {
            "default": 8000,
            "description": gettext_noop("The OpenAI-compatible API's port"),
            "maximum": 65535,
            "minimum": 1,
            "title": gettext_noop("Port"),
            "type": "integer",
            "x-group": "serving",
        },
        "readiness": {
            "$ref": "#/$defs/ReadinessModel",
            "default": {
                "initial_delay_s": 600,
                "period_s": 10,
            },
            "description": gettext_noop("When a replica counts as ready"),
            "x-group": "serving",
        },
        "autoscaling": {
            "$ref": "#/$defs/AutoscalingModel",
            "default": {
                "enabled": False,
                "min_replicas": 1,
                "max_replicas": None,
                "waiting_threshold": 5,
                "prometheus_server_address": "http://prometheus-operated.monitoring.svc:9090",
            },
            "description": gettext_noop("Replicas follow the engine's queue"),
            "x-group": "serving",
        },
        "shutdown": {
            "$ref": "#/$defs/ShutdownModel",
            "default": {
                "termination_grace_period_s": 120,
                "drain_seconds": 60,
            },
            "description": gettext_noop("Graceful stop: drain, then exit"),
            "x-group": "serving",
        },
        "weights": {
            "anyOf": [
                {
                    "$ref": "#/$defs/WeightsModel",
                },
                {
                    "type": "null",
                },
            ],
            "default": None,
            "description": gettext_noop("A PersistentVolumeClaim with the weights, mounted read-only"),
            "title": gettext_noop("Weights volume"),
            "x-group": "serving",
        },
        "extra_args": {
            "default": [],
            "description": gettext_noop(
                "Passed to the engine as they are; not the flags the console sets from these fields"
            ),
            "items": {
                "maxLength": 8192,
                "type": "string",
            },
            "maxItems": 64,
            "title": gettext_noop("Extra engine arguments"),
            "type": "array",
            "x-group": "serving",
        },
        "cpu": {
            "anyOf": [
                {
                    "maximum": 1024,
                    "minimum": 1,
                    "type": "integer",
                },
                {
                    "type": "null",
                },
            ],
            "default": None,
            "description": gettext_noop("Per worker or pod; empty: the renderer's default"),
            "title": gettext_noop("CPU cores"),
            "x-group": "resources",
        },
        "memory_gib": {
            "anyOf": [
                {
                    "maximum": 16384,
                    "minimum": 1,
                    "type": "integer",
                },
                {
                    "type": "null",
                },
            ],
            "default": None,
            "description": gettext_noop("Per worker or pod; empty: the renderer's default"),
            "title": gettext_noop("Memory (GiB)"),
            "x-group": "resources",
        },
        "max_runtime_s": {
            "anyOf": [
                {
                    "maximum": 31536000,
                    "minimum": 60,
                    "type": "integer",
                },
                {
                    "type": "null",
                },
            ],
            "default": None,
            "description": gettext_noop("The run ends TIMED_OUT when it reaches it"),
            "title": gettext_noop("Maximum runtime (s)"),
            "x-group": "resources",
        },
        "tolerations": {
            "default": [],
            "description": gettext_noop("Taints it tolerates besides its node pool's, as Kubernetes takes them"),
            "items": {
                "$ref": "#/$defs/TolerationModel",
            },
            "maxItems": 16,
            "title": gettext_noop("Tolerations"),
            "type": "array",
            "x-group": "advanced",
        },
    },
    "required": ["name", "tenant", "queue", "model", "gpu_model"],
    "title": gettext_noop("InferenceServiceSpec"),
    "type": "object",
}
