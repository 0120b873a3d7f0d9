"""``stigmesh view``: the swarm live in Foxglove (tools/view/live.py, stigmesh.layout.json)."""
