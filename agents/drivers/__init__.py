"""An agent's drivers: sockets, threads, processes and clocks around the sans-IO cores.

:mod:`~agents.drivers.runtime` runs one :class:`~agents.agent.Agent` in real
time; the camera driver, the swarm's sockets and interfaces, mDNS discovery,
the control socket, the console lines and the car lock are what it drives it
with. No core imports from here.
"""
