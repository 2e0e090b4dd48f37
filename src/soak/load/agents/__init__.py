"""Load agents on an engine: local processes, Docker Swarm services or a Kubernetes Job."""
