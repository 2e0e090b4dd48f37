"""Agents on an engine (local processes, Docker Swarm services, a Kubernetes Job) and
the run's coordinator they call; the payloads they carry (a load member, a sampler
member) live in soak.load and soak.samplers."""
