"""The load-agent fleet: a load carried by agents on an engine (soak.agents runs them).

    agent      `soak agent`: one agent's segment of the load config, its windows per second
    member     the agent's side under a run's coordinator: register, start_at, lease
    lease      the coordinator's side: who holds which segment, the asked rate divided
    launch     what an agent is started with (its AgentSpec)
    run_load   a soak run's load from agents, behind the face SupervisedLoad has
    merge      agents' results merged: counts summed, histograms added

The fleet stands on the load core (the generator, segments, the supervised load's
points) and on soak.agents (engines, coordinator, protocol), which sits below load/
and is shared with the sampler agent: so the fleet is here, not in soak.agents.
"""
