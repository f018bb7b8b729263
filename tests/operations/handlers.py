"""Operation handlers used by the operation tests (registered on import)."""

from apps.operations.runner import OperationFailed, OperationHandler, register

CALLS: list[int] = []


@register("test.count")
class CountHandler(OperationHandler):
    """Counts its runs so tests can see work done once; logs and reports progress like a real handler."""

    action = "submit"

    def run(self) -> dict:
        CALLS.append(self.operation.pk)
        self.log("step 1")
        self.set_progress(50)
        self.log("step 2")
        return {"steps": 2}


@register("test.fail")
class FailHandler(OperationHandler):
    action = "submit"

    def run(self) -> dict:
        raise OperationFailed("backend said no: node gpu-07 is not drainable")


@register("test.crash")
class CrashHandler(OperationHandler):
    action = "submit"

    def run(self) -> dict:
        self.log("about to crash")
        return {"x": 1 / 0}


@register("test.renamed", formerly="test.old_name")
class RenamedHandler(OperationHandler):
    """A kind that was once spelled otherwise: rows still stored under the old name run it too."""

    action = "submit"

    def run(self) -> dict:
        CALLS.append(self.operation.pk)
        return {"kind": self.kind}
