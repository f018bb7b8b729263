"""The network a workload's ranks talk over: a node pool's fabric, the spec's `network`, and what follows from both.

A platform admin declares each node pool's fabric (apps/fleet: NodePool.fabric and its settings): `none` (not
declared), `ethernet`, `roce` or `infiniband`, with what the cluster needs for RDMA:

* `rdma_resource`: the extended resource the cluster's RDMA device plugin advertises on the pool's nodes, e.g.
  `rdma/ib` or `rdma/rdma_shared_device_a` (the k8s-rdma-shared-dev-plugin's `rdma/<resourceName>`), or
  `nvidia.com/hostdev` (the NVIDIA Network Operator's host-device network); a pod requests `rdma_per_pod` of it.
  Kubernetes counts extended resources per node like any other, so a pod lands only where the plugin advertises
  enough (https://kubernetes.io/docs/concepts/configuration/manage-resources-containers/#extended-resources).
* `nccl_ib_hca`, `nccl_socket_ifname`, `nccl_ib_gid_index`: NCCL's NCCL_IB_HCA (the RDMA devices and ports to use,
  e.g. `=mlx5_0:1,mlx5_1:1`), NCCL_SOCKET_IFNAME (the IP interface for bootstrap and socket traffic, e.g. `=eth0`)
  and, for RoCE, NCCL_IB_GID_INDEX (the GID of the port's RoCE v2 address; NCCL 2.21 and later find it themselves,
  earlier versions use GID 0). Syntax as NCCL's environment variables take it
  (https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html): a list separated by ',', `^` to exclude,
  `=` for exact names, `:<port>` after an HCA.
* `pod_networks`: Multus NetworkAttachmentDefinitions (`[namespace/]name`, comma-separated) the pods attach to, in
  the `k8s.v1.cni.cncf.io/networks` annotation: RoCE needs an IP interface on the RDMA device inside the pod (a
  macvlan, SR-IOV or host-device network), and NCCL_SOCKET_IFNAME then names it (Multus calls it net1, net2, ...).
* `slurm_gres`: on Slurm, a GRES the site configures for the fabric (e.g. `ib:1`), requested beside the GPUs.

A spec's `network` is `auto` (the default), `rdma` or `tcp`. `auto` is RDMA when the workload spans nodes (a
training job of several workers, an inference replica on several nodes) on a pool with an InfiniBand or RoCE
fabric, TCP sockets (NCCL_IB_DISABLE=1) when it spans nodes of an Ethernet pool, and NCCL's own choice otherwise
(one node talks over NVLink and shared memory; a pool whose fabric is not declared is left alone). `rdma` on a
pool without an RDMA fabric is refused, naming the field.

RDMA on Kubernetes: each pod requests the RDMA resource and adds the IPC_LOCK capability (RDMA registers, that is
pins, the memory it transfers: the device plugins' own examples add it), with NCCL_IB_DISABLE=0 and the pool's NCCL
settings. Slurm's `--network` option is for Cray's and HPE Slingshot's switch plugins only (sbatch(1)): an
InfiniBand or RoCE job gets the NCCL environment in its script and the fabric's GRES, not --network.

Pure: no Django, no cluster.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from apps.backends.render.errors import RenderError
from apps.backends.render.names import is_dns_label, is_qualified_name
from apps.backends.render.spec import InferenceServiceSpec, Spec, TrainingJobSpec
from apps.backends.types import Topology
from apps.core.text import N_, Text

FABRICS = ("none", "ethernet", "roce", "infiniband")
RDMA_FABRICS = ("roce", "infiniband")
NETWORKS = ("auto", "rdma", "tcp")
MULTUS_ANNOTATION = "k8s.v1.cni.cncf.io/networks"
IPC_LOCK = "IPC_LOCK"
MAX_RDMA_PER_POD = 64
GPU_RESOURCE_PREFIXES = ("nvidia.com/gpu", "nvidia.com/mig-")  # counted as GPUs, never an RDMA device
# NCCL's list syntax: an optional '^' (exclude) and '=' (exact names), then names separated by ','; an HCA may
# name its port after ':'. Interface and device names are short: letters, digits, '_', '.', '-'.
_NAME = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}"
_HCA_LIST = re.compile(rf"\^?=?{_NAME}(:[0-9]{{1,3}})?(,{_NAME}(:[0-9]{{1,3}})?){{0,31}}")
_IF_LIST = re.compile(rf"\^?=?{_NAME}(,{_NAME}){{0,31}}")
_GRES = re.compile(r"[a-z][a-z0-9_]{0,31}(:[A-Za-z0-9][A-Za-z0-9_.-]{0,31})?:[1-9][0-9]{0,3}")


@dataclass(frozen=True)
class Fabric:
    """A node pool's fabric as the console's tables declare it (apps/fleet NodePool); `pool` names the pool in
    messages."""

    kind: str = "none"
    rdma_resource: str = ""
    rdma_per_pod: int = 1
    nccl_ib_hca: str = ""
    nccl_socket_ifname: str = ""
    nccl_ib_gid_index: int | None = None
    pod_networks: str = ""
    slurm_gres: str = ""
    pool: str = ""

    @property
    def rdma(self) -> bool:
        return self.kind in RDMA_FABRICS


def _pod_network_error(item: str) -> bool:
    namespace, _, name = item.rpartition("/")
    return not is_dns_label(name) or (bool(namespace) and not is_dns_label(namespace)) or item.count("/") > 1


def fabric_errors(fabric: Fabric, renderer: str = "kubernetes") -> list[tuple[str, Text]]:
    """What is wrong with a pool's fabric on a cluster whose workloads `renderer` renders ("kubernetes" or
    "slurm"), as (field, message) with the API's field names; [] when it is valid."""
    out: list[tuple[str, Text]] = []
    kind = fabric.kind
    if kind not in FABRICS:
        return [("fabric", N_("%(kind)r is not one of %(kinds)s", kind=kind, kinds=", ".join(FABRICS)))]
    rdma_only = {
        "rdma_resource": fabric.rdma_resource,
        "nccl_ib_hca": fabric.nccl_ib_hca,
        "nccl_ib_gid_index": fabric.nccl_ib_gid_index,
        "slurm_gres": fabric.slurm_gres,
    }
    declared = {"nccl_socket_ifname": fabric.nccl_socket_ifname, "pod_networks": fabric.pod_networks}
    for name, value in (*rdma_only.items(), *declared.items()):
        if value in ("", None):
            continue
        if kind == "none" or (kind == "ethernet" and name in rdma_only):
            out.append((name, N_("only for a pool whose fabric is %(kinds)s", kinds=_needs(name))))
    if out:
        return out
    if fabric.nccl_ib_gid_index is not None and kind != "roce":
        out.append(("nccl_ib_gid_index", N_("only for a pool whose fabric is %(kinds)s", kinds="roce")))
    gid = fabric.nccl_ib_gid_index
    if gid is not None and (isinstance(gid, bool) or not isinstance(gid, int) or not 0 <= gid <= 255):
        out.append(("nccl_ib_gid_index", N_("a GID index from 0 to 255, not %(value)r", value=gid)))
    if fabric.nccl_ib_hca and not _HCA_LIST.fullmatch(fabric.nccl_ib_hca):
        out.append(
            (
                "nccl_ib_hca",
                N_(
                    "%(value)r is not an NCCL_IB_HCA list: HCA names separated by ',', each with an optional "
                    "':<port>', the list starting with an optional '^' (exclude) and '=' (exact names), e.g. "
                    "=mlx5_0:1,mlx5_1:1",
                    value=fabric.nccl_ib_hca,
                ),
            )
        )
    if fabric.nccl_socket_ifname and not _IF_LIST.fullmatch(fabric.nccl_socket_ifname):
        out.append(
            (
                "nccl_socket_ifname",
                N_(
                    "%(value)r is not an NCCL_SOCKET_IFNAME list: interface names or prefixes separated by ',', "
                    "starting with an optional '^' (exclude) and '=' (exact names), e.g. =eth0",
                    value=fabric.nccl_socket_ifname,
                ),
            )
        )
    per_pod = fabric.rdma_per_pod
    if isinstance(per_pod, bool) or not isinstance(per_pod, int) or not 1 <= per_pod <= MAX_RDMA_PER_POD:
        out.append(("rdma_per_pod", N_("from 1 to %(most)s, not %(value)r", most=MAX_RDMA_PER_POD, value=per_pod)))
    out += _renderer_errors(fabric, renderer)
    return out


