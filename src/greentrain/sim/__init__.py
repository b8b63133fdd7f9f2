"""Discrete-event simulation: the event engine, seed 000's device swarm, cluster pipeline schedules."""
