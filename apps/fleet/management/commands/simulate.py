"""Drive simulated clusters from the command line, as the system (audited with actor "system").

python manage.py simulate create --name C --nodes 32 --gpus-per-node 8 --models h100:0.5,a100:0.3,l40s:0.2 --seed 7
python manage.py simulate advance --cluster C --minutes 30
python manage.py simulate fault --cluster C --node gpu-0003 --kind xid79 --gpu 2 [--clear]
python manage.py simulate status --cluster C
"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from apps.backends.registry import backend_class, get_backend
from apps.core.errors import ServiceError
from apps.fleet.models import Cluster, ClusterKind
from apps.fleet.services import create_simulated_cluster

# The simulated backend's controls (faults, clock, fleet shape): the command asks them, never the simulator itself.
Simulation = backend_class(ClusterKind.SIMULATED).simulation_class


def _error(exc: ServiceError) -> CommandError:
    details = "".join(f"\n  {field}: {' '.join(messages)}" for field, messages in exc.fields.items())
    return CommandError(exc.message + details)


class Command(BaseCommand):
    help = "Create simulated GPU clusters, move their clock, inject or clear faults, and show a summary."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True, metavar="{create,advance,fault,status}")
        create = sub.add_parser("create", help="create a simulated cluster")
        create.add_argument("--name", required=True)
        create.add_argument("--nodes", type=int, required=True)
        create.add_argument("--gpus-per-node", type=int, default=8)
        create.add_argument("--models", default="h100:1", help="model mix, e.g. h100:0.5,a100:0.3,l40s:0.2")
        create.add_argument("--seed", type=int, default=0)
        create.add_argument("--nodes-per-rack", type=int, default=8)
        create.add_argument("--racks-per-leaf", type=int, default=4)
        create.add_argument("--hostname-label", choices=Simulation.HOSTNAME_LABELS, default="Hostname")
        create.add_argument("--description", default="")

        advance = sub.add_parser("advance", help="move simulated time forward")
        advance.add_argument("--cluster", required=True)
        advance.add_argument("--minutes", type=float, required=True)

        fault = sub.add_parser("fault", help="inject (or --clear) a fault")
        fault.add_argument("--cluster", required=True)
        fault.add_argument("--node", required=True)
        fault.add_argument("--kind", required=True, choices=Simulation.FAULT_KINDS)
        fault.add_argument("--gpu", type=int, help="GPU index (omit: every GPU of the node)")
        fault.add_argument("--reason", default="")
        fault.add_argument("--clear", action="store_true", help="clear the active fault instead")

        status = sub.add_parser("status", help="a short summary of a simulated cluster")
        status.add_argument("--cluster", required=True)

    def handle(self, *args, **opts):
        try:
            getattr(self, f"_{opts['action']}")(opts)
        except ServiceError as exc:
            raise _error(exc) from exc

    def _simulation(self, name: str):
        cluster = Cluster.objects.filter(name=name).first()
        if cluster is None:
            raise CommandError(f"No cluster {name!r}.")
        simulation = get_backend(cluster).simulation()
        if simulation is None or not simulation.exists():
            raise CommandError(f"Cluster {name!r} is a {cluster.kind} cluster, not a simulated one.")
        return simulation

    def _create(self, opts) -> None:
        try:
            models = Simulation.parse_models(opts["models"])
        except ServiceError as exc:
            raise CommandError(f"--models: {exc.message}") from exc
        shape = {
            "nodes": opts["nodes"],
            "gpus_per_node": opts["gpus_per_node"],
            "models": models,
            "seed": opts["seed"],
            "nodes_per_rack": opts["nodes_per_rack"],
            "racks_per_leaf": opts["racks_per_leaf"],
            "hostname_label": opts["hostname_label"],
        }
        cluster = create_simulated_cluster(None, opts["name"], shape, description=opts["description"])
        self.stdout.write(f"Created simulated cluster {cluster.name}: {get_backend(cluster).simulation().describe()}")

    def _advance(self, opts) -> None:
        now = self._simulation(opts["cluster"]).advance(None, opts["minutes"], reason="manage.py simulate")
        self.stdout.write(f"Simulated time is now {now.isoformat(timespec='seconds')}")

    def _fault(self, opts) -> None:
        simulation = self._simulation(opts["cluster"])
        if not opts["clear"]:
            fault = simulation.inject_fault(None, opts["node"], opts["kind"], opts["gpu"], opts["reason"])
            self.stdout.write(f"Injected {fault} (fault {fault.pk})")
            return
        fault = simulation.active_fault(opts["node"], opts["kind"], opts["gpu"])
        if fault is None:
            where = opts["node"] if opts["gpu"] is None else f"{opts['node']} GPU {opts['gpu']}"
            raise CommandError(f"No active {opts['kind']} fault on {where} in {opts['cluster']}.")
        simulation.clear_fault(None, fault, opts["reason"])
        self.stdout.write(f"Cleared {fault}")

    def _status(self, opts) -> None:
        self.stdout.write(self._simulation(opts["cluster"]).summary())
