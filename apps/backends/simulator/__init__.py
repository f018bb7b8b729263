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
  history.py    a workload's run as a log, GPU utilization over a past span (read from the tables, no lock)
  services.py   set up a cluster's simulation, inject/clear faults, advance time (permission + audit)
  controls.py   Simulation: what the console above the backends may do to a simulated cluster (faults, clock,
                fleet shape, summary), handed out by `SimulatorBackend.simulation()`
  api.py        the REST API of faults and time (mounted by the console's API router)
Creating the simulated fleet Cluster row is fleet's (apps.fleet.services.create_simulated_cluster), as is
`manage.py simulate`: backends sit below fleet and import nothing of it.
"""