def _needs(name: str) -> str:
    """The fabrics a setting belongs to."""
    if name == "nccl_ib_gid_index":
        return "roce"
    if name in ("rdma_resource", "nccl_ib_hca", "slurm_gres"):
        return "roce, infiniband"
    return "ethernet, roce, infiniband"


def _renderer_errors(fabric: Fabric, renderer: str) -> list[tuple[str, Text]]:
    out: list[tuple[str, Text]] = []
    if renderer == "slurm":
        for name in ("rdma_resource", "pod_networks"):
            if getattr(fabric, name):
                out.append((name, N_("a Kubernetes setting: a Slurm cluster's pools take slurm_gres instead")))
        if fabric.slurm_gres and not _GRES.fullmatch(fabric.slurm_gres):
            out.append(
                (
                    "slurm_gres",
                    N_(
                        "%(value)r is not a GRES request name[:type]:count, e.g. ib:1",
                        value=fabric.slurm_gres,
                    ),
                )
            )
        return out
    if fabric.slurm_gres:
        out.append(("slurm_gres", N_("a Slurm setting: a Kubernetes cluster's pools take rdma_resource instead")))
    resource = fabric.rdma_resource
    if fabric.rdma and not resource:
        out.append(
            (
                "rdma_resource",
                N_(
                    "an RDMA fabric on Kubernetes needs the extended resource its device plugin advertises, "
                    "e.g. rdma/ib or nvidia.com/hostdev"
                ),
            )
        )
    elif resource and (
        "/" not in resource
        or not is_qualified_name(resource)
        or resource.split("/")[0].endswith("kubernetes.io")
        or resource.startswith(GPU_RESOURCE_PREFIXES)
    ):
        out.append(
            (
                "rdma_resource",
                N_(
                    "%(value)r is not an extended resource name of a device plugin (<domain>/<name>, outside "
                    "kubernetes.io, not a GPU resource), e.g. rdma/ib",
                    value=resource,
                ),
            )
        )
    if fabric.pod_networks and any(_pod_network_error(item) for item in fabric.pod_networks.split(",")):
        out.append(
            (
                "pod_networks",
                N_(
                    "%(value)r is not a list of NetworkAttachmentDefinitions: [namespace/]name, separated by ','",
                    value=fabric.pod_networks,
                ),
            )
        )
    return out


