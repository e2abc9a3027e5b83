"""Facts about the machine, probed once per process and shared by builder and validators.

parsers.py   pure parsers over recorded text (/proc/meminfo, /proc/swaps, nvcc, nvidia-smi)
resources.py CPUs and memory this process may use (affinity, cgroup v1/v2 limits)
nvml.py      the NVML session: initialised at most once per process, shut down at exit
gpus.py      the GPU inventory (NVML, else nvidia-smi) and its model
snapshot.py  HostSnapshot: all of the above plus the topology, classified once
"""
