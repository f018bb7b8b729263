"""The `kubernetes` backend: the official client against a cluster's API server.

Modules: `connection` (an ApiClient from the cluster's settings), `api` (requests, paging, error
mapping), `resources` (where each kind lives), `inventory`, `workloads` (apply, status, cancel, usage),
`nodes` (cordon, taints, drain), `quota` (desired state push with a dry-run diff, drift), `backend`.
"""
