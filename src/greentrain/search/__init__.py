"""Strategy search: enumerate the parallel-strategy space of a scenario and rank it (`greentrain search`)."""
