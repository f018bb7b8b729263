"""Health services, one module per concern: rule sets, incidents, isolation, runbook actions, notifications."""