# --- what a workload gets -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NetworkPlan:
    """How one workload's ranks talk: `transport` "rdma", "tcp" or "" (NCCL's own choice, nothing set), the NCCL
    environment, the RDMA resource a pod requests (Kubernetes), the pod's networks (Kubernetes), the fabric's GRES
    (Slurm), and why, for the caveats."""

    transport: str = ""
    env: dict[str, str] = field(default_factory=dict)
    resources: dict[str, str] = field(default_factory=dict)
    ipc_lock: bool = False
    pod_networks: str = ""
    slurm_gres: str = ""
    why: str = ""


def spans_nodes(spec: Spec) -> bool:
    """The workload's ranks talk between nodes: a training job of several workers (not all on one node), an
    inference replica of several nodes."""
    if isinstance(spec, InferenceServiceSpec):
        return spec.multi_node
    assert isinstance(spec, TrainingJobSpec)
    most = max(spec.workers, spec.elastic.max_workers if spec.elastic else 0)
    return most > 1 and spec.topology != Topology.NODE


def network_plan(spec: Spec, fabric: Fabric | None) -> NetworkPlan:
    """What `spec` gets on a pool with `fabric` (None: not declared); RenderError("network") for rdma without an
    RDMA fabric."""
    fabric = fabric or Fabric()
    wanted = getattr(spec, "network", "auto")
    where = f"the {spec.gpu_model} pool {fabric.pool}" if fabric.pool else f"the {spec.gpu_model} pool"
    if wanted not in NETWORKS:
        raise RenderError("network", f"{wanted!r} is not one of {', '.join(NETWORKS)}")
    if wanted == "rdma" and not fabric.rdma:
        raise RenderError(
            "network",
            f"rdma needs a node pool with an InfiniBand or RoCE fabric; {where} on this cluster declares "
            f"'{fabric.kind}' (a platform admin declares it: PATCH /api/v1/pools/<id>/): use network auto or tcp",
        )
    if wanted == "auto":
        if not spans_nodes(spec):
            return NetworkPlan(why="one node: NCCL uses NVLink and shared memory")
        if fabric.kind == "none":
            return NetworkPlan(why=f"{where} declares no fabric: NCCL chooses")
        transport = "rdma" if fabric.rdma else "tcp"
        why = f"network auto: the workload spans nodes of {where}, whose fabric is {fabric.kind}"
    else:
        transport = wanted
        why = f"network {wanted}, on {where} (fabric {fabric.kind})"
    env = {"NCCL_IB_DISABLE": "0" if transport == "rdma" else "1"}
    if transport == "rdma":
        if fabric.nccl_ib_hca:
            env["NCCL_IB_HCA"] = fabric.nccl_ib_hca
        if fabric.kind == "roce" and fabric.nccl_ib_gid_index is not None:
            env["NCCL_IB_GID_INDEX"] = str(fabric.nccl_ib_gid_index)
    if fabric.nccl_socket_ifname:
        env["NCCL_SOCKET_IFNAME"] = fabric.nccl_socket_ifname
    rdma = transport == "rdma"
    return NetworkPlan(
        transport=transport,
        env=env,
        resources={fabric.rdma_resource: str(fabric.rdma_per_pod)} if rdma and fabric.rdma_resource else {},
        ipc_lock=rdma,
        pod_networks=fabric.pod_networks,
        slurm_gres=fabric.slurm_gres if rdma else "",
        why=why,
    )
