"""A seeded GPU fleet that behaves like a scheduler, for `simulated` clusters (demo, tests, benchmarks).

Pure Python (no Django):
  shape.py      fleet shape, validation, the generated fleet (names, racks, leaf switches, UUIDs)
  hardware.py   per-model figures (clocks, idle power, host CPU/memory) next to the catalog
  seeding.py    deterministic hashes and random generators
  specs.py      WorkloadSpec validation, placement request, seeded duration and outcome
  placement.py  gang / model / sharing / topology placement over in-memory GPU slots
  faults.py     fault kinds and their effects
  telemetry.py  one node's dcgm-exporter text
  serving.py    an inference service's vLLM / SGLang /metrics text, shaped by load, queue and replicas
Django:
  models.py     the persistent state (SimCluster, SimNode, SimWorkload, SimEvent, SimAllocation, SimFault)
  engine.py     load, tick (discrete events), operate, save: one locked transaction per call
  reports.py    inventory, status, usage and telemetry from a loaded engine
  backend.py    the Backend interface over the engine
  exporter.py   a node's or a service's scrape, loading only what it needs; views.py/urls.py serve them over HTTP
  services.py   create a simulated cluster, inject/clear faults, advance time (permission + audit)
"""
